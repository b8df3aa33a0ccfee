// The C entry point of attention_fwd_hopper.h200.cu for its PyTorch binding attention_fwd_hopper.h200.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "attention_fwd_hopper.h200.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_attention_fwd_hopper::Problem p;
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
  // tensors[0]: q (input; the graph's q0, q1)
  p.q0 = static_cast<decltype(p.q0)>(tensors[0]);
  p.q0_rows_step = 128;
  p.q0_rows_offset = 0;
  p.q1 = static_cast<decltype(p.q1)>(tensors[0]);
  p.q1_rows_step = 128;
  p.q1_rows_offset = 64;
  // tensors[1]: k (input; the graph's k)
  p.k = static_cast<decltype(p.k)>(tensors[1]);
  p.k_batch_group = batch_groups[1];
  // tensors[2]: v (input; the graph's v)
  p.v = static_cast<decltype(p.v)>(tensors[2]);
  p.v_batch_group = batch_groups[2];
  // tensors[3]: m (output; the graph's m0_new, m1_new)
  p.out_m0 = static_cast<decltype(p.out_m0)>(tensors[3]);
  p.out_m0_cols_step = 128;
  p.out_m0_cols_offset = 0;
  p.out_m1 = static_cast<decltype(p.out_m1)>(tensors[3]);
  p.out_m1_cols_step = 128;
  p.out_m1_cols_offset = 64;
  // tensors[4]: l (output; the graph's l0_new, l1_new)
  p.out_l0 = static_cast<decltype(p.out_l0)>(tensors[4]);
  p.out_l0_cols_step = 128;
  p.out_l0_cols_offset = 0;
  p.out_l1 = static_cast<decltype(p.out_l1)>(tensors[4]);
  p.out_l1_cols_step = 128;
  p.out_l1_cols_offset = 64;
  // tensors[5]: acc (output; the graph's acc0_n, acc1_n)
  p.out_acc0 = static_cast<decltype(p.out_acc0)>(tensors[5]);
  p.out_acc0_rows_step = 128;
  p.out_acc0_rows_offset = 0;
  p.out_acc1 = static_cast<decltype(p.out_acc1)>(tensors[5]);
  p.out_acc1_rows_step = 128;
  p.out_acc1_rows_offset = 64;
  return static_cast<int>(twill_attention_fwd_hopper::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
