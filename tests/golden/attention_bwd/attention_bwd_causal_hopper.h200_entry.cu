// The C entry point of attention_bwd_causal_hopper.h200.cu for its PyTorch binding attention_bwd_causal_hopper.h200.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "attention_bwd_causal_hopper.h200.cu"
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
  void* tensors[9];  // one per user tensor, in the binding's order
  int64_t batch_groups[9];
  int64_t row_strides[9], batch_strides[9];  // elements; 0: contiguous (a TMA tensor's row pitch)
  double scalars[1];  // the epilogue's scalars
};
static_assert(sizeof(twill_args) == 8 * 50, "twill_args: 8-byte fields, no padding");

extern "C" int twill_args_bytes() { return static_cast<int>(sizeof(twill_args)); }

extern "C" int twill_launch(const void* packed) {
  twill_args a;
  memcpy(&a, packed, sizeof a);
  twill_attention_bwd_causal_hopper::Problem p;
  p.tiles_m = static_cast<int>(a.tiles_m);
  p.tiles_n = static_cast<int>(a.tiles_n);
  p.iters = static_cast<int>(a.iters);
  p.loop_extent = static_cast<int>(a.loop_extent);
  p.m_extent = static_cast<int>(a.m_extent);
  p.n_extent = static_cast<int>(a.n_extent);
  p.batch = static_cast<int>(a.batch);
  p.exp2_scale = static_cast<float>(a.exp2_scale);
  p.persistent = static_cast<int>(a.persistent);
  p.softmax_scale = static_cast<float>(a.scalars[0]);  // scalar softmax_scale
  // tensors[0]: k (input; the graph's k)
  p.k = static_cast<decltype(p.k)>(a.tensors[0]);
  p.k_row_stride = a.row_strides[0];  p.k_batch_stride = a.batch_strides[0];
  // tensors[1]: v (input; the graph's v)
  p.v = static_cast<decltype(p.v)>(a.tensors[1]);
  p.v_row_stride = a.row_strides[1];  p.v_batch_stride = a.batch_strides[1];
  // tensors[2]: q (input; the graph's q)
  p.q = static_cast<decltype(p.q)>(a.tensors[2]);
  p.q_row_stride = a.row_strides[2];  p.q_batch_stride = a.batch_strides[2];
  p.q_batch_group = static_cast<int>(a.batch_groups[2]);
  // tensors[3]: do (input; the graph's do)
  p.do_ = static_cast<decltype(p.do_)>(a.tensors[3]);
  p.do__row_stride = a.row_strides[3];  p.do__batch_stride = a.batch_strides[3];
  p.do__batch_group = static_cast<int>(a.batch_groups[3]);
  // tensors[4]: lse (input; the graph's lse)
  p.lse = static_cast<decltype(p.lse)>(a.tensors[4]);
  p.lse_row_stride = a.row_strides[4];  p.lse_batch_stride = a.batch_strides[4];
  p.lse_batch_group = static_cast<int>(a.batch_groups[4]);
  // tensors[5]: dlt (input; the graph's dlt)
  p.dlt = static_cast<decltype(p.dlt)>(a.tensors[5]);
  p.dlt_row_stride = a.row_strides[5];  p.dlt_batch_stride = a.batch_strides[5];
  p.dlt_batch_group = static_cast<int>(a.batch_groups[5]);
  // tensors[6]: dq (output; the graph's dq)
  p.store_0 = static_cast<decltype(p.store_0)>(a.tensors[6]);
  p.store_0_row_stride = a.row_strides[6];  p.store_0_batch_stride = a.batch_strides[6];
  // tensors[7]: dk (output; the graph's dk_n)
  p.out_dk = static_cast<decltype(p.out_dk)>(a.tensors[7]);
  // tensors[8]: dv (output; the graph's dv_n)
  p.out_dv = static_cast<decltype(p.out_dv)>(a.tensors[8]);
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int device = static_cast<int>(a.device);
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  err = twill_attention_bwd_causal_hopper::launch(p, static_cast<cudaStream_t>(a.stream));
  if (current != device) cudaSetDevice(current);
  return static_cast<int>(err);
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
