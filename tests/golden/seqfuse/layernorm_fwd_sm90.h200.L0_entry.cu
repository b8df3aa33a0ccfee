// The C entry point of layernorm_fwd_sm90.h200.L0.cu for its PyTorch binding layernorm_fwd_sm90.h200.L0.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "layernorm_fwd_sm90.h200.L0.cu"
#include <string.h>

// What the binding passes: one block its runtime packs with struct (args_format: every field 8 bytes,
// in this order), read here by a copy. One argument, not fourteen: ctypes converts each argument of
// a call, and fourteen cost ~5 us of the call's host time.
struct twill_args {
  int64_t tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent;
  int64_t persistent, raster_group;
  int64_t device;  // the tensors' CUDA device: made current for the launch, then the caller's again
  double exp2_scale, out_scale;
  void* stream;
  void* tensors[3];  // one per user tensor, in the binding's order
  int64_t batch_groups[3];
  int64_t row_strides[3], batch_strides[3];  // elements; 0: contiguous (a TMA tensor's row pitch)
  double scalars[1];  // the epilogue's scalars
  int64_t splits;  // splits of the loop (grid split): the outputs' first dimension
  int64_t loop_whole;  // uneven column splits: the loop's whole extent (0: splits x loop_extent)
  void* fixup[2];  // the splits' partial carries and their counters (fixup.py)
};
static_assert(sizeof(twill_args) == 8 * 30, "twill_args: 8-byte fields, no padding");

extern "C" int twill_args_bytes() { return static_cast<int>(sizeof(twill_args)); }

extern "C" int twill_launch(const void* packed) {
  twill_args a;
  memcpy(&a, packed, sizeof a);
  twill_layernorm_fwd_kernel_L0::Problem p;
  p.tiles_m = static_cast<int>(a.tiles_m);
  p.tiles_n = static_cast<int>(a.tiles_n);
  p.iters = static_cast<int>(a.iters);
  p.loop_extent = static_cast<int>(a.loop_extent);
  p.m_extent = static_cast<int>(a.m_extent);
  p.batch = static_cast<int>(a.batch);
  p.splits = static_cast<int>(a.splits);
  p.loop_whole = a.loop_whole;
  p.twill_partials = static_cast<float*>(a.fixup[0]);
  p.twill_arrivals = static_cast<int*>(a.fixup[1]);
  p.exp2_scale = static_cast<float>(a.exp2_scale);
  p.persistent = static_cast<int>(a.persistent);
  p.N = static_cast<int>(a.scalars[0]);  // scalar N
  // tensors[0]: X (input; the graph's a)
  p.a = static_cast<decltype(p.a)>(a.tensors[0]);
  p.a_row_stride = a.row_strides[0];  p.a_batch_stride = a.batch_strides[0];
  // tensors[1]: _mean (output; the graph's _mean_new)
  p.out__mean = static_cast<decltype(p.out__mean)>(a.tensors[1]);
  // tensors[2]: Mean (output; the graph's _mean_new)
  p.out_Mean = static_cast<decltype(p.out_Mean)>(a.tensors[2]);
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int device = static_cast<int>(a.device);
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  err = twill_layernorm_fwd_kernel_L0::launch(p, static_cast<cudaStream_t>(a.stream));
  if (current != device) cudaSetDevice(current);
  return static_cast<int>(err);
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
