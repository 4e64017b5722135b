"""Tiny preview from Python against the same call from Rust.

Opens one runtime (the confined worker, as an application does) on a small
workspace and alternates rounds: ``ROUND`` previews of the same tiny
program through ``Runtime.preview`` from Python (argument parsing, the GIL
released and taken back, the receipt and its document as Python objects),
then ``ROUND`` through ``vsh::Runtime::preview`` called from Rust on the
same runtime (``vsh._vsh._time_rust_previews``). Prints p50 and p95 of
each and their ratio, and writes them as JSON to the path given as the
first argument, if any. The target: Python p50 at most 1.2x Rust's.
"""

import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import vsh
from vsh import _vsh

TINY = "from pathlib import Path\nPath('out.txt').write_text(Path('in.txt').read_text().upper())"
ROUNDS = 20
ROUND = 50


def percentile(samples: list[int], fraction: float) -> float:
    ordered = sorted(samples)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        os.environ["VSH_AUTHORITY_KEY"] = str(root / "authority.key")
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "in.txt").write_text("hello\n")
        runtime = vsh.Runtime(workspace)
        for _ in range(ROUND):  # warm the worker pool and caches
            runtime.discard(runtime.preview(TINY).transaction)
        python: list[int] = []
        rust: list[int] = []
        for _ in range(ROUNDS):
            for _ in range(ROUND):
                started = time.perf_counter_ns()
                receipt = runtime.preview(TINY)
                python.append(time.perf_counter_ns() - started)
                assert receipt.state == "auto-approved"
                runtime.discard(receipt.transaction)  # untimed, as on the Rust side
            rust.extend(_vsh._time_rust_previews(runtime, TINY, ROUND))
    result = {
        "workload": "tiny preview (worker)",
        "samples": len(python),
        "python_p50_us": percentile(python, 0.5) / 1e3,
        "python_p95_us": percentile(python, 0.95) / 1e3,
        "rust_p50_us": percentile(rust, 0.5) / 1e3,
        "rust_p95_us": percentile(rust, 0.95) / 1e3,
        "python_mean_us": statistics.fmean(python) / 1e3,
        "rust_mean_us": statistics.fmean(rust) / 1e3,
    }
    result["ratio_p50"] = result["python_p50_us"] / result["rust_p50_us"]
    print(
        f"tiny preview: Python p50 {result['python_p50_us']:.1f} us (p95 {result['python_p95_us']:.1f}), "
        f"Rust p50 {result['rust_p50_us']:.1f} us (p95 {result['rust_p95_us']:.1f}), "
        f"ratio {result['ratio_p50']:.3f} (target <= 1.2)"
    )
    if len(sys.argv) > 1:
        pathlib.Path(sys.argv[1]).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
