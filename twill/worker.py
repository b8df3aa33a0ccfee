"""A native solver's search in a worker thread, stopped at a deadline or by Ctrl-C.

The solvers' bindings (ctypes for Yices, OR-Tools' extension for CP-SAT) release the GIL while they
search, so the main thread waits on the worker in short steps: it watches the clock and takes a
KeyboardInterrupt (or the CLI's Terminated) when one comes. It then stops the search with the solver's
own thread-safe stop and waits for the worker to come back: a context disposed under a running search,
or a worker still in native code as the interpreter exits, aborts the process.

An interrupt can land anywhere in the main thread, also inside `Thread.start` before the thread exists.
A worker that never ran never says it is done, and a run once waited for it forever (CI, session 38).
So the worker waits for a go-ahead before it touches the solver. The go-ahead is given inside the
`try` that stops and waits. A worker that an interrupt leaves waiting is told to give up; one
interrupted inside `start` never gets the go-ahead and never touches the solver.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

POLL_SECONDS = 0.1  # how often the waiting thread looks at the clock (and lets Ctrl-C in)


def run_stoppable(search: Callable[[], object], stop: Callable[[], None],
                  deadline: float | None = None, cpu_until: float | None = None) -> tuple[object, bool]:
    """`search()` run in a worker thread, `stop()` (thread-safe, a no-op while no search runs) called
    from this one at `deadline` (time.monotonic() seconds), once the process' CPU time
    (time.process_time(), every thread's) reaches `cpu_until`, and on any exception that interrupts
    the wait. Returns (search's answer, whether the deadline or the CPU bound stopped it); re-raises
    what `search` raised, and the interrupt once the worker is done."""
    answer: list = []
    go, done = threading.Event(), threading.Event()
    cancelled = threading.Event()

    def work():
        go.wait()
        try:
            if not cancelled.is_set():
                answer.append(search())
        except BaseException as exc:  # re-raised in the caller's thread
            answer.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="twill-search", daemon=True)
    worker.start()  # (an interrupt in here leaves at most a worker that waits for `go` and never searches)
    stopped = False
    try:
        go.set()
        while not done.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if cpu_until is not None:  # (CPU time passes no faster than the wall clock on one thread)
                cpu_left = cpu_until - time.process_time()
                left = cpu_left if left is None else min(left, cpu_left)
            if left is not None and left <= 0:
                stop()  # (again at every step: a stop that comes before the search has begun does nothing)
                stopped = True
            done.wait(POLL_SECONDS if left is None or left <= 0 else min(POLL_SECONDS, left))
    except BaseException:
        _cancel_and_wait(stop, go, done, cancelled)
        raise
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0], stopped


def _cancel_and_wait(stop, go: threading.Event, done: threading.Event, cancelled: threading.Event) -> None:
    """Tell a worker that has not begun to give up, stop one that has, and wait until it is done,
    whatever interrupts the wait (the first interrupt is the one re-raised)."""
    while not done.is_set():
        try:
            cancelled.set()
            go.set()
            stop()
            done.wait(0.05)
        except BaseException:
            continue
