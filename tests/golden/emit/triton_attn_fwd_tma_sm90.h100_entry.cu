// The C entry point of triton_attn_fwd_tma_sm90.h100.cu for its PyTorch binding triton_attn_fwd_tma_sm90.h100.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "triton_attn_fwd_tma_sm90.h100.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_attn_fwd_desc::Problem p;
  p.tiles_m = tiles_m;
  p.tiles_n = tiles_n;
  p.iters = iters;
  p.loop_extent = loop_extent;
  p.m_extent = m_extent;
  p.n_extent = n_extent;
  p.batch = batch;
  p.exp2_scale = exp2_scale;
  p.persistent = persistent;
  (void)out_scale;  // no output of an fp8 mma
  (void)raster_group;  // the kernel keeps blockIdx order
  // tensors[0]: q (input; the graph's q)
  p.q = static_cast<decltype(p.q)>(tensors[0]);
  // tensors[1]: k (input; the graph's k)
  p.k = static_cast<decltype(p.k)>(tensors[1]);
  p.k_batch_group = batch_groups[1];
  // tensors[2]: v (input; the graph's v)
  p.v = static_cast<decltype(p.v)>(tensors[2]);
  p.v_batch_group = batch_groups[2];
  // tensors[3]: m_i (output; the graph's m_ij)
  p.out_m_i = static_cast<decltype(p.out_m_i)>(tensors[3]);
  // tensors[4]: l_i (output; the graph's l_i_new)
  p.out_l_i = static_cast<decltype(p.out_l_i)>(tensors[4]);
  // tensors[5]: acc (output; the graph's acc_new)
  p.out_acc = static_cast<decltype(p.out_acc)>(tensors[5]);
  return static_cast<int>(twill_attn_fwd_desc::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
