"""Loads that read the same memory for every batch entry (docs/ttgir-import.md, section 2, "Program ids";
the graph's `{batch = none}`, docs/formats.md).

A graph's tensors are `[*batch, rows, cols]` and each CTA reads its batch entry of every one (emit-cuda's
`tile.b`): the grid's batch is the Triton kernel's program ids that place no tile. Most kernels read every
input at their batch entry too (`Q + pid_y * stride_bh`), but some read one tensor for all of them: attention
with one mask [N, N] for every batch entry and head (`MASK + offs_m[:, None] * stride_mm + cols[None, :]`, no
program id 1 term). Imported as per-entry, the binding would take MASK [B, H, N, N] and read a mask per head
where Triton reads one. This module tells the two apart from the addresses (addresses.py), by which program
ids each term reads:

- a term of an address is a **tile position** along tile dimension d where it is the dimension's
  coefficient times an integer times one atom (`pid_x * 128 * stride_n` of `offs_m[:, None] * stride_n`: the
  tile's first row); a descriptor's last two coordinates, a constant times one atom (`pid_x * 128`). Every
  other term (`pid_y * stride_bh`, `(pid_y // H) * stride_kb`, a descriptor's leading coordinate) places no
  tile;
- the **batch program ids** are those the stores' addresses read through terms that place no tile; a kernel
  whose stores read none (a plain GEMM: `pid_m * BM` and `pid_n * BN` are tile positions) has no batch, and
  nothing is marked (its binding's batch dimensions are its own, a launch per entry);
- a load **reads the batch** where a term of its address that places no tile reads a batch program id
  (through `grid.Dependence`: `pid_y // H`, `pid_y % H` count), or where it places a tile by an atom the stores
  do not place tiles by (a flattened grid's `pid % tiles_m` is the stores' row tile, so a mask read at it
  reads no batch). An address the polynomials do not follow reads whatever program ids its operands reach.

A load that reads no batch is `{batch = none}` (an input before the loop: the `input`'s attribute). Loads of
one value before the loop at `P + pid_y % H` (ALiBi's slopes, memory._per_batch) read the batch: they stay
one value per entry, periodic (docs/emit-cuda.md).
"""
from __future__ import annotations

from collections import Counter

from .addresses import Addr, Addresses
from .grid import LOADS, PICK, STORES, Dependence
from .parser import MOp, walk

ATOMICS = {"tt.atomic_rmw": "first"}  # an atomic output (scalaratomic.py): its pointer is its first operand
# the ops that address through a descriptor (its coordinates), not a pointer: grid.py's whose address is not "first"
DESCRIPTORS = frozenset(op for op, how in {**LOADS, **STORES}.items() if how != "first")


