// The C entry point of layernorm_fwd_sm90.h200.fused.cu, the one kernel of layernorm_fwd_kernel's loops in sequence, for its binding
// (K.py), written by `twill emit-cuda --binding torch`: one block per loop, packed by that loop's binding.
#include "layernorm_fwd_sm90.h200.fused.cu"
#include <string.h>

struct twill_args_L0 {
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
static_assert(sizeof(twill_args_L0) == 8 * 30, "twill_args_L0: 8-byte fields, no padding");

struct twill_args_L1 {
  int64_t tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent;
  int64_t persistent, raster_group;
  int64_t device;  // the tensors' CUDA device: made current for the launch, then the caller's again
  double exp2_scale, out_scale;
  void* stream;
  void* tensors[4];  // one per user tensor, in the binding's order
  int64_t batch_groups[4];
  int64_t row_strides[4], batch_strides[4];  // elements; 0: contiguous (a TMA tensor's row pitch)
  double scalars[2];  // the epilogue's scalars
  int64_t splits;  // splits of the loop (grid split): the outputs' first dimension
  int64_t loop_whole;  // uneven column splits: the loop's whole extent (0: splits x loop_extent)
  void* fixup[2];  // the splits' partial carries and their counters (fixup.py)
};
static_assert(sizeof(twill_args_L1) == 8 * 35, "twill_args_L1: 8-byte fields, no padding");

struct twill_args_L2 {
  int64_t tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent;
  int64_t persistent, raster_group;
  int64_t device;  // the tensors' CUDA device: made current for the launch, then the caller's again
  double exp2_scale, out_scale;
  void* stream;
  void* tensors[6];  // one per user tensor, in the binding's order
  int64_t batch_groups[6];
  int64_t row_strides[6], batch_strides[6];  // elements; 0: contiguous (a TMA tensor's row pitch)
  double scalars[2];  // the epilogue's scalars
  int64_t splits;  // splits of the loop (grid split): the outputs' first dimension
  int64_t loop_whole;  // uneven column splits: the loop's whole extent (0: splits x loop_extent)
};
static_assert(sizeof(twill_args_L2) == 8 * 41, "twill_args_L2: 8-byte fields, no padding");

extern "C" int twill_args_bytes(int loop) { return loop == 0 ? static_cast<int>(sizeof(twill_args_L0)) : loop == 1 ? static_cast<int>(sizeof(twill_args_L1)) : loop == 2 ? static_cast<int>(sizeof(twill_args_L2)) : 0; }

extern "C" int twill_launch(const void* packed_L0, const void* packed_L1, const void* packed_L2) {
  twill_layernorm_fwd_kernel_L0::Problem p_L0;
  {
    twill_args_L0 a;
    memcpy(&a, packed_L0, sizeof a);
    twill_layernorm_fwd_kernel_L0::Problem& p = p_L0;
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
  }
  twill_layernorm_fwd_kernel_L1::Problem p_L1;
  {
    twill_args_L1 a;
    memcpy(&a, packed_L1, sizeof a);
    twill_layernorm_fwd_kernel_L1::Problem& p = p_L1;
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
    p.eps = static_cast<float>(a.scalars[1]);  // scalar eps
    // tensors[0]: _mean (input; the graph's _mean)
    p._mean = static_cast<decltype(p._mean)>(a.tensors[0]);
    // tensors[1]: X (input; the graph's x)
    p.x = static_cast<decltype(p.x)>(a.tensors[1]);
    p.x_row_stride = a.row_strides[1];  p.x_batch_stride = a.batch_strides[1];
    // tensors[2]: _var (output; the graph's _var_new)
    p.out__var = static_cast<decltype(p.out__var)>(a.tensors[2]);
    // tensors[3]: Rstd (output; the graph's _var_new)
    p.out_Rstd = static_cast<decltype(p.out_Rstd)>(a.tensors[3]);
  }
  twill_layernorm_fwd_kernel_L2::Problem p_L2;
  {
    twill_args_L2 a;
    memcpy(&a, packed_L2, sizeof a);
    twill_layernorm_fwd_kernel_L2::Problem& p = p_L2;
    p.tiles_m = static_cast<int>(a.tiles_m);
    p.tiles_n = static_cast<int>(a.tiles_n);
    p.iters = static_cast<int>(a.iters);
    p.loop_extent = static_cast<int>(a.loop_extent);
    p.m_extent = static_cast<int>(a.m_extent);
    p.batch = static_cast<int>(a.batch);
    p.splits = static_cast<int>(a.splits);
    p.loop_whole = a.loop_whole;
    p.exp2_scale = static_cast<float>(a.exp2_scale);
    p.persistent = static_cast<int>(a.persistent);
    p.N = static_cast<int>(a.scalars[0]);  // scalar N
    p.eps = static_cast<float>(a.scalars[1]);  // scalar eps
    // tensors[0]: _mean (input; the graph's _mean)
    p._mean = static_cast<decltype(p._mean)>(a.tensors[0]);
    // tensors[1]: _var (input; the graph's _var)
    p._var = static_cast<decltype(p._var)>(a.tensors[1]);
    // tensors[2]: W (input; the graph's w)
    p.w = static_cast<decltype(p.w)>(a.tensors[2]);
    p.w_row_stride = a.row_strides[2];  p.w_batch_stride = a.batch_strides[2];
    p.w_batch_group = static_cast<int>(a.batch_groups[2]);
    // tensors[3]: B (input; the graph's b)
    p.b = static_cast<decltype(p.b)>(a.tensors[3]);
    p.b_row_stride = a.row_strides[3];  p.b_batch_stride = a.batch_strides[3];
    p.b_batch_group = static_cast<int>(a.batch_groups[3]);
    // tensors[4]: X (input; the graph's x)
    p.x = static_cast<decltype(p.x)>(a.tensors[4]);
    p.x_row_stride = a.row_strides[4];  p.x_batch_stride = a.batch_strides[4];
    // tensors[5]: Y (output; the graph's y_add)
    p.store_0 = static_cast<decltype(p.store_0)>(a.tensors[5]);
    p.store_0_row_stride = a.row_strides[5];  p.store_0_batch_stride = a.batch_strides[5];
  }
  twill_args_L0 a;  // the device and stream: the first loop's (one stream, one device for all)
  memcpy(&a, packed_L0, sizeof a);
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int device = static_cast<int>(a.device);
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  err = twill_layernorm_fwd_kernel_fused::launch(p_L0, p_L1, p_L2, static_cast<cudaStream_t>(a.stream));
  if (current != device) cudaSetDevice(current);
  return static_cast<int>(err);
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
