"""Running one measurement in a fresh Python process, shared by the benchmark scripts.

`run_child(cmd, timeout, cwd)` starts `cmd` in a session of its own (so a timeout kills it and the
CBC it started, nothing else), and returns the last JSON line it printed, or a status dict, plus
its wall time. The scripts' `--child` modes print exactly one such line.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time


def run_child(cmd: list[str], timeout: float, cwd) -> tuple[dict, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=cwd)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: it and CBC, nothing else
        except ProcessLookupError:
            pass
        proc.communicate()
        return {"status": "timeout"}, time.perf_counter() - t0
    elapsed = time.perf_counter() - t0
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"status": "error", "error": tail[:300]}, elapsed
    return json.loads(lines[-1]), elapsed