class BatchReads:
    """Which loads of `func` read the batch (module doc); `types` its module's TypeReader."""

    def __init__(self, func: MOp, types):
        self.func, self.types, self.dep = func, types, Dependence(func)
        self.chains: dict[int, tuple] = {}  # id(op) -> the ops whose regions hold it, outermost first
        self._chains(func.body(), ())
        self.scoped: dict[tuple, Addresses] = {}
        placed, loose, unread = set(), set(), frozenset()
        for op in walk(func.body()):
            table = STORES if op.name in STORES else ATOMICS if op.name in ATOMICS else None
            if table is None:
                continue
            tiles, others, unknown = self._terms(op, table)
            placed |= tiles
            loose |= others
            if unknown:  # (an atomic's bitcast pointer): the program ids its operands reach, as the batch's
                unread = unread.union(*(self.dep.of(n) for n in PICK[table[op.name]]([n for n, _ in op.operands()])))
        self.tile_atoms = frozenset(placed) - loose  # atoms the stores place tiles by, and only so
        self.found = frozenset().union(*(self._atom(a) for a in loose))  # the batch the stores' addresses read
        self.axes = self.found | unread  # the batch program ids

    def unbatched(self, op: MOp) -> bool:
        """Whether load `op` reads the same memory for every batch entry: the kernel's stores read a batch, and
        op's address reads none of it (module doc). A store whose address the polynomials do not follow adds
        the program ids it reaches to the batch, but alone makes none."""
        if not self.found or op.name not in LOADS:
            return False
        tiles, others, unknown = self._terms(op, LOADS)
        if unknown:
            return False
        reads = frozenset().union(*(self._atom(a) for a in others),
                                  *(self._atom(a) for a in tiles if a not in self.tile_atoms))
        return not reads & self.axes

    # -- terms --------------------------------------------------------------------------------------

    def _chains(self, ops, chain: tuple) -> None:
        for op in ops:
            self.chains[id(op)] = chain
            for region in op.regions:
                for block in region:
                    self._chains(block.ops, chain + (op,))

    def _addresses(self, op: MOp) -> Addresses:
        """The function's addresses as `op` sees its names: sibling loops reuse names (Triton's printer names
        each region's values from the source), so the regions that hold op are read last, outermost first."""
        chain = self.chains.get(id(op), ())
        key = tuple(id(o) for o in chain)
        if key not in self.scoped:
            addresses = Addresses(self.func, self.types)
            for outer in chain:
                addresses.scope(outer)
            self.scoped[key] = addresses
        return self.scoped[key]

    def _atom(self, atom: str) -> frozenset:
        """The program ids an atom of a polynomial reads (addresses.py's atoms: `pid_x`, `%ssa`, `iv:...`, an
        argument's name)."""
        if atom.startswith("pid_"):
            return frozenset({atom[4:]})
        if atom.startswith("%"):
            return self.dep.of(atom[1:])
        return frozenset()

    def _terms(self, op: MOp, table: dict) -> tuple[frozenset, frozenset, bool]:
        """(atoms of terms that place a tile, atoms of the other terms, whether an address operand is one the
        polynomials do not follow to a pointer argument) of op's address."""
        names = PICK[table[op.name]]([n for n, _ in op.operands()])
        addresses = self._addresses(op)
        if op.name in DESCRIPTORS:
            return self._coordinates(addresses, names)
        tiles, others, unknown = set(), set(), False
        for name in names:
            a = addresses.of(name)
            if a is None or a.base is None:  # not followed to a pointer argument
                unknown = True
                continue
            t, o = _split(a)
            tiles |= t
            others |= o
        return frozenset(tiles), frozenset(others), unknown

    def _coordinates(self, addresses, names: list[str]) -> tuple[frozenset, frozenset, bool]:
        """A descriptor's: its last two coordinates place the tile (a constant times one atom), the leading
        ones do not, nor does the descriptor (made in the kernel from a pointer it may offset: its program
        ids, as an atom of its own)."""
        desc, coords = names[0], names[1:]
        tiles, others, unknown = set(), {f"%{desc}"}, False
        for i, name in enumerate(coords):
            a = addresses.of(name)
            if a is None or a.coefs:
                unknown = True
                continue
            last_two = i >= len(coords) - 2
            for m, _ in a.const:
                (tiles if last_two and len(m) == 1 else others).update(m)
        return frozenset(tiles), frozenset(others), unknown


def _split(a: Addr) -> tuple[set, set]:
    """(atoms of the tile-position terms, atoms of the other terms) of a pointer's address (module doc)."""
    tiles, others = set(), set()
    for m, c in a.const:
        atom = _tile_atom(a.coefs, m, c)
        if atom is not None:
            tiles.add(atom)
        else:
            others.update(m)
    for coef in a.coefs:  # a stride that reads a program id places no tile
        for m, _ in coef:
            others.update(m)
    return tiles, others


def _tile_atom(coefs, monomial: tuple, c: int) -> str | None:
    """The one atom of term c * monomial where it is a tile dimension's coefficient times an integer times that
    atom, else None."""
    for coef in coefs:
        if len(coef) != 1:
            continue
        (md, cd), = coef
        rest = Counter(monomial)
        rest.subtract(Counter(md))
        if cd and c % cd == 0 and all(v >= 0 for v in rest.values()) and sum(rest.values()) == 1:
            return next(a for a, v in rest.items() if v)
    return None
