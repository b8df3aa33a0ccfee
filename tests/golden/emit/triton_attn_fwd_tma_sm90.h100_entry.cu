// The C entry point of triton_attn_fwd_tma_sm90.h100.cu for its PyTorch binding triton_attn_fwd_tma_sm90.h100.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "triton_attn_fwd_tma_sm90.h100.cu"
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
  void* tensors[6];  // one per user tensor, in the binding's order
  int64_t batch_groups[6];
  int64_t row_strides[6], batch_strides[6];  // elements; 0: contiguous (a TMA tensor's row pitch)
};
static_assert(sizeof(twill_args) == 8 * 37, "twill_args: 8-byte fields, no padding");

extern "C" int twill_args_bytes() { return static_cast<int>(sizeof(twill_args)); }

extern "C" int twill_launch(const void* packed) {
  twill_args a;
  memcpy(&a, packed, sizeof a);
  twill_attn_fwd_desc::Problem p;
  p.tiles_m = static_cast<int>(a.tiles_m);
  p.tiles_n = static_cast<int>(a.tiles_n);
  p.iters = static_cast<int>(a.iters);
  p.loop_extent = static_cast<int>(a.loop_extent);
  p.m_extent = static_cast<int>(a.m_extent);
  p.n_extent = static_cast<int>(a.n_extent);
  p.batch = static_cast<int>(a.batch);
  p.exp2_scale = static_cast<float>(a.exp2_scale);
  p.persistent = static_cast<int>(a.persistent);
  // tensors[0]: q (input; the graph's q)
  p.q = static_cast<decltype(p.q)>(a.tensors[0]);
  p.q_row_stride = a.row_strides[0];  p.q_batch_stride = a.batch_strides[0];
  // tensors[1]: k (input; the graph's k)
  p.k = static_cast<decltype(p.k)>(a.tensors[1]);
  p.k_row_stride = a.row_strides[1];  p.k_batch_stride = a.batch_strides[1];
  p.k_batch_group = static_cast<int>(a.batch_groups[1]);
  // tensors[2]: v (input; the graph's v)
  p.v = static_cast<decltype(p.v)>(a.tensors[2]);
  p.v_row_stride = a.row_strides[2];  p.v_batch_stride = a.batch_strides[2];
  p.v_batch_group = static_cast<int>(a.batch_groups[2]);
  // tensors[3]: m_i (output; the graph's m_ij)
  p.out_m_i = static_cast<decltype(p.out_m_i)>(a.tensors[3]);
  // tensors[4]: l_i (output; the graph's l_i_new)
  p.out_l_i = static_cast<decltype(p.out_l_i)>(a.tensors[4]);
  // tensors[5]: acc (output; the graph's acc_new)
  p.out_acc = static_cast<decltype(p.out_acc)>(a.tensors[5]);
  p.out_acc_row_stride = a.row_strides[5];  p.out_acc_batch_stride = a.batch_strides[5];
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int device = static_cast<int>(a.device);
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  err = twill_attn_fwd_desc::launch(p, static_cast<cudaStream_t>(a.stream));
  if (current != device) cudaSetDevice(current);
  return static_cast<int>(err);
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
