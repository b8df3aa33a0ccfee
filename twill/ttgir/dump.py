"""Pick the IR before Triton's pipeliner out of a whole ``MLIR_ENABLE_DUMP=1`` log.

With ``MLIR_ENABLE_DUMP=1`` Triton prints the module before every pass, each copy after a header::

    // -----// IR Dump Before TritonGPUAssignLatencies (tritongpu-assign-latencies) ('builtin.module' operation) //----- //

Given such a log, the importer keeps the copies printed before the first pipelining pass (the
latency assignment that starts the pipeliner in recent Triton, else the one-pass pipeliner of older
releases) and blanks every other line, so that line numbers in messages still point into
the log. Text without such headers is used as it is.
"""
from __future__ import annotations

import re

from ..errors import Diagnostic, InputError

HEADER = re.compile(r"^// -----// IR Dump Before (\S+) \(([^)]*)\)")  # MLIR's IR-printing header
# The passes that start Triton's software pipeliner, newest first (class name, command-line name).
PIPELINER = (("TritonGPUAssignLatencies", "tritongpu-assign-latencies"),
             ("TritonGPUPipeline", "tritongpu-pipeline"))


def before_pipeliner(text: str, file: str) -> str:
    lines = text.split("\n")
    headers = [(i, m.group(1), m.group(2)) for i, line in enumerate(lines) if (m := HEADER.match(line))]
    if not headers:
        return text
    for names in PIPELINER:
        starts = [i for i, cls, flag in headers if cls in names or flag in names]
        if starts:
            break
    else:
        raise InputError(Diagnostic(
            f"{file}: an MLIR pass dump with no copy of the IR before the pipeliner "
            f"({' or '.join(p[0] for p in PIPELINER)})",
            hint="Triton pipelines only for sm_80 and newer; or pass the IR of one module alone"))
    ends = {i: next((j for j, _, _ in headers if j > i), len(lines)) for i in starts}
    keep = {k for i in starts for k in range(i + 1, ends[i])}
    return "\n".join(line if k in keep else "" for k, line in enumerate(lines))
