"""The `twill` console script: `main` with Ctrl-C handled even while the commands are imported.

`twill_cli.main` imports click and every command module; an interrupt that lands there, before
`TwillGroup` can catch it, would end in a traceback. This module imports nothing until it runs.

An interrupted run (130) or a terminated one (143) leaves through `os._exit` once its message is out and
its `finally` blocks have run (the scratch folder, the output's temporary file): a solver's worker thread
that has not yet come back from native code when the interpreter exits aborts the process in a C++
destructor (`terminate called without an active exception`, exit -6, seen once in a suite run under load),
and nothing the interpreter would still do on the way out is needed then.
"""

STOPPED = (130, 143)  # SIGINT's and SIGTERM's exit codes


def run() -> int:
    try:
        from .main import main
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
