// The C entry point of row_var_sm90.h200.fused.cu, the one kernel of row_var_kernel's loops in sequence, for its binding
// (K.py), written by `twill emit-cuda --binding torch`: one block per loop, packed by that loop's binding.
#include "row_var_sm90.h200.fused.cu"
#include <string.h>

struct twill_args_L0 {
  int64_t tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent;
  int64_t persistent, raster_group;
  int64_t device;  // the tensors' CUDA device: made current for the launch, then the caller's again
  double exp2_scale, out_scale;
  void* stream;
  void* tensors[2];  // one per user tensor, in the binding's order
  int64_t batch_groups[2];
  int64_t row_strides[2], batch_strides[2];  // elements; 0: contiguous (a TMA tensor's row pitch)
  int64_t splits;  // splits of the loop (grid split): the outputs' first dimension
  int64_t loop_whole;  // uneven column splits: the loop's whole extent (0: splits x loop_extent)
};
static_assert(sizeof(twill_args_L0) == 8 * 23, "twill_args_L0: 8-byte fields, no padding");

struct twill_args_L1 {
  int64_t tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent;
  int64_t persistent, raster_group;
  int64_t device;  // the tensors' CUDA device: made current for the launch, then the caller's again
  double exp2_scale, out_scale;
  void* stream;
  void* tensors[3];  // one per user tensor, in the binding's order
  int64_t batch_groups[3];
  int64_t row_strides[3], batch_strides[3];  // elements; 0: contiguous (a TMA tensor's row pitch)
  int64_t splits;  // splits of the loop (grid split): the outputs' first dimension
  int64_t loop_whole;  // uneven column splits: the loop's whole extent (0: splits x loop_extent)
  void* fixup[2];  // the splits' partial carries and their counters (fixup.py)
};
static_assert(sizeof(twill_args_L1) == 8 * 29, "twill_args_L1: 8-byte fields, no padding");

extern "C" int twill_args_bytes(int loop) { return loop == 0 ? static_cast<int>(sizeof(twill_args_L0)) : loop == 1 ? static_cast<int>(sizeof(twill_args_L1)) : 0; }

extern "C" int twill_launch(const void* packed_L0, const void* packed_L1) {
  twill_row_var_kernel_L0::Problem p_L0;
  {
    twill_args_L0 a;
    memcpy(&a, packed_L0, sizeof a);
    twill_row_var_kernel_L0::Problem& p = p_L0;
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
    // tensors[0]: X (input; the graph's x)
    p.x = static_cast<decltype(p.x)>(a.tensors[0]);
    p.x_row_stride = a.row_strides[0];  p.x_batch_stride = a.batch_strides[0];
    // tensors[1]: total (output; the graph's total_new)
    p.out_total = static_cast<decltype(p.out_total)>(a.tensors[1]);
  }
  twill_row_var_kernel_L1::Problem p_L1;
  {
    twill_args_L1 a;
    memcpy(&a, packed_L1, sizeof a);
    twill_row_var_kernel_L1::Problem& p = p_L1;
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
    // tensors[0]: total (input; the graph's total)
    p.total = static_cast<decltype(p.total)>(a.tensors[0]);
    // tensors[1]: X (input; the graph's x)
    p.x = static_cast<decltype(p.x)>(a.tensors[1]);
    p.x_row_stride = a.row_strides[1];  p.x_batch_stride = a.batch_strides[1];
    // tensors[2]: Var (output; the graph's sq_new)
    p.out_sq = static_cast<decltype(p.out_sq)>(a.tensors[2]);
  }
  twill_args_L0 a;  // the device and stream: the first loop's (one stream, one device for all)
  memcpy(&a, packed_L0, sizeof a);
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return static_cast<int>(err);
  const int device = static_cast<int>(a.device);
  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);
  err = twill_row_var_kernel_fused::launch(p_L0, p_L1, static_cast<cudaStream_t>(a.stream));
  if (current != device) cudaSetDevice(current);
  return static_cast<int>(err);
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
