"""Solve the loop sequences of tests/golden/seq/*.tir for their machine, run emit-cuda's ptxas loop on
each loop (as `twill emit-cuda` does), and store the resulting twill-sequence/1 files as
tests/data/seq/NAME.GPU.json: the schedules tests/test_sequence.py emits its goldens from (the ptxas
loop compiles every kernel with nvcc, too slow to repeat in CI).

    python3 bench/seq/store_schedules.py
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from twill.fileio import write_atomic  # noqa: E402
from twill.machine import load_machine  # noqa: E402
from twill.pipeline import SolveOptions  # noqa: E402
from twill.ptxas_loop import emitter, resolver, run  # noqa: E402
from twill.sequence import SequenceSchedule, solve_sequence  # noqa: E402
from twill.tir_sequence import load_sequence  # noqa: E402

SEQUENCES = {"gemm_chain_sm90": "h200", "attn_two_pass_sm90": "h200", "row_var_sm90": "h200",
             "gemm_chain_sm100": "b200", "attn_two_pass_sm100": "b200", "row_var_sm100": "b200"}


def main():
    for name, gpu in SEQUENCES.items():
        machine, options = load_machine(gpu), SolveOptions()
        seq = solve_sequence(load_sequence(os.path.join(ROOT, "tests", "golden", "seq", f"{name}.tir")), machine, options)
        final = []
        for s in seq.schedules:
            final.append(run(s, machine, emitter(machine), resolver(s, machine, options), print).schedule)
        out = SequenceSchedule(seq.kernel, seq.names, tuple(final), seq.handovers)
        path = os.path.join(ROOT, "tests", "data", "seq", f"{name}.{gpu}.json")
        write_atomic(path, out.to_json(), only_if_changed=True)
        print("wrote", path)


if __name__ == "__main__":
    main()
