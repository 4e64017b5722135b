"""The Python SDK over the vsh facade: runs, commits, approvals, errors,
values and threads."""

import json
import os
import pathlib
import threading
import time
from typing import Callable

import pytest

import vsh

WRITE_B = "from pathlib import Path\nPath('b.txt').write_text(Path('a.txt').read_text().upper())"


def test_a_preview_writes_nothing_and_its_commit_lands_once(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    receipt = rt.preview(WRITE_B, intent="make b", detail="full")
    assert receipt.state == "auto-approved"
    assert receipt.decision == {"kind": "auto-approved"}
    assert receipt.changed_paths == 1 and receipt.changes[0]["path"] == "b.txt"
    assert not (workspace / "b.txt").exists()
    assert repr(receipt).startswith("Receipt(transaction='")
    document = receipt.to_dict()
    assert document["schema"] == "vsh.receipt/1" and document["transaction"] == receipt.transaction
    committed = rt.commit(receipt.transaction[:10])
    assert committed.state == "committed"
    assert (workspace / "b.txt").read_text() == "ALPHA\n"


def test_a_receipt_lists_its_changes_by_default_and_show_reviews_them(runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    receipt = rt.preview(WRITE_B)
    assert [change["path"] for change in receipt.changes] == ["b.txt"]
    assert rt.preview(WRITE_B, detail="compact").changes == []
    # A held preview made with compact detail still shows what it changes.
    compact = rt.preview(WRITE_B, detail="compact")
    shown = rt.show(compact.transaction)
    assert shown is not None and [change["path"] for change in shown.changes] == ["b.txt"]
    assert shown.to_dict()["review"] == []
    reviewed = rt.show(compact.transaction, review=True)
    assert reviewed is not None
    hunks = reviewed.to_dict()["review"][0]["hunks"]
    assert reviewed.to_dict()["review"][0]["path"] == "b.txt" and "+ALPHA" in hunks
    pending = rt.preview("from pathlib import Path\nPath('a.txt').unlink()")
    stored = rt.show(pending.transaction, review=True)
    assert stored is not None and "-alpha" in stored.to_dict()["review"][0]["hunks"]


def test_commit_and_reject_again_change_nothing_and_say_what_is(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    committed = rt.commit(rt.preview(WRITE_B).transaction)
    again = rt.commit(committed.transaction)
    assert again.state == "committed" and again.transaction == committed.transaction
    shown = rt.show(committed.transaction)
    assert shown is not None and [change["path"] for change in shown.changes] == ["b.txt"]
    assert (workspace / "b.txt").read_text() == "ALPHA\n"
    pending = rt.preview("from pathlib import Path\nPath('a.txt').unlink()")
    first = rt.reject(pending.transaction)
    second = rt.reject(pending.transaction)
    assert first["state"] == second["state"] == "rejected"


def test_a_discarded_preview_can_never_commit(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    for _ in range(70):  # more than the 64 previews a runtime holds
        assert rt.discard(rt.preview(WRITE_B).transaction)
    receipt = rt.preview(WRITE_B)
    assert rt.discard(receipt.transaction) and not rt.discard(receipt.transaction)
    with pytest.raises(vsh.VshError):
        rt.commit(receipt.transaction)
    assert not (workspace / "b.txt").exists()


def test_auto_mode_commits_what_the_policy_auto_approves(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    receipt = runtime().run("from pathlib import Path\nPath('c.txt').write_text('c')\nprint('made c')")
    assert receipt.state == "committed" and receipt.stdout == "made c\n"
    assert (workspace / "c.txt").read_text() == "c"


def test_pending_work_is_approved_and_committed_by_another_runtime(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    first = runtime()
    receipt = first.preview("from pathlib import Path\nPath('a.txt').unlink()")
    assert receipt.state == "pending-approval"
    assert receipt.decision["kind"] == "pending-approval" and "deletion" in receipt.decision["flags"]
    with pytest.raises(vsh.ApprovalError):
        first.commit(receipt.transaction)
    second = runtime()
    assert [row["transaction"] for row in second.pending()] == [receipt.transaction]
    record = second.approve(receipt.transaction, "alice", ttl=60)
    assert (record["schema"], record["state"]) == ("vsh.record/1", "approved")
    assert second.commit(receipt.transaction).state == "committed"
    assert not (workspace / "a.txt").exists()


def test_a_stale_commit_names_every_conflicting_path(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    receipt = rt.preview(WRITE_B)
    (workspace / "a.txt").write_text("changed\n")
    with pytest.raises(vsh.StaleError) as caught:
        rt.commit(receipt.transaction)
    assert caught.value.paths == ["a.txt"]
    assert caught.value.document["kind"] == "commit"
    assert not (workspace / "b.txt").exists()


def test_a_refused_access_is_policy_denied_with_its_manifest(runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    with pytest.raises(vsh.PolicyDenied) as caught:
        rt.preview("from pathlib import Path\nPath('.env').read_text()")
    assert caught.value.denied[0]["path"] == ".env"
    assert caught.value.denied[0]["remedy"]
    # The refused work is on record as denied, with what the program raised.
    assert caught.value.document["state"] == "denied"
    assert caught.value.exception is not None
    assert caught.value.exception.endswith("PermissionError: [Errno 13] Permission denied: '.env'")
    assert caught.value.transaction is not None
    shown = rt.show(caught.value.transaction)
    assert shown is not None and shown.state == "denied"
    # A caught refusal still denies: the receipt says so.
    receipt = rt.preview("from pathlib import Path\ntry:\n    Path('.env').read_text()\nexcept PermissionError:\n    pass")
    assert receipt.state == "denied" and receipt.decision["kind"] == "denied"
    assert receipt.decision["denied"][0]["path"] == ".env"


def test_every_exception_is_a_vsh_error(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    with pytest.raises(vsh.ExecutionError):
        rt.preview("1 / 0")
    with pytest.raises(vsh.ExecutionError) as bash:
        rt.preview("echo half > h.txt; exit 3", language="bash")
    assert bash.value.document["status"] == 3
    assert bash.value.document["changes"][0]["path"] == "h.txt"
    with pytest.raises(vsh.VshError):
        rt.commit("ffffffffffff")
    with pytest.raises(vsh.ConfigurationError):
        vsh.Runtime(workspace / "missing")
    with pytest.raises(ValueError):
        rt.preview("1", language="cobol")  # type: ignore[arg-type]
    for error in (
        vsh.ExecutionError,
        vsh.PolicyDenied,
        vsh.StaleError,
        vsh.ApprovalError,
        vsh.StoreError,
        vsh.RecoveryError,
        vsh.ConfigurationError,
        vsh.CancelledError,
        vsh.InternalError,
    ):
        assert issubclass(error, vsh.VshError)


def test_a_corrupt_transaction_log_is_a_store_error(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    rt.preview("from pathlib import Path\nPath('a.txt').unlink()")  # pending: a durable record
    log = workspace / ".vsh" / "data" / "txlog"
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(vsh.StoreError) as caught:
        runtime().pending()
    assert caught.value.document["kind"] == "store" and "corrupt" in str(caught.value)
    assert (workspace / "a.txt").exists()


def test_a_commit_that_recovery_must_leave_to_an_operator_is_a_recovery_error(
    workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]
) -> None:
    rt = runtime()
    assert rt.run("from pathlib import Path\nPath('b.txt').write_text('b')").state == "committed"
    # A hostile entry where vsh keeps interrupted commits: never followed.
    os.symlink("/", workspace / ".vsh" / "txn" / "evil")
    with pytest.raises(vsh.RecoveryError) as caught:
        rt.run("from pathlib import Path\nPath('c.txt').write_text('c')")
    assert ".vsh/txn/evil" in str(caught.value) and "not followed" in str(caught.value)
    assert not (workspace / "c.txt").exists()


def test_a_panic_at_the_boundary_is_an_internal_error() -> None:
    panic = getattr(vsh._vsh, "_test_panic")  # the test-hooks build only
    with pytest.raises(vsh.InternalError):
        panic()


def test_values_convert_to_python_objects(runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    code = "from pathlib import Path\n(None, True, 7, 10**30, 2.5, 'text', b'\\x00\\xff', [1, [2]], (3,), {'k': 'v'}, {4}, frozenset({5}), Path('/workspace/a.txt'), ...)"
    value = rt.preview(code).value
    assert value[:12] == (None, True, 7, 10**30, 2.5, "text", b"\x00\xff", [1, [2]], (3,), {"k": "v"}, {4}, frozenset({5}))
    assert str(value[12]) == "/workspace/a.txt"
    assert value[13] is Ellipsis


def test_dates_times_named_tuples_types_and_exceptions_convert(runtime: Callable[[], vsh.Runtime]) -> None:
    import datetime

    code = (
        "import datetime\nimport os\n"
        "zone = datetime.timezone(datetime.timedelta(hours=2), 'X')\n"
        "(datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 2, 3, 4, 5, 6),"
        " datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=zone), datetime.time(1, 2, 3, 4),"
        " datetime.timedelta(days=1, seconds=5, microseconds=7), zone, datetime.timezone.utc,"
        " int, ValueError, ValueError('bad'), KeyError(), NotImplemented, os.stat('a.txt'))"
    )
    value = runtime().preview(code).value
    zone = datetime.timezone(datetime.timedelta(hours=2), "X")
    assert value[0] == datetime.date(2024, 1, 2) and type(value[0]) is datetime.date
    assert value[1] == datetime.datetime(2024, 1, 2, 3, 4, 5, 6) and value[1].tzinfo is None
    assert value[2] == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=zone) and value[2].tzname() == "X"
    assert value[3] == datetime.time(1, 2, 3, 4)
    assert value[4] == datetime.timedelta(days=1, seconds=5, microseconds=7)
    assert value[5] == zone and value[6] == datetime.timezone.utc
    assert value[7] is int and value[8] is ValueError
    assert type(value[9]) is ValueError and value[9].args == ("bad",)
    assert type(value[10]) is KeyError and value[10].args == ()
    assert value[11] is NotImplemented
    stat = value[12]
    assert isinstance(stat, tuple) and getattr(stat, "st_size") == 6 and getattr(stat, "st_nlink") == 1
    assert type(stat).__name__ == "StatResult" and getattr(stat, "_fields")[:2] == ("st_mode", "st_ino")


def test_a_hook_that_sends_work_to_review_leaves_it_pending(workspace: pathlib.Path) -> None:
    events: list[vsh.RequestEvent] = []

    def review(event: vsh.RequestEvent) -> "tuple[vsh.Decision, str]":
        events.append(event)
        return vsh.Decision.REVIEW, "a person should look"

    rt = vsh.Runtime(workspace, hook=review, hook_scope="all-requests", hook_content_bytes=1 << 20)
    preview = rt.preview(WRITE_B)
    assert preview.state == "auto-approved" and events == [], "a preview never asks the hook"
    receipt = rt.run(WRITE_B, intent="make b")
    assert receipt.state == "pending-approval"
    assert receipt.hook is not None and receipt.hook["decision"] == "review"
    assert receipt.hook["reason"] == "a person should look"
    assert not (workspace / "b.txt").exists()
    [event] = events
    assert event.transaction == receipt.transaction and event.state == "auto-approved"
    assert event.intent == "make b" and event.decision == {"kind": "auto-approved"}
    assert [change["path"] for change in event.changes] == ["b.txt"]
    assert event.effects == [{"kind": "write", "path": "b.txt", "to": None}]
    assert [(item["path"], item["after"], item["bytes"]) for item in event.contents] == [("b.txt", True, b"ALPHA\n")]
    assert event.content_complete and event.evidence_complete
    assert event.to_dict()["schema"] == "vsh.request-event/1"
    assert event.to_dict()["binding"]["diff"] == receipt.to_dict()["diff"]
    assert [row["transaction"] for row in rt.pending()] == [receipt.transaction]


def test_a_hook_that_approves_commits_pending_work(workspace: pathlib.Path) -> None:
    asked: list[str] = []

    def approve(event: vsh.RequestEvent) -> "tuple[vsh.Decision, str]":
        asked.append(event.state)
        return vsh.Decision.APPROVE, "deleting a.txt is fine"

    rt = vsh.Runtime(workspace, hook=approve)
    tiny = rt.run("from pathlib import Path\nPath('c.txt').write_text('c')")
    assert tiny.state == "committed" and tiny.hook is None, "review-required scope skips auto-approved work"
    receipt = rt.run("from pathlib import Path\nPath('a.txt').unlink()")
    assert asked == ["pending-approval"]
    assert receipt.state == "committed"
    assert receipt.hook is not None and receipt.hook["decision"] == "approve"
    assert not (workspace / "a.txt").exists()


def test_a_hook_that_rejects_makes_commit_raise(workspace: pathlib.Path) -> None:
    rt = vsh.Runtime(workspace, hook=lambda event: (vsh.Decision.REJECT, "no"), hook_scope="all-requests")
    preview = rt.preview(WRITE_B)
    with pytest.raises(vsh.ApprovalError) as caught:
        rt.commit(preview.transaction)
    assert caught.value.hook["decision"] == "reject" and caught.value.hook["reason"] == "no"
    assert caught.value.state == "rejected"
    assert not (workspace / "b.txt").exists()
    with pytest.raises(vsh.VshError):
        rt.commit(preview.transaction)


def test_a_hook_that_follows_the_policy_commits_auto_approved_work(workspace: pathlib.Path) -> None:
    rt = vsh.Runtime(workspace, hook=lambda event: vsh.Decision.FOLLOW_POLICY, hook_scope="all-requests")
    receipt = rt.run(WRITE_B)
    assert receipt.state == "committed" and receipt.hook is not None
    assert receipt.hook["decision"] == "follow-policy"
    assert (workspace / "b.txt").read_text() == "ALPHA\n"


def test_a_failing_hook_commits_nothing_and_its_error_propagates(workspace: pathlib.Path) -> None:
    def broken(event: vsh.RequestEvent) -> vsh.Decision:
        raise RuntimeError("the reviewer is down")

    rt = vsh.Runtime(workspace, hook=broken, hook_scope="all-requests")
    with pytest.raises(RuntimeError, match="the reviewer is down"):
        rt.run(WRITE_B)
    assert not (workspace / "b.txt").exists()
    [row] = rt.pending()
    assert row["state"] == "pending-approval", "auto-approved work falls back to review"
    wrong = vsh.Runtime(workspace, hook=lambda event: "approve", hook_scope="all-requests")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="vsh.Decision"):
        wrong.run("from pathlib import Path\nPath('d.txt').write_text('d')")
    assert not (workspace / "d.txt").exists()
    with pytest.raises(TypeError):
        vsh.Runtime(workspace, hook=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        vsh.Runtime(workspace, hook=broken, hook_scope="sometimes")  # type: ignore[arg-type]


def test_bash_programs_run_when_enabled(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    receipt = runtime().run("tr a-z A-Z < a.txt > up.txt; echo note >&2", language="bash")
    assert receipt.state == "committed" and receipt.stderr == "note\n" and receipt.value is None
    assert (workspace / "up.txt").read_text() == "ALPHA\n"


def test_real_commands_run_when_enabled_and_only_then(workspace: pathlib.Path) -> None:
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        assert not os.environ.get("VSH_REQUIRE_SANDBOX"), "real commands need root and /dev/fuse"
        pytest.skip("real commands need root and /dev/fuse")
    argv = json.dumps(["/bin/sh", "-c", "echo $GREETING > out.txt; tr a-z A-Z < a.txt"])
    # The refusal says what opens the language (ux78 L2).
    with pytest.raises(vsh.ExecutionError, match=r"commands=True"):
        vsh.Runtime(workspace).run(argv, language="command")
    with pytest.raises(ValueError):
        vsh.Runtime(workspace, network="loopback")
    rt = vsh.Runtime(workspace, commands=True, command_env={"GREETING": "hi"})
    receipt = rt.run(argv, language="command")
    assert receipt.state == "committed" and receipt.stdout == "ALPHA\n", receipt.to_dict()
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert receipt.to_dict()["language"] == "command"
    # A Monty program tests its own edit in the same transaction.
    program = "from pathlib import Path\nPath('a.txt').write_text('beta\\n')\nvsh_exec(['cat', 'a.txt'])"
    preview = rt.preview(program)
    assert preview.value == (0, "beta\n", ""), preview.value
    assert (workspace / "a.txt").read_text() == "alpha\n"
    # A command's input is part of its program text; vsh_exec takes its own.
    fed = json.dumps({"argv": ["/bin/sh", "-c", "tr a-z A-Z > shout.txt"], "stdin": "quiet\n"})
    assert rt.run(fed, language="command").state == "committed"
    assert (workspace / "shout.txt").read_text() == "QUIET\n"
    assert rt.preview("vsh_exec(['wc', '-c'], input=b'four')").value == (0, "4\n", "")
    # A failing command says why in str(error): the end of what it printed,
    # on stdout where a test runner reports.
    failing = json.dumps(["/bin/sh", "-c", "echo 'FAILED test_total - assert 8 == 6'; exit 1"])
    with pytest.raises(vsh.ExecutionError) as failed:
        rt.preview(failing, language="command")
    assert str(failed.value).endswith("FAILED test_total - assert 8 == 6"), str(failed.value)


def test_the_gil_is_released_while_a_program_runs(runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    done = threading.Event()

    def long_run() -> None:
        try:
            rt.preview("n = 0\nfor i in range(200000):\n    n += i\nn")
        finally:
            done.set()

    thread = threading.Thread(target=long_run)
    started = time.monotonic()
    thread.start()
    ticks = 0
    while not done.is_set() and time.monotonic() - started < 30:
        ticks += 1
        time.sleep(0.001)
    thread.join()
    assert time.monotonic() - started > 0.05, "the program ran long enough to tell"
    assert ticks > 10, "this thread ran while the program did"


def test_four_threads_run_at_once(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    results: list[str] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        receipt = rt.run(f"from pathlib import Path\nPath('t{index}.txt').write_text('{index}')")
        with lock:
            results.append(receipt.state)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["committed"] * 4
    assert sorted(path.name for path in workspace.glob("t*.txt")) == ["t0.txt", "t1.txt", "t2.txt", "t3.txt"]


def test_a_budget_lowers_a_run_s_limits(runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    with pytest.raises(vsh.ExecutionError) as caught:
        rt.preview("print('x' * 100)", budget={"max_output_bytes": 10})
    assert "output" in str(caught.value)
    assert rt.preview("print('ok')", budget={"timeout": 5, "max_os_calls": 5}).stdout == "ok\n"
    with pytest.raises(ValueError):
        rt.preview("1", budget={"max_wishes": 3})  # type: ignore[arg-type]


def test_cancellation_from_another_thread_stops_the_run(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    cancel = vsh.Cancellation()
    timer = threading.Timer(0.3, cancel.cancel)
    timer.start()
    started = time.monotonic()
    with pytest.raises(vsh.CancelledError):
        rt.run("from pathlib import Path\nPath('late.txt').write_text('x')\nwhile True:\n    pass", budget={"timeout": 60}, cancel=cancel)
    assert time.monotonic() - started < 30, "the cancel, not the minute, ended it"
    assert cancel.cancelled
    assert not (workspace / "late.txt").exists()
    assert rt.pending() == []


def test_the_example_agent_loop_runs(workspace: pathlib.Path) -> None:
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[2] / "examples/python/agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    steps = example.run_agent(str(workspace), example.SCRIPTED_MODEL)
    assert [step.get("state") for step in steps] == ["committed", "committed", "pending-approval", None]
    assert steps[1]["stdout"] == "- [x] write the docs\n"
    assert steps[3]["ok"] is False and steps[3]["denied"][0]["path"] == ".env"
    assert (workspace / "TODO.md").read_text() == "- [x] write the docs\n"
