"""The `prologue { ... }` block of a `.tir` file: what each output tile computes once, before the loop.

    prologue := "prologue" "{"  (scalar | op)*  "}"          (after the input and carry lines, before "loop")
    scalar   := "scalar" NAME ":" DTYPE                     (a number given at launch)
    op       := NAME "=" OPCODE [operands] ":" type [attrs]  (as in the loop; no NAME@D)

The mirror of the epilogue (twill.tir_epilogue, whose statements and checks it shares): an op reads
the inputs, the scalars and the results of the block's ops above it, with the opcodes an epilogue
runs. Each result is an input of the loop (`Value.computed`): loop ops read it by name as they read
an input, loop-invariant and in registers, but no tensor of the kernel holds it: the roles that read
it compute it before the loop from the inputs it reads. So is each scalar (one value, `T[1]`, given
at launch: attention's `sm_scale` when the loop scales its scores itself). Nothing in the block is
scheduled.
"""
from __future__ import annotations

from .ir import Epilogue, Operand, Value
from .tir_epilogue import EpilogueParser


class PrologueParser(EpilogueParser):
    keyword = "prologue"
    readable = ("input", "scalar")

    def statement(self, line) -> bool:
        if line.at("=", 1):  # an op: its result is an input of the loop
            self.ops.append(self.owner.parse_op(line, "input"))
            return True
        return super().statement(line)

    def check_operand(self, ref: Operand, seen: set[str]) -> None:
        super().check_operand(ref, seen)
        mine = {op.name for op in self.ops}
        if ref.name in mine and ref.name not in seen and ref.distance is None:
            self.owner.errors.error(f"'{ref.name}' is used before it is defined", ref.span,
                                    "a prologue op reads the results of the ops above it")

    def inputs(self) -> list[Value]:
        """The loop's view of the block: one computed input per result, and one per scalar (a number
        given at launch, read by the loop's ops as a one-element register input: `mul s, sm_scale`)."""
        return ([Value(v.name, v.type, "input", None, v.span, (("prologue", True),)) for v in self.scalars]
                + [Value(op.name, op.type, "input", None, op.span, (("prologue", True),))
                   for op in self.ops if op.has_result and op.type is not None])

    def build(self) -> Epilogue:
        return Epilogue(tuple(self.scalars), tuple(self.ops), (), self.span)
