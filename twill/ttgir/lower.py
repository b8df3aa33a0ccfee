"""Lower one `scf.for` of a TTGIR function to tile nodes, carries and yields.

The function is walked in program order up to and through the chosen loop: ops before the loop are
lowered too (so the Q tile loaded before an attention loop is known as a tile), but only nodes inside
the loop become graph ops; tiles from before the loop that the loop reads become `input`s.

Per-op behaviour lives in `HANDLERS` (TTGIR op name -> function; the handlers by job in scalars.py,
memory.py, compute.py, generic.py; the op groups in opnames.py). An op that is not in it is a
`generic` node named after the op, with a warning (an error under ``strict``). Buffers (tensor memory
accumulators, mutable shared memory) are tracked by content in program order: a read before any write
in the body reads the content of the previous iteration, which becomes a carry of that buffer.
"""
from __future__ import annotations

from dataclasses import replace

from . import accstart, draw, epilogue, indices, ksplit
from .addresses import Addresses
from .bounds import Masks
from .compute import bit_view, causal_mask, dot, dot_wait, layout_attrs, reduce, scaled_dot, scan, tc_gen5_mma
from .generic import generic, nested
from .locs import names as loc_names
from .memory import alloc, async_copy, load, memory_load, memory_store, store, token
from .opnames import (ASYNC_COPIES, ELEMENTWISE, LOADS, NO_OPS, ORDERING_OPS, SCALAR_OPS, STORES, VIEWS,
                      int_attr, opcode_token)
from .columns import show_columns
from .outputs import _output_dtypes
from .parser import Module, MOp
from .provenance import func_args
from . import clamps
from .rand import is_draw
from .scalars import FOLDS, constant, elementwise, fold, no_op, scalar, view, yield_
from .state import Lowering
from .types import last_top_level
from ..knobs import Product
from .values import SCALAR, TOKEN, Buf, Carry, Entry, LaunchScalar, Lowered, Ref, Tile

_Lowering = Lowering
__all__ = ["HANDLERS", "lower_loop", "show_columns", "layout_attrs", "int_attr", "opcode_token", "lower_op"]

HANDLERS = {
    **{name: view for name in VIEWS}, **{name: scalar for name in SCALAR_OPS},
    **{name: no_op for name in NO_OPS}, **{name: load for name in LOADS}, **{name: store for name in STORES},
    **{name: token for name in ORDERING_OPS}, **{name: async_copy for name in ASYNC_COPIES},
    "arith.constant": constant,
    "tt.dot": dot, "ttng.warp_group_dot": dot, "ttng.warp_group_dot_wait": dot_wait,
    "ttng.tc_gen5_mma": tc_gen5_mma, "tt.dot_scaled": scaled_dot, "ttng.tc_gen5_mma_scaled": scaled_dot,
    "tt.bitcast": bit_view, "arith.bitcast": bit_view,
    "ttg.local_alloc": alloc, "ttng.tmem_alloc": alloc,
    "ttg.local_store": memory_store, "ttng.tmem_store": memory_store,
    "ttg.local_load": memory_load, "ttng.tmem_load": memory_load,
    "tt.reduce": reduce, "tt.scan": scan, "scf.yield": yield_,
    "scf.for": nested, "scf.if": nested, "scf.while": nested,
    "tt.split": lambda lw, op: ksplit.split(lw, op) or generic(lw, op),
}



def lower_op(lw: Lowering, op: MOp) -> None:
    """One op of the walk, by its handler (an elementwise op by kind; any other, generic)."""
    if op.name in HANDLERS:
        HANDLERS[op.name](lw, op)
    elif op.name == clamps.CLAMP and (parts := clamps.split(op)) is not None:  # tl.clamp: its max, then its min
        for part in parts:
            lower_op(lw, part)
    elif is_draw(op):  # tl.rand's Philox rounds, collapsed (rand.py)
        draw.lower(lw, op)
    elif op.name in FOLDS and fold(lw, op):
        pass
    elif op.name in ELEMENTWISE:
        elementwise(lw, op)
    else:
        generic(lw, op)


# -- the loop -------------------------------------------------------------------------------------

def func_name(func: MOp) -> str:
    sym = next((t.text for t in func.tokens if t.kind == "symbol"), "@kernel")[1:].strip('"')
    return opcode_token(sym) if sym else "kernel"


