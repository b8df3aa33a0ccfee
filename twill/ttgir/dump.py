"""Pick the IR before Triton's pipeliner out of a whole ``MLIR_ENABLE_DUMP=1`` log.

With ``MLIR_ENABLE_DUMP=1`` Triton prints the module before every pass, each copy after a header,
which MLIR has spelled two ways (the pass's options after the colon in the newer one)::

    // -----// IR Dump Before TritonGPUAssignLatencies (tritongpu-assign-latencies) ('builtin.module' operation) //----- //
    // -----// IR Dump Before TritonGPUAssignLatencies: tritongpu-assign-latencies{num-stages=3} ('builtin.module' operation) //----- //

Given such a log, the importer keeps the copies printed before the first pipelining pass (the
latency assignment that starts the pipeliner in recent Triton, else the one-pass pipeliner of older
releases) and blanks every other line (Python's warnings printed to the same stream among them), so
that line numbers in messages still point into the log. Text without such headers is used as it is.
"""
from __future__ import annotations

import re

from ..errors import Diagnostic, InputError

# MLIR's IR-printing header: the pass's class name, then its command-line name in parentheses or after
# a colon (with its options in braces)
HEADER = re.compile(r"^// -----// IR Dump Before ([\w.:]+?)(?: \(([\w.-]+)\)|: ([\w.-]+))")
ANY_HEADER = re.compile(r"^// -----// .*IR Dump")  # SoftwarePipeliner internal IR Dump After: ... too
# The passes that start Triton's software pipeliner, newest first (class name, command-line name).
PIPELINER = (("TritonGPUAssignLatencies", "tritongpu-assign-latencies"),
             ("TritonGPUPipeline", "tritongpu-pipeline"))


def before_pipeliner(text: str, file: str) -> str:
    lines = text.split("\n")
    headers = [(i, m.group(1), m.group(2) or m.group(3)) for i, line in enumerate(lines)
               if (m := HEADER.match(line))]
    if not headers:
        other = next((i for i, line in enumerate(lines) if ANY_HEADER.match(line)), None)
        if other is not None:  # a dump, but in a spelling we do not know: never guess a copy
            raise InputError(Diagnostic(
                f"{file}:{other + 1}:1: an MLIR pass dump whose headers twill cannot read",
                hint="expected '// -----// IR Dump Before PASS (pass-name)' or '... Before PASS: pass-name{...}'; "
                     "or pass the IR of one module alone"))
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
    bounds = [i for i, line in enumerate(lines) if ANY_HEADER.match(line)]  # After ... headers end a copy too
    ends = {i: next((j for j in bounds if j > i), len(lines)) for i in starts}
    keep = {k for i in starts for k in range(i + 1, ends[i])}
    return "\n".join(line if k in keep else "" for k, line in enumerate(lines))
