// The C entry point of attention_bwd_hopper.h100.cu for its PyTorch binding attention_bwd_hopper.h100.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "attention_bwd_hopper.h100.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_attention_bwd_hopper::Problem p;
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
  // tensors[0]: k (input; the graph's k)
  p.k = static_cast<decltype(p.k)>(tensors[0]);
  // tensors[1]: v (input; the graph's v)
  p.v = static_cast<decltype(p.v)>(tensors[1]);
  // tensors[2]: q (input; the graph's q)
  p.q = static_cast<decltype(p.q)>(tensors[2]);
  p.q_batch_group = batch_groups[2];
  // tensors[3]: do (input; the graph's do)
  p.do_ = static_cast<decltype(p.do_)>(tensors[3]);
  p.do__batch_group = batch_groups[3];
  // tensors[4]: lse (input; the graph's lse)
  p.lse = static_cast<decltype(p.lse)>(tensors[4]);
  p.lse_batch_group = batch_groups[4];
  // tensors[5]: dlt (input; the graph's dlt)
  p.dlt = static_cast<decltype(p.dlt)>(tensors[5]);
  p.dlt_batch_group = batch_groups[5];
  // tensors[6]: dq (output; the graph's dq)
  p.store_0 = static_cast<decltype(p.store_0)>(tensors[6]);
  // tensors[7]: dk (output; the graph's dk_n)
  p.out_dk = static_cast<decltype(p.out_dk)>(tensors[7]);
  // tensors[8]: dv (output; the graph's dv_n)
  p.out_dv = static_cast<decltype(p.out_dv)>(tensors[8]);
  return static_cast<int>(twill_attention_bwd_hopper::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
