"""The `twill` console script: `main` with Ctrl-C handled even while the commands are imported.

`twill_cli.main` imports click and every command module; an interrupt that lands there, before
`TwillGroup` can catch it, would end in a traceback. This module imports nothing until it runs.
"""


def run() -> int:
    try:
        from .main import main
        return main()
    except KeyboardInterrupt:
        import sys
        sys.stderr.write("interrupted: no file was written\n")
        return 130
