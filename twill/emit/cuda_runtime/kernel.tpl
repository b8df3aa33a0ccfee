// ---- the kernel: warp roles dispatched by warpgroup; kernel<true, ...> loops over several tiles -
// (a persistent grid, launch()), kernel<false, ...> computes the tile of its block index;
// kernel<..., true> masks a partial last tile (kMasks, launch()).
template <bool kTiles, bool kTail>
__global__ void __launch_bounds__(kThreads, {{ctas_per_sm}}) kernel({{params}}) {
  // Smem at the start of the dynamic shared memory, which the declaration aligns to 1024 bytes (the
  // 128-byte swizzle's period; thread 0 checks it below). Through the array itself, not its address
  // as an integer rounded up, the compiler keeps the address space: every access through sm is an
  // ld.shared / st.shared at a constant offset, where the integer round trip made them generic.
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  {{iters}}
  Maps tm;
  {{maps}}
  if (threadIdx.x == 0) {
    if (twill::smem_addr(smem_raw) % 1024 != 0) __trap();  // Smem's tiles need the alignment
    {{rings}}
    for (int c = 0; c < kInputCopies; ++c) {
      twill::mbar_init(&sm.inputs_ready[c], 1);
      twill::mbar_init(&sm.inputs_free[c], {{input_readers}});  // one arrival per reading warp
    }
    {{barriers}}
    twill::mbar_fence_init();
    {{prefetch}}
  }
  {{tmem_alloc}}
  __syncthreads();
  {{tmem_ready}}
  {{dispatch}}
  {{tmem_free}}
}