def _bind_arguments(lw: Lowering, func: MOp) -> None:
    """Function arguments (``%x: type`` in the signature): tensors are tiles, the rest scalars."""
    for name, mtype, tok in func_args(func, lw.types):
        lw.arg_spans[name] = lw.src.span(tok)
        if mtype.is_tile:
            arg = MOp("arg", (name,), (), (), tok)  # stands in for the op that made it
            lw.env[name] = lw.node("arg", arg, [], lw.tile_type_at(mtype, lw.src.span(tok)))
        elif mtype.kind == "scalar" and mtype.elem == "f32":  # read by a loop op: a prologue scalar
            lw.env[name] = LaunchScalar(name, scale=Product.of(name))
        else:
            lw.env[name] = SCALAR


def _loop_header(lw: Lowering, loop: MOp):
    """(induction variable, [(iter_arg, init name, token)], [result MType])."""
    toks = loop.tokens
    iv = toks[0].text[1:] if toks and toks[0].kind == "ssa" else None
    pairs, i = [], next((k for k, t in enumerate(toks) if t.is_("iter_args")), None)
    if i is not None:
        i += 2
        while i + 2 < len(toks) and toks[i].kind == "ssa" and toks[i + 1].is_("="):
            pairs.append((toks[i].text[1:], toks[i + 2].text[1:], toks[i + 2]))
            i += 4 if i + 3 < len(toks) and toks[i + 3].is_(",") else 3
    arrow = last_top_level(toks, "->")
    types = lw.types.read_list(toks, arrow + 1)[0] if arrow is not None else []
    if len(types) != len(pairs):
        raise lw.src.error(f"cannot read the loop's {len(pairs)} iter_args types", loop.head)
    return iv, pairs, types


def _enter(lw: Lowering, op: MOp, inner: MOp):
    """Step into `op`, a loop or branch around the chosen loop: its induction variable and scalar
    iter_args are scalars, a tile it carries is a value from before the chosen loop (an input), and
    the ops of the block that holds `inner` come next."""
    if op.name == "scf.for":
        iv, pairs, types = _loop_header(lw, op)
        if iv:
            lw.env[iv] = SCALAR
        for (arg, _, tok), mtype in zip(pairs, types):
            if mtype.is_tile:
                stand_in = MOp("arg", (arg,), (), (), tok)
                lw.env[arg] = lw.node("arg", stand_in, [], lw.tile_type_at(mtype, lw.src.span(tok)))
            else:
                lw.env[arg] = TOKEN if mtype.kind == "token" else SCALAR
    for region in op.regions:
        for block in region:
            if any(o is inner for o in block.ops):
                for name, _ in block.args:  # scf.while's "after" block, say: scalars
                    lw.env.setdefault(name, SCALAR)
                return block.ops
    raise AssertionError("the path to a loop goes through the blocks that hold it")


def lower_loop(module: Module, func: MOp, path: tuple[MOp, ...], scalar_args: frozenset = frozenset(),
               merge=None) -> Lowered:
    """Lower `func` up to and through the loop that ends `path` (the loops and branches around it
    first); iter_args in `scalar_args` are treated as scalars. With `merge` (loops.Merge, whose last
    loop ends `path`), the loops merged into it: its carries start from the first loop's inits and
    its masks become `causal_mask` nodes."""
    lw = Lowering(module)
    lw.addresses = Addresses(func, lw.types)
    lw.addresses.scope(path[-1])  # sibling loops reuse names: the chosen loop's ops define them here
    lw.masks = Masks(lw.addresses)
    from .unbatched import BatchReads  # (it reads grid.py's Dependence, whose modules import this one)
    lw.batch = BatchReads(func, lw.types)
    lw.loop_iv = _loop_header(lw, path[-1])[0]
    _bind_arguments(lw, func)
    ops, loop = _walk_to(lw, func, path, merge), path[-1]
    pairs = _enter_loop(lw, loop, scalar_args, merge)
    lw.in_loop = True
    for op in loop.body():
        if merge is not None and merge.is_mask(op):
            causal_mask(lw, op)
        else:
            lower_op(lw, op)
    yields = _yields(lw, loop, len(pairs))
    at = next(i for i, o in enumerate(ops) if o is loop)
    after = list(ops)[at + 1:]
    carries = _output_dtypes(lw, loop, after)
    # an accumulator started from a tile computed before the loop (addmm's beta * C): from 0, its
    # start added in the epilogue (accstart.py)
    starts = accstart.starts(lw.nodes, carries, yields, list(ops)[:at]) if merge is None else []
    for s in starts:
        carries[s.carry] = replace(carries[s.carry], init=accstart.ZERO)
    lowered = Lowered(func_name(func), tuple(lw.nodes), tuple(carries), tuple(yields), tuple(lw.notes),
                      lw.span(loop), tuple(loc_names(loop.loc, lw.locs)), tuple(arg for arg, _, _ in pairs))
    sig = epilogue.signature(func, lw.types, lw.locs)  # (after the Lowered is taken: the walk lowers the ops after the loop)
    return epilogue.with_epilogue(lowered, lambda: epilogue.lower_after(lw, func, loop, after, sig, yields, starts),
                                  sig)


