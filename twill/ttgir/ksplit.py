"""A dot Triton's pipeliner split along K, put back together.

Where a dot's A operand is computed in registers (softmax-then-GEMM's ``exp(x - max)``), Triton after
the pipeliner issues it as 2^n dots over chunks of K, so that the first chunk's wgmma starts while the
next is still being converted (Triton 3.9: two chunks, 3.6: four)::

    %r = tt.reshape %a : tensor<MxKxf16> -> tensor<Mx2x(K/2)xf16>          (3.6: Mx2x2x(K/4))
    %t = tt.trans %r {order = array<i32: 0, 2, 1>}                          (3.6: 0, 3, 2, 1)
    %lo, %hi = tt.split %t : tensor<Mx(K/2)x2xf16> -> tensor<Mx(K/2)xf16>   (3.6: split again)
    %w0 = ttg.memdesc_subslice %w[0, 0]   : KxN -> (K/2)xN
    %w1 = ttg.memdesc_subslice %w[K/2, 0] : KxN -> (K/2)xN
    %d0 = ttng.warp_group_dot %lo, %w0, %acc
    %d1 = ttng.warp_group_dot %hi, %w1, %d0      (through a warp_group_dot_wait)

which is ``mma a, w, acc``: the graph's one mma, as the loop was written (the prepipe form). `split`
binds the results of such a ``tt.split`` to `a` and remembers which chunk each is (the first split
gives the chunk index's high bit); `dot` makes the first chunk's dot the whole mma and each later
chunk's dot that same mma. A ``tt.split`` of anything else stays a generic op; a chunk read other than
by the dot of its rows of B over the previous chunk's result is an error at the dot (the graph would
compute something else).
"""
from __future__ import annotations

from .parser import MOp
from .state import Lowering
from .values import Tile

VIEW_CHAIN = {"ttg.convert_layout", "ttg.memdesc_trans"}


def _def(lw: Lowering, name: str) -> MOp | None:
    return lw.addresses.defs.get(name) or lw.addresses.defs.get(name.split("#")[0]) if lw.addresses else None


def _through_views(lw: Lowering, name: str) -> tuple[str, MOp | None]:
    op = _def(lw, name)
    while op is not None and op.name in VIEW_CHAIN and op.operands():
        name = op.operands()[0][0]
        op = _def(lw, name)
    return name, op


def split(lw: Lowering, op: MOp) -> bool:
    """``tt.split`` of ``trans(reshape(a))`` (a [M, K] register tile reshaped to [M, 2, ..., 2, c] and
    transposed to [M, c, 2, ..., 2]), or of such a split's result: both results bound to a, which
    chunk of K each is (or leads to) remembered. False (the caller's generic op) otherwise."""
    names = op.operands()
    if len(names) != 1 or len(op.results) != 2:
        return False
    prior = lw.khalves.get(names[0][0])
    if prior is not None:
        tile, bits, depth, k = prior
        if depth < 1 or len(bits) >= depth:
            return False
    else:
        found = _split_source(lw, names[0][0])
        if found is None:
            return False
        tile, depth, k = found
        bits = ()
    for bit, r in enumerate(op.results):
        lw.env[r] = tile
        lw.khalves[r] = (tile, bits + (bit,), depth, k)
    return True


def _split_source(lw: Lowering, name: str):
    """(a, n, K) where `name` is ``trans(reshape(a : [M, K] -> [M, 2 x n, K / 2^n]), [0, n+1, ..., 1])``."""
    trans = _def(lw, name)
    if trans is None or trans.name != "tt.trans" or not trans.operands():
        return None
    reshape = _def(lw, trans.operands()[0][0])
    if reshape is None or reshape.name != "tt.reshape" or not reshape.operands():
        return None
    ins, outs = lw.signature(reshape)
    if not ins or not outs or len(ins[0].shape) != 2:
        return None
    (m, k), shape = ins[0].shape, tuple(outs[0].shape)
    n = len(shape) - 2
    if n < 1 or shape[0] != m or shape[1:-1] != (2,) * n or shape[-1] * 2 ** n != k:
        return None
    order = "".join(t.text for t in trans.tokens)
    if f"{','.join(str(d) for d in [0, n + 1] + list(range(n, 0, -1)))}" not in order:
        return None
    source = lw.value(reshape.operands()[0][0], reshape.head)
    if not isinstance(source, Tile):
        return None
    return Tile(source.ref), n, k  # (the transposes flipped the view; the tile is a's own)


def half_of(lw: Lowering, a_name: str):
    """(tile, chunk, chunks, K) where dot operand `a_name` is one chunk of K of a split dot's A, else None."""
    name, _ = _through_views(lw, a_name)
    found = lw.khalves.get(name)
    if found is None or len(found[1]) != found[2]:
        return None
    tile, bits, depth, k = found
    return tile, sum(b << (depth - 1 - i) for i, b in enumerate(bits)), 2 ** depth, k


def b_half(lw: Lowering, b_name: str, rows: int) -> tuple[str, int] | None:
    """(the sliced buffer's SSA name, chunk) where dot operand `b_name` is ``memdesc_subslice
    %w[i * rows, 0]`` of `rows` rows, else None."""
    _, op = _through_views(lw, b_name)
    if op is None or op.name != "ttg.memdesc_subslice" or not op.operands():
        return None
    toks = [t.text for t in op.tokens]
    try:
        lb = toks.index("[")
        offs = [int(x) for x in "".join(toks[lb + 1:toks.index("]", lb)]).split(",")]
    except ValueError:
        return None
    ins, outs = lw.signature(op)
    if len(offs) != 2 or offs[1] != 0 or not outs or not outs[0].shape or outs[0].shape[0] != rows \
            or offs[0] % rows:
        return None
    return op.operands()[0][0], offs[0] // rows


def dot(lw: Lowering, op: MOp, half, node) -> None:
    """The dot of one chunk of a split dot (`half`: half_of's answer): the first chunk's is the whole
    mma (`node(a, b, acc)` makes it), each later chunk's that same mma, read over the previous chunk's
    result with the same A and B. Anything else is an error at the dot."""
    names = [n for n, _ in op.operands()]
    tile, i, chunks, k = half
    rows = k // chunks
    bh = b_half(lw, names[1], rows) if len(names) >= 3 else None
    if bh is None or bh[1] != i:
        raise lw.src.error(f"'{op.name}' reads chunk {i} of a dot split along K (tt.split) with a B operand that "
                           f"is not rows {i * rows}..{(i + 1) * rows - 1} of one K x N tile", op.head)
    b = lw.read(lw.value(bh[0], op.head))
    acc = lw.read(lw.value(names[2], op.head))
    if i == 0:
        lw.kpending = (node(tile, b, acc), tile, b, 1)
        lw.bind(op, lw.kpending[0])
        return
    pending = lw.kpending
    if pending is None or pending != (acc, tile, b, i):
        raise lw.src.error(f"'{op.name}' reads chunk {i} of a dot split along K, but not over the previous "
                           "chunk's result with the same A and B: the import cannot put the dot back together",
                           op.head)
    lw.kpending = (acc, tile, b, i + 1) if i + 1 < chunks else None
    lw.bind(op, acc)
