// The C entry point of attention_bwd_delta_hopper.h200.cu for its PyTorch binding attention_bwd_delta_hopper.h200.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "attention_bwd_delta_hopper.h200.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_attention_bwd_delta_hopper::Problem p;
  p.tiles_m = tiles_m;
  p.tiles_n = tiles_n;
  p.iters = iters;
  p.loop_extent = loop_extent;
  (void)m_extent;  // the kernel has no tiles along M
  (void)n_extent;  // the kernel has no tiles along N
  p.batch = batch;
  p.exp2_scale = exp2_scale;
  p.persistent = persistent;
  (void)out_scale;  // no output of an fp8 mma
  (void)raster_group;  // the kernel keeps blockIdx order
  // tensors[0]: o (input; the graph's o)
  p.o = static_cast<decltype(p.o)>(tensors[0]);
  // tensors[1]: do (input; the graph's do)
  p.do_ = static_cast<decltype(p.do_)>(tensors[1]);
  // tensors[2]: dlt (output; the graph's dlt)
  p.store_0 = static_cast<decltype(p.store_0)>(tensors[2]);
  return static_cast<int>(twill_attention_bwd_delta_hopper::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
