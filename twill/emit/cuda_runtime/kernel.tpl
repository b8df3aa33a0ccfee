// ---- the kernel: warp roles dispatched by warpgroup; kernel<true, ...> loops over several tiles -
// (a persistent grid, launch()), kernel<false, ...> computes the tile of its block index;
// kernel<..., true> masks a partial last tile (kMasks, launch()).
template <bool kTiles, bool kTail>
__global__ void __launch_bounds__(kThreads, {{ctas_per_sm}}) kernel({{params}}) {
  extern __shared__ unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  {{iters}}
  Maps tm;
  {{maps}}
  if (threadIdx.x == 0) {
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
