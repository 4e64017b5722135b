"""The Python SDK over the vsh facade: runs, commits, approvals, errors,
values and threads."""

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


def test_values_convert_to_python_objects(runtime: Callable[[], vsh.Runtime]) -> None:
    rt = runtime()
    code = "from pathlib import Path\n(None, True, 7, 10**30, 2.5, 'text', b'\\x00\\xff', [1, [2]], (3,), {'k': 'v'}, {4}, frozenset({5}), Path('/workspace/a.txt'), ...)"
    value = rt.preview(code).value
    assert value[:12] == (None, True, 7, 10**30, 2.5, "text", b"\x00\xff", [1, [2]], (3,), {"k": "v"}, {4}, frozenset({5}))
    assert str(value[12]) == "/workspace/a.txt"
    assert value[13] is Ellipsis


def test_bash_programs_run_when_enabled(workspace: pathlib.Path, runtime: Callable[[], vsh.Runtime]) -> None:
    receipt = runtime().run("tr a-z A-Z < a.txt > up.txt; echo note >&2", language="bash")
    assert receipt.state == "committed" and receipt.stderr == "note\n" and receipt.value is None
    assert (workspace / "up.txt").read_text() == "ALPHA\n"


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
