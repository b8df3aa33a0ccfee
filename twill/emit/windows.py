"""The data of the role programs (program.py): iteration numbers, windows, channels between roles,
and each role's synchronisation tables."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Inst:
    """An iteration number: `base + off`, base '' (a constant), 'j' (the steady counter) or 'n'."""

    base: str
    off: int

    def shift(self, d: int) -> "Inst":
        return Inst(self.base, self.off - d)

    def __str__(self) -> str:
        if not self.base:
            return str(self.off)
        if self.off == 0:
            return self.base
        return f"{self.base} {'+' if self.off > 0 else '-'} {abs(self.off)}"


@dataclass(frozen=True)
class Window:
    kind: str  # "prologue" | "steady" | "epilogue"
    index: int  # p (prologue), e (epilogue), the unrolled copy u (steady)
    ops: tuple[str, ...]  # this role's ops, in schedule order
    base: str  # '' | 'j' | 'n'
    j0: int  # J = base + j0
    phase: int  # J - (S-1) modulo U (prologue: J itself, negative offsets allowed)

    def inst(self, stage: int, distance: int = 0) -> Inst:
        return Inst(self.base, self.j0 - stage - distance)

    @property
    def key(self) -> tuple[str, int]:
        """Which static window this is (copies of the steady window share it)."""
        return (self.kind, 0 if self.kind == "steady" else self.index)


@dataclass(frozen=True)
class Channel:
    """A value handed from one role to others (or from an async op to its own role on sm_100a)."""

    value: str
    producer: str  # role
    consumers: tuple[str, ...]  # roles
    depth: int
    kind: str  # "tma" (a load) | "stage" (registers via smem) | "tile" (registers -> smem operand tile)
    #            | "tmem" (tensor memory, signalled by tcgen05.commit or by the writing warps)
    empty: bool = True  # False when the dependence chain itself orders reuse (in-place accumulators)
    least: int = 1  # the fewest slots that cannot deadlock (`Program._late_release`): a floor for _fit_smem
    # a staged value each consumer role reads with one op that is no mma: copied into the reader's
    # registers as that op starts and its slot freed at once (RoleBody._channel_operand), as the
    # model holds a staged value only until its reader starts (liveness.memory_holds)
    copied: bool = False

    @property
    def ident(self) -> str:
        from .model import ident
        return ident(self.value)


@dataclass
class RoleProgram:
    role: str
    windows: dict[tuple[str, int], tuple[str, ...]]  # static window -> ops
    waits: dict[tuple[tuple[str, int], int, str], int] = field(default_factory=dict)  # (win, pos, value) -> k
    hazards: dict[tuple[tuple[str, int], int], int] = field(default_factory=dict)  # (win, pos) -> k before writing
    start_wait: set = field(default_factory=set)  # windows that first retire every earlier wgmma
    carried: set = field(default_factory=set)  # (win, pos) of an in-place accumulator entering the loop: wait<0>
    older_hazards: set = field(default_factory=set)  # (win, pos) whose hazard is only an earlier window's wgmma
    turn_close: set = field(default_factory=set)  # windows that first end a turn begun in the last one
    releases_at_start: dict[tuple[str, int], list] = field(default_factory=dict)  # win -> [(chan, op, d, wait)]
    releases_after: dict[tuple[tuple[str, int], int], list] = field(default_factory=dict)  # (win, pos) -> [...]
    turns: dict[tuple[tuple[str, int], int], tuple[bool, bool]] = field(default_factory=dict)  # begin, end
