#ifndef TWILL_NO_HOST
// ==== host side ===================================================================================
#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>

namespace {{ns}} {

// What a caller supplies. Extents are counted in tiles; every tensor is row-major
// [batch][rows][cols] in global memory. The tile of a tensor that CTA b reads or writes along a
// grid axis starts at b * NAME_rows_step + NAME_rows_offset (cols likewise). The defaults make each
// tensor its own array; sub-tiles of one matrix share it by a step of the whole tile and an offset
// of their part (q0, q1 = rows 0-63 and 64-127 of each 128-row tile of Q: step 128, offsets 0, 64).
struct Problem {
  int tiles_m = 1;  // output tiles along the rows
  int tiles_n = 1;  // output tiles along the columns
  int iters = kStages;  // loop iterations, at least kStages
  // Elements along the loop axis (keys, a GEMM's K), where not iters * kLoopStep: the loop then runs
  // ceil(loop_extent / kLoopStep) iterations (iters is not read), and the last tile may be partial
  // where kRagged (TMA fills the rows past the end with zeros; rowmax and exp2 skip them).
  int loop_extent = 0;
  int batch = 1;  // independent problems
  // 1: one CTA per SM, each computing several tiles in a row (kernel<true>: the next tile's
  // loads overlap the last one's epilogue), where the kernel allows it (kPersistent) and iters is
  // a multiple of kPhasePeriod; 0: one CTA per tile. -1: persistent when the loop is short
  // (iters <= 32), where a tile's pipeline fill and drain weigh most; on an H200 it was +8% for
  // 16-iteration attention tiles, and -1% to -5% for 64 and 128 (docs/gpu-results.md).
  int persistent = -1;
  float exp2_scale = 1.0f;  // exp2 computes exp2((x - b) * exp2_scale): log2(e)/sqrt(d) for attention
  {{problem_fields}}
};

// The loop's iterations, and its elements along the loop axis.
inline int loop_iters(const Problem& p) {
  {{loop_iters}}
}
inline uint64_t loop_elements(const Problem& p, int step) {
  return p.loop_extent > 0 ? static_cast<uint64_t>(p.loop_extent) : static_cast<uint64_t>(p.iters) * step;
}

// A 3-d tensor map (columns, rows, batch) with the swizzle of the kernel's tile (twill::Tile: 128, 64
// or 32 bytes, the box's row; 16 for none, as for a row vector, read by index).
inline bool encode(CUtensorMap* map, CUtensorMapDataType type, uint64_t esize, const void* ptr, uint64_t rows,
                   uint64_t cols, uint64_t batch, uint32_t box_rows, uint32_t box_cols, int swizzle) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled = nullptr;
  if (encode_tiled == nullptr) {
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode_tiled), 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return false;
  }
  cuuint64_t dims[3] = {cols, rows, batch};
  cuuint64_t strides[2] = {cols * esize, rows * cols * esize};
  cuuint32_t box[3] = {box_cols, box_rows, 1};
  cuuint32_t step[3] = {1, 1, 1};
  return encode_tiled(map, type, 3, const_cast<void*>(ptr), dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                      : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                      : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                      : CU_TENSOR_MAP_SWIZZLE_NONE,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

inline cudaError_t launch(const Problem& p, cudaStream_t stream = 0) {
  const int iters = loop_iters(p);
  if (iters < kStages || p.tiles_m < 1 || p.tiles_n < 1 || p.batch < 1) return cudaErrorInvalidValue;
  {{extent_check}}
    return cudaErrorInvalidValue;  // a partial last tile this kernel cannot take (kRagged), or no loop axis
  {{checks}}
  Args args;
  args.iters = iters;
  args.loop_tail = p.loop_extent > 0 ? p.loop_extent - (iters - 1) * kLoopStep : kLoopStep;
  args.tiles_m = p.tiles_m;
  args.tiles_n = p.tiles_n;
  args.tiles = p.tiles_m * p.tiles_n * p.batch;
  args.exp2_scale = p.exp2_scale;
  {{args}}
  const size_t smem = sizeof(Smem) + 1024;
  const bool tiles = kPersistent && (p.persistent > 0 || (p.persistent < 0 && iters <= 32)) &&
                    iters % kPhasePeriod == 0;
  const bool tail = kMasks && args.loop_tail < kLoopStep;  // the kernel with the masks only where needed
  auto* entry = tiles ? (tail ? kernel<kPersistent, kMasks> : kernel<kPersistent, false>)
                      : (tail ? kernel<false, kMasks> : kernel<false, false>);
  cudaError_t err = cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  int grid = args.tiles;
  if (tiles) {
    int device = 0, sms = 0;
    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
    {{persistent_grid}}
  }
  entry<<<grid, kThreads, smem, stream>>>({{launch_args}});
  return cudaGetLastError();
}

// Elements of each tensor for a problem (the sizes `launch` expects behind each pointer).
{{elements}}

}  // namespace {{ns}}

{{main}}
#endif  // TWILL_NO_HOST
