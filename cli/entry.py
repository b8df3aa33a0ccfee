"""The `twill` console script: `main` with Ctrl-C handled even while the commands are imported.

`twill_cli.main` imports click and every command module; an interrupt that lands there, before
`TwillGroup` can catch it, would end in a traceback. This module imports nothing until it runs.
A Ctrl-C that lands inside a callback Python runs while importing (the import lock's weakref callback) is
printed as "Exception ignored" and dropped, and the run used to go on to the end and exit 0 (seen once in a
clean-clone CI run, session 36): `run` installs Python's own handler under a record, and an interrupt recorded
while the commands were imported ends the run as any other.

An interrupted run (130) or a terminated one (143) leaves through `os._exit` once its message is out and
its `finally` blocks have run (the scratch folder, the output's temporary file): a solver's worker thread
that has not yet come back from native code when the interpreter exits aborts the process in a C++
destructor (`terminate called without an active exception`, exit -6, seen once in a suite run under load),
and nothing the interpreter would still do on the way out is needed then.
"""

STOPPED = (130, 143)  # SIGINT's and SIGTERM's exit codes


def run() -> int:
    import signal
    caught = []

    def interrupt(signum, frame):  # Python's own SIGINT handler, and a record that it ran
        caught.append(signum)
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (not where the caller ignores SIGINT)
        signal.signal(signal.SIGINT, interrupt)
    try:
        from .main import main
        if caught:  # a Ctrl-C raised inside a callback while importing (the import lock's weakref callback) is
            raise KeyboardInterrupt  # printed and dropped by Python ("Exception ignored in"): the run went on
        return main()
    except KeyboardInterrupt:
        import sys
        sys.stderr.write("interrupted: no file was written\n")
        _leave(130)
    except SystemExit as exc:
        if exc.code in STOPPED:
            _leave(exc.code)
        raise


def _leave(code: int) -> None:
    import os
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
