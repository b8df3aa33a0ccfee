"""The GPU architectures emit-cuda writes for: one frozen `Target` each, chosen once from the arch.

A target is what differs between sm_90a (Hopper: wgmma, register accumulators) and sm_100a
(Blackwell: tcgen05, tensor memory); the emitter reads these fields and never the arch name, so
adding an architecture is one more entry here (and its runtime headers and tables):

- the runtime headers of cuda_runtime/ it includes (`runtime`, `vocab_runtime`, `mma8_runtime`);
- `arch` keys its per-opcode emitters (ops.EMITTERS) and its fragment layouts (fragments.FRAGMENTS,
  fragments.VIEWS): the C++ type a warpgroup's share of a register tile has;
- the facts below, each the reason for one kind of code the emitter writes, and the CTA's limits.

The register numbers (the launch's registers per thread, `setmaxnreg`'s range and granule) are the
machine's `limits`, read through twill/registers.py, the rule the solver uses too.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    arch: str  # the canonical name, the key of the per-target tables
    family: str  # the prefix of the machine arch names it serves ("sm_90": sm_90a)
    runtime: str  # cuda_runtime/ header after common.cuh: the tensor-core instructions and fragments
    vocab_runtime: tuple[str, ...]  # headers of the op vocabulary's extension (twill/vocab.py)
    mma8_runtime: str  # header of the 8-bit mma inputs and integer accumulators
    causal_runtime: str  # header of the causal mask (in registers on sm_90a, in tensor memory on sm_100a)
    band_runtime: str  # header of a causal mask's band (a sliding window), in kernels with one
    tail_runtime: str  # header of mask_tail (a tail_mask's fill; sm_100a's partial-tile masks), in kernels with one
    # mma results and @tmem values live in tensor memory, which the kernel allocates and frees
    tensor_memory: bool
    # an mma's completion is committed to an mbarrier (tcgen05.commit): that frees ring slots and
    # tells the readers of its result; the mmas of a role are issued as one block by one thread
    mma_commit: bool
    # an mma runs asynchronously into registers (wgmma): its results are complete after
    # wgmma.wait_group, its register operand is read after issue, it accumulates in place
    async_register_mma: bool
    # register tiles are in the wgmma accumulator layout (64-row blocks, which warpgroups may split):
    # masks, fused row sums and registers shared between values are emitted on them
    register_fragments: bool
    mma_warpgroup: bool  # an mma is issued by a whole warpgroup
    a_from_registers: bool  # the tensor core may read a K-major A operand from registers
    mma_wrappers_by_width: bool  # the mma instruction's operands depend on N: a wrapper per width used
    pingpong: bool  # consumer warpgroups may take turns on the tensor core (named barriers)
    persistent_grid: bool  # a CTA may loop over several tiles (kernel<true>)
    max_threads: int = 1024  # threads of one CTA (CUDA Programming Guide, CC 9.0 and 10.0)
    sm_threads: int = 2048  # resident threads of one SM (CUDA Programming Guide, CC 9.0 and 10.0)
    sm_ctas: int = 32  # resident CTAs of one SM (likewise)
    # shared memory the system reserves for each resident CTA (likewise): an SM holds the largest
    # CTA's smem_bytes plus this reserve (228 KiB), each CTA taking its own plus the reserve
    cta_smem_reserve: int = 1024
    # several CTAs of a kernel may share an SM where their registers and shared memory fit
    # (occupancy.py); not where each CTA allocates tensor memory, which the rule does not count
    shares_sm: bool = True
    # ... and only while each is launched with at least this many registers a thread: ptxas
    # compiles each instruction within the launch count, whatever setmaxnreg gives later (at 40 a
    # test GEMM's wgmma was a fatal C7602; at 80 the attention backward's delta kernel spilled 20
    # bytes; every corpus and test kernel compiled clean at 128)
    min_launch_registers: int = 128
    named_barriers: int = 16  # bar.sync ids per CTA (PTX ISA), 0 being __syncthreads
    # the kernel reaches `Smem` as the dynamic shared-memory array itself (declared 1024-aligned), so
    # its threads' accesses are ld.shared / st.shared; False: through the array's address rounded up
    # as an integer, which makes them generic. sm_90a: the SSD scan 0.75x -> 1.04x Triton on an H100.
    # sm_100a keeps the integer form: the shared form spilled 8 bytes in the held-out sliding-window
    # attention there, and no sm_100 card here measures what it gains
    shared_smem: bool = True


SM90 = Target(
    arch="sm_90a", family="sm_90", runtime="sm90.cuh", vocab_runtime=("vocab_sm90.cuh", "vocab.cuh"),
    mma8_runtime="mma8_sm90.cuh", causal_runtime="causal.cuh", band_runtime="band.cuh", tail_runtime="tail_sm90.cuh", tensor_memory=False, mma_commit=False, async_register_mma=True,
    register_fragments=True, mma_warpgroup=True, a_from_registers=True, mma_wrappers_by_width=True,
    pingpong=True, persistent_grid=True)

# Not persistent: the tensor-memory accumulators would need their own hand-back from tile to tile
# (and we cannot run sm_100a here to test one). One CTA per SM: two would each allocate tensor
# memory, which occupancy.py does not count (likewise untested).
SM100 = Target(
    arch="sm_100a", family="sm_100", runtime="sm100.cuh", vocab_runtime=("vocab_sm100.cuh", "vocab.cuh"),
    mma8_runtime="mma8_sm100.cuh", causal_runtime="causal_sm100.cuh", band_runtime="band_sm100.cuh", tail_runtime="tail_sm100.cuh", tensor_memory=True, mma_commit=True, async_register_mma=False,
    register_fragments=False, mma_warpgroup=False, a_from_registers=False, mma_wrappers_by_width=False,
    pingpong=False, persistent_grid=False, shares_sm=False, shared_smem=False)

TARGETS = (SM90, SM100)


def target_for(arch: str) -> Target | None:
    """The target of a machine's arch name (sm_90a -> SM90), or None where emit-cuda has none."""
    return next((t for t in TARGETS if arch.startswith(t.family)), None)
