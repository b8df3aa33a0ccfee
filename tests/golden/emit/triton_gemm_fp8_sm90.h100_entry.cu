// The C entry point of triton_gemm_fp8_sm90.h100.cu for its PyTorch binding triton_gemm_fp8_sm90.h100.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "triton_gemm_fp8_sm90.h100.cu"
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
  void* tensors[5];  // one per user tensor, in the binding's order
  int64_t batch_groups[5];
  int64_t row_strides[5], batch_strides[5];  // elements; 0: contiguous (a TMA tensor's row pitch)
};
static_assert(sizeof(twill_args) == 8 * 33, "twill_args: 8-byte fields, no padding");

extern "C" int twill_args_bytes() { return static_cast<int>(sizeof(twill_args)); }

extern "C" int twill_launch(const void* packed) {
  twill_args a;
  memcpy(&a, packed, sizeof a);
  twill_gemm_fp8_kernel::Problem p;
  p.tiles_m = static_cast<int>(a.tiles_m);
  p.tiles_n = static_cast<int>(a.tiles_n);
  p.iters = static_cast<int>(a.iters);
  p.loop_extent = static_cast<int>(a.loop_extent);
  p.m_extent = static_cast<int>(a.m_extent);
  p.n_extent = static_cast<int>(a.n_extent);
  p.batch = static_cast<int>(a.batch);
  p.exp2_scale = static_cast<float>(a.exp2_scale);
  p.persistent = static_cast<int>(a.persistent);
  p.out_scale = static_cast<float>(a.out_scale);
  // tensors[0]: SCALE_A (input; the graph's SCALE_A)
  p.SCALE_A = static_cast<decltype(p.SCALE_A)>(a.tensors[0]);
  p.SCALE_A_batch_period = static_cast<int>(a.batch_groups[0]);
  // tensors[1]: SCALE_B (input; the graph's SCALE_B)
  p.SCALE_B = static_cast<decltype(p.SCALE_B)>(a.tensors[1]);
  p.SCALE_B_batch_period = static_cast<int>(a.batch_groups[1]);
  // tensors[2]: A (input; the graph's a)
  p.a = static_cast<decltype(p.a)>(a.tensors[2]);
  p.a_row_stride = a.row_strides[2];  p.a_batch_stride = a.batch_strides[2];
  // tensors[3]: B (input; the graph's b)
  p.b = static_cast<decltype(p.b)>(a.tensors[3]);
  p.b_row_stride = a.row_strides[3];  p.b_batch_stride = a.batch_strides[3];
  p.b_batch_group = static_cast<int>(a.batch_groups[3]);
  // tensors[4]: C (output; the graph's acc_new)
  p.out_acc = static_cast<decltype(p.out_acc)>(a.tensors[4]);
  p.out_acc_row_stride = a.row_strides[4];  p.out_acc_batch_stride = a.batch_strides[4];
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int device = static_cast<int>(a.device);
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  err = twill_gemm_fp8_kernel::launch(p, static_cast<cudaStream_t>(a.stream));
  if (current != device) cudaSetDevice(current);
  return static_cast<int>(err);
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
