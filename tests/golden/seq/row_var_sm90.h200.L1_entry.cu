// The C entry point of row_var_sm90.h200.L1.cu for its PyTorch binding row_var_sm90.h200.L1.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "row_var_sm90.h200.L1.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_row_var_kernel_L1::Problem p;
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
  // tensors[0]: total (input; the graph's total)
  p.total = static_cast<decltype(p.total)>(tensors[0]);
  // tensors[1]: X (input; the graph's x)
  p.x = static_cast<decltype(p.x)>(tensors[1]);
  // tensors[2]: Var (output; the graph's sq_new)
  p.out_sq = static_cast<decltype(p.out_sq)>(tensors[2]);
  return static_cast<int>(twill_row_var_kernel_L1::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
