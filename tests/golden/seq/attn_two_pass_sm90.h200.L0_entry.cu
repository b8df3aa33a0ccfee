// The C entry point of attn_two_pass_sm90.h200.L0.cu for its PyTorch binding attn_two_pass_sm90.h200.L0.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "attn_two_pass_sm90.h200.L0.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_attn_two_pass_kernel_L0::Problem p;
  p.tiles_m = tiles_m;
  p.tiles_n = tiles_n;
  p.iters = iters;
  p.loop_extent = loop_extent;
  p.m_extent = m_extent;
  (void)n_extent;  // the kernel has no tiles along N
  p.batch = batch;
  p.exp2_scale = exp2_scale;
  p.persistent = persistent;
  (void)out_scale;  // no output of an fp8 mma
  (void)raster_group;  // the kernel keeps blockIdx order
  // tensors[0]: Q (input; the graph's q)
  p.q = static_cast<decltype(p.q)>(tensors[0]);
  // tensors[1]: K (input; the graph's k)
  p.k = static_cast<decltype(p.k)>(tensors[1]);
  p.k_batch_group = batch_groups[1];
  // tensors[2]: m (output; the graph's m_new)
  p.out_m = static_cast<decltype(p.out_m)>(tensors[2]);
  // tensors[3]: l (output; the graph's l_new)
  p.out_l = static_cast<decltype(p.out_l)>(tensors[3]);
  return static_cast<int>(twill_attn_two_pass_kernel_L0::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
