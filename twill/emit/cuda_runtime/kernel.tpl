// ---- the kernel: warp roles dispatched by warpgroup; kernel<true, ...> loops over several tiles -
// (a persistent grid, launch()), kernel<false, ...> computes the tile of its block index;
// kernel<..., true> masks a partial last tile (kMasks, launch()).
template <bool kTiles, bool kTail>
__global__ void __launch_bounds__(kThreads, {{ctas_per_sm}}) kernel({{params}}) {
  {{smem}}
  {{iters}}
  Maps tm;
  {{maps}}
  if (threadIdx.x == 0) {
    {{smem_check}}
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