def _walk_to(lw: Lowering, func: MOp, path: tuple[MOp, ...], merge=None) -> list[MOp]:
    """Lower the ops before each loop or branch of `path`, stepping into each; the ops of the block
    that holds the chosen loop (the last of `path`). The buffers' content as the first loop of a
    merged pair starts is kept (`merge_entry`): the merged loop starts from it."""
    ops = func.body()
    for outer, inner in zip(path, path[1:] + (None,)):
        for op in ops:
            if op is outer:
                break
            if merge is not None and op is merge.first:
                lw.merge_entry = dict(lw.content)
            lower_op(lw, op)
        if inner is not None:
            ops = _enter(lw, outer, inner)
    return ops


def _enter_loop(lw: Lowering, loop: MOp, scalar_args: frozenset, merge) -> list:
    """Bind the chosen loop's induction variable and iter_args: a tile iter_arg is a carry (from
    the first merged loop's init, with its name, under `merge`), a buffer stays the buffer, the rest
    are scalars or tokens; every buffer's content is now what the previous iteration left."""
    iv, pairs, types = _loop_header(lw, loop)
    if iv:
        lw.env[iv] = indices.symbol(indices.LOOP_TERM)  # the loop's position term (indices.py)
    inits = [lw.value(init, tok) for (_, init, tok) in
             (pairs if merge is None else [(a, i, t) for (a, _, t), i in zip(pairs, merge.inits)])]
    for k, ((arg, _, tok), mtype, init) in enumerate(zip(pairs, types, inits)):
        if isinstance(init, Buf):
            lw.env[arg] = init
        elif mtype.is_tile and k not in scalar_args:
            name = arg if merge is None else merge.names[k]
            lw.carries.append(Carry(name, lw.tile_type(mtype, loop), init, lw.src.span(tok), k))
            lw.env[arg] = Tile(Ref("carry", len(lw.carries) - 1))
        else:
            lw.env[arg] = TOKEN if mtype.kind == "token" else SCALAR
    for b in range(len(lw.buffers)):
        lw.at_entry[b], lw.content[b] = lw.content.get(b), Entry(b)
    if merge is not None:  # a buffer of the last loop starts as the first loop's did
        index = {name: b for b, (name, _, _) in enumerate(lw.buffers)}
        for mine, theirs in merge.buffers:
            if mine in index and theirs in index:
                lw.at_entry[index[mine]] = lw.merge_entry.get(index[theirs])
    return pairs


def _yields(lw: Lowering, loop: MOp, n_args: int) -> list:
    """The value each carry gets for the next iteration: the scf.yield operand of its iter_arg, or
    its buffer's content at the end of the body. A loop with iter_args must yield one value each."""
    if lw.yielded is None and n_args:
        raise lw.src.error(f"the loop has {n_args} iter_args but no scf.yield: what it carries to the next "
                           "iteration is not said", loop.head, hint="the body must end with 'scf.yield' of one "
                           "value per iter_arg")
    yielded = lw.yielded or []
    if lw.yielded is not None and len(yielded) != n_args:
        raise lw.src.error(f"the loop has {n_args} iter_args but its scf.yield gives {len(yielded)} "
                           f"value{'s' if len(yielded) != 1 else ''}", loop.head)
    return [(yielded[c.arg] if c.arg < len(yielded) else SCALAR) if c.arg is not None else lw.content[c.buf]
            for c in lw.carries]
