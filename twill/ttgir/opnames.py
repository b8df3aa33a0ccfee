"""The TTGIR op names the lowering knows, grouped by what it does with them, and two readers of op text."""
from __future__ import annotations

from ..vocab import LIBM
from .parser import MOp

# Ops that cost nothing at tile level: the result is the operand, seen through a new layout or shape.
VIEWS = {
    "ttg.convert_layout", "tt.trans", "ttg.memdesc_trans", "tt.broadcast", "tt.expand_dims", "tt.reshape",
    "ttg.memdesc_reshape", "tt.splat", "ttg.memdesc_subview", "ttg.memdesc_index", "ttg.memdesc_subslice",
    "ttng.tmem_subslice", "ttg.memdesc_reinterpret", "tt.bitcast", "arith.bitcast",
}
# Index, pointer and program-id arithmetic: always folded away.
SCALAR_OPS = {
    "tt.get_program_id", "tt.get_num_programs", "tt.make_range", "tt.addptr", "tt.advance",
    "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.int_to_ptr", "tt.ptr_to_int",
    "arith.index_cast", "arith.index_castui", "ub.poison", "ttng.tensormap_create",
    "ttng.reinterpret_tensor_descriptor", "ttg.global_scratch_alloc",
}
# Hints and deallocations: no effect on the tile-level schedule.
NO_OPS = {"tt.assume", "llvm.intr.assume", "ttg.local_dealloc", "ttng.tmem_dealloc", "tt.return", "tt.reduce.return",
          "tt.scan.return"}
# What Triton's pipeliner adds to order memory accesses: async groups, barriers, fences (tokens only).
ORDERING_OPS = {
    "ttg.async_commit_group", "ttg.async_wait", "ttng.init_barrier", "ttng.inval_barrier", "ttng.wait_barrier",
    "ttng.barrier_expect", "ttng.arrive_barrier", "ttng.fence_async_shared", "ttng.tc_gen5_commit",
    "ttng.async_tma_store_wait", "ttng.async_tma_store_token_wait", "ttg.barrier", "gpu.barrier",
    "ttng.tensormap_fenceproxy_acquire", "ttng.fence", "ttng.async_copy_mbarrier_arrive",
}
ASYNC_COPIES = {"ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local", "ttng.async_tma_gather"}
# Elementwise ops (on scalars they are index arithmetic) -> node kind when a tile flows through.
_EW = ("addf subf mulf divf negf remf maxnumf minnumf maximumf minimumf select cmpf cmpi addi subi muli "
       "divsi divui remsi remui andi ori xori shli shrsi shrui maxsi minsi maxui minui").split()
_CONV = "truncf extf trunci extsi extui sitofp uitofp fptosi fptoui".split()
ELEMENTWISE = {
    **{f"arith.{n}": "ew" for n in _EW}, **{f"arith.{n}": "conv" for n in _CONV},
    "tt.fp_to_fp": "conv", "math.exp2": "exp2", "math.exp": "ew", "math.fma": "ew", "math.absf": "ew",
    "tt.clampf": "ew", "tt.precise_divf": "ew", "math.tanh": "ew", "math.log": "ew", "math.log2": "ew",
    "math.sqrt": "ew", "math.rsqrt": "ew", **{f"math.{n}": "ew" for n in LIBM}, "math.roundeven": "ew",
}
LOADS = {"tt.load", "tt.descriptor_load", "tt.experimental_descriptor_load", "tt.descriptor_gather"}
STORES = {"tt.store", "tt.descriptor_store", "tt.experimental_descriptor_store", "tt.descriptor_scatter",
          "ttng.async_tma_copy_local_to_global", "ttng.async_tma_scatter"}
# read-modify-writes of global memory: what they store depends on what is there (split-K's partial sums)
ATOMICS = {"tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_reduce"}
MAX_COMBINERS = {"arith.maxnumf", "arith.maximumf", "arith.maxf", "arith.maxsi", "arith.maxui"}
ADD_COMBINERS = {"arith.addf", "arith.addi"}
MIN_COMBINERS = {"arith.minnumf", "arith.minimumf", "arith.minf", "arith.minsi", "arith.minui"}
MUL_COMBINERS = {"arith.mulf"}  # a product (tl.cumprod's scan, the carry of its column tiles: session 42)

TRANSPOSES = {"tt.trans", "ttg.memdesc_trans"}
SLOTS = {"ttg.memdesc_index", "ttg.memdesc_subview"}
COMMUTATIVE = {"arith.addf", "arith.addi", "arith.mulf", "arith.muli", "arith.maxnumf", "arith.minnumf",
               "arith.maximumf", "arith.minimumf", "arith.andi", "arith.ori", "arith.xori"}

CONVERSIONS = {"arith.truncf", "tt.fp_to_fp"}


def opcode_token(mlir_name: str) -> str:
    """A TTGIR op name as a `.tir` opcode: every character other than a letter, digit or '_'
    becomes '_' (``tt.foo`` -> ``tt_foo``, ``ttng.tmem_copy`` -> ``ttng_tmem_copy``)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in mlir_name)


def int_attr(op: MOp, key: str) -> int | None:
    """The integer value of attribute `key = N` in the op's text, or None (absent or not an integer)."""
    toks = op.tokens
    for i in range(len(toks) - 2):
        if toks[i].is_(key) and toks[i + 1].is_("="):
            try:
                return int(toks[i + 2].text)
            except ValueError:
                return None
    return None

