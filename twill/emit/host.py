"""The host side of an emitted kernel: tensor maps, launch configuration, and a test `main`.

`launch(problem, stream)` encodes one TMA tensor map per loaded tensor with
`cuTensorMapEncodeTiled` (reached through `cudaGetDriverEntryPointByVersion`, so no -lcuda is
needed), raises the kernel's dynamic shared-memory limit and launches one CTA per output tile.
Everything sits behind `#ifndef TWILL_NO_HOST`; `-DTWILL_MAIN` adds a `main` that runs the kernel on
random data and prints a checksum and the time.
"""
from __future__ import annotations

from . import epilogue
from .model import DIM_LABELS, dtype_bytes, rastered, swizzle_bytes
from .ops import TMA_DTYPE, ctype


def _extent(t, dim: int) -> str:
    axis, size, step = t.axes[dim], t.tile[dim], f"p.{t.name}_{DIM_LABELS[dim]}_step"
    return {"m": f"static_cast<uint64_t>(p.tiles_m) * {step}", "n": f"static_cast<uint64_t>(p.tiles_n) * {step}",
            "loop": f"loop_elements(p, {size})"}.get(axis, f"uint64_t({size})")


def _dims(t) -> tuple[str, str, str]:
    rows = "uint64_t(1)" if t.rank == 1 else _extent(t, 0)
    cols = _extent(t, 1)
    batch = ("static_cast<uint64_t>(p.batch) * loop_iters(p)" if t.per_iteration else "static_cast<uint64_t>(p.batch)")
    return rows, cols, batch


def host_launcher(r) -> str:
    m = r.m
    ns = r.ns
    maps = r.tma_tensors()
    ptrs = r.pointer_tensors()
    every = [t for t in m.tensors]
    lines = [
        "#ifndef TWILL_NO_HOST",
        "// ==== host side ===================================================================================",
        "#include <cudaTypedefs.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "",
        f"namespace {ns} {{",
        "",
        "// What a caller supplies. Extents are counted in tiles; every tensor is row-major",
        "// [batch][rows][cols] in global memory. The tile of a tensor that CTA b reads or writes along a",
        "// grid axis starts at b * NAME_rows_step + NAME_rows_offset (cols likewise). The defaults make each",
        "// tensor its own array; sub-tiles of one matrix share it by a step of the whole tile and an offset",
        "// of their part (q0, q1 = rows 0-63 and 64-127 of each 128-row tile of Q: step 128, offsets 0, 64).",
        "struct Problem {",
        "  int tiles_m = 1;  // output tiles along the rows",
        "  int tiles_n = 1;  // output tiles along the columns",
        "  int iters = kStages;  // loop iterations, at least kStages",
        "  // Elements along the loop axis (keys, a GEMM's K), where not iters * kLoopStep: the loop then runs",
        "  // ceil(loop_extent / kLoopStep) iterations (iters is not read), and the last tile may be partial",
        "  // where kRagged (TMA fills the rows past the end with zeros; rowmax and exp2 skip them).",
        "  int loop_extent = 0;",
        "  int batch = 1;  // independent problems",
        "  // 1: one CTA per SM, each computing several tiles in a row (kernel<true>: the next tile's",
        "  // loads overlap the last one's epilogue), where the kernel allows it (kPersistent) and iters is",
        "  // a multiple of kPhasePeriod; 0: one CTA per tile. -1: persistent when the loop is short",
        "  // (iters <= 32), where a tile's pipeline fill and drain weigh most; on an H200 it was +8% for",
        "  // 16-iteration attention tiles, and -1% to -5% for 64 and 128 (docs/gpu-results.md).",
        "  int persistent = -1;",
        "  float exp2_scale = 1.0f;  // exp2 computes exp2((x - b) * exp2_scale): log2(e)/sqrt(d) for attention",
        *epilogue.problem_fields(m),
    ]
    for t in every:
        const = "const " if t.kind in ("input", "load") else ""
        lines.append(f"  {const}{ctype(t.dtype)}* {t.name} = nullptr;  // {t.kind} {t.value}: {r.shape_doc(t)}")
    if rastered(m):
        lines.append("  int raster_group = 16;  // output tile rows the CTAs walk together (L2 reuse; 0: row-fastest order)")
    for t in every:
        for d, label in t.placed_dims():
            lines.append(f"  int {t.name}_{label}_step = {t.tile[d]}, {t.name}_{label}_offset = 0;")
    lines += [
        "};",
        "",
        "// The loop's iterations, and its elements along the loop axis.",
        "inline int loop_iters(const Problem& p) {",
        ("  return p.loop_extent > 0 ? (p.loop_extent + kLoopStep - 1) / kLoopStep : p.iters;" if r.m.ragged.step
         else "  return p.iters;  // no loaded tile runs along the loop: loop_extent has no meaning here"),
        "}",
        "inline uint64_t loop_elements(const Problem& p, int step) {",
        "  return p.loop_extent > 0 ? static_cast<uint64_t>(p.loop_extent) : static_cast<uint64_t>(p.iters) * step;",
        "}",
        "",
        "// A 3-d tensor map (columns, rows, batch) with the swizzle of the kernel's tile (twill::Tile: 128, 64",
        "// or 32 bytes, the box's row; 16 for none, as for a row vector, read by index).",
        "inline bool encode(CUtensorMap* map, CUtensorMapDataType type, uint64_t esize, const void* ptr, uint64_t rows,",
        "                   uint64_t cols, uint64_t batch, uint32_t box_rows, uint32_t box_cols, int swizzle) {",
        "  static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled = nullptr;",
        "  if (encode_tiled == nullptr) {",
        "    cudaDriverEntryPointQueryResult found;",
        "    if (cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\", reinterpret_cast<void**>(&encode_tiled), 12000,",
        "                                         cudaEnableDefault, &found) != cudaSuccess ||",
        "        found != cudaDriverEntryPointSuccess)",
        "      return false;",
        "  }",
        "  cuuint64_t dims[3] = {cols, rows, batch};",
        "  cuuint64_t strides[2] = {cols * esize, rows * cols * esize};",
        "  cuuint32_t box[3] = {box_cols, box_rows, 1};",
        "  cuuint32_t step[3] = {1, 1, 1};",
        "  return encode_tiled(map, type, 3, const_cast<void*>(ptr), dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,",
        "                      swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B",
        "                      : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B",
        "                      : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B",
        "                                      : CU_TENSOR_MAP_SWIZZLE_NONE,",
        "                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,",
        "                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;",
        "}",
        "",
        "inline cudaError_t launch(const Problem& p, cudaStream_t stream = 0) {",
        "  const int iters = loop_iters(p);",
        "  if (iters < kStages || p.tiles_m < 1 || p.tiles_n < 1 || p.batch < 1) return cudaErrorInvalidValue;",
        ("  if (p.loop_extent < 0 || (p.loop_extent % kLoopStep != 0 && !kRagged))" if r.m.ragged.step
         else "  if (p.loop_extent != 0)"),
        "    return cudaErrorInvalidValue;  // a partial last tile this kernel cannot take (kRagged), or no loop axis",
    ]
    for t in every:
        lines.append(f"  if (p.{t.name} == nullptr) return cudaErrorInvalidValue;")
        for d, label in t.placed_dims():
            lines.append(f"  if (p.{t.name}_{label}_offset < 0 || p.{t.name}_{label}_offset + {t.tile[d]} > "
                         f"p.{t.name}_{label}_step) return cudaErrorInvalidValue;")
    for t in maps:
        rows, cols, batch = _dims(t)
        esize = dtype_bytes(t.dtype)
        sw = swizzle_bytes(t.tile[-1] * esize)
        lines += [
            f"  CUtensorMap tm_{t.name};",
            f"  if (!encode(&tm_{t.name}, {TMA_DTYPE[t.dtype]}, {esize}, p.{t.name}, {rows}, {cols}, {batch}, "
            + (f"{min(t.tile[0], 256)}, {sw // esize}, {sw}))" if t.rank > 1 else f"1, {t.tile[1]}, 16))"),
            "    return cudaErrorInvalidValue;",
        ]
    lines += [
        "  Args args;",
        "  args.iters = iters;",
        "  args.loop_tail = p.loop_extent > 0 ? p.loop_extent - (iters - 1) * kLoopStep : kLoopStep;",
        "  args.tiles_m = p.tiles_m;",
        "  args.tiles_n = p.tiles_n;",
        "  args.tiles = p.tiles_m * p.tiles_n * p.batch;",
        "  args.exp2_scale = p.exp2_scale;",
        *epilogue.copy_fields(m),
    ]
    if rastered(m):
        lines.append("  args.raster_group = p.raster_group;")
    for t in ptrs:
        lines.append(f"  args.{t.name} = p.{t.name};")
    for t in every:
        for _, label in t.placed_dims():
            lines.append(f"  args.{t.name}_{label}_step = p.{t.name}_{label}_step;")
            lines.append(f"  args.{t.name}_{label}_offset = p.{t.name}_{label}_offset;")
    lines += [
        "  const size_t smem = sizeof(Smem) + 1024;",
        "  const bool tiles = kPersistent && (p.persistent > 0 || (p.persistent < 0 && iters <= 32)) &&",
        "                    iters % kPhasePeriod == 0;",
        "  const bool tail = kMasks && args.loop_tail < kLoopStep;  // the kernel with the masks only where needed",
        "  auto* entry = tiles ? (tail ? kernel<kPersistent, kMasks> : kernel<kPersistent, false>)",
        "                      : (tail ? kernel<false, kMasks> : kernel<false, false>);",
        "  cudaError_t err = cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));",
        "  if (err != cudaSuccess) return err;",
        "  int grid = args.tiles;",
        "  if (tiles) {",
        "    int device = 0, sms = 0;",
        "    if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;",
        "    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;",
        "    grid = sms < grid ? sms : grid;  // one CTA per SM (the kernel's shared memory allows no second)",
        "  }",
        f"  entry<<<grid, kThreads, smem, stream>>>("
        f"{', '.join([f'tm_{t.name}' for t in maps] + ['args'])});",
        "  return cudaGetLastError();",
        "}",
        "",
        "// Elements of each tensor for a problem (the sizes `launch` expects behind each pointer).",
    ]
    for t in every:
        rows, cols, batch = _dims(t)
        lines.append(f"inline size_t elements_{t.name}(const Problem& p) {{ return static_cast<size_t>({rows} * {cols} * {batch}); }}")
    lines += ["", f"}}  // namespace {ns}", ""]
    lines += _main(r, ns, every)
    lines += ["#endif  // TWILL_NO_HOST"]
    return "\n".join(lines) + "\n"


def _main(r, ns: str, tensors) -> list[str]:
    lines = [
        "#ifdef TWILL_MAIN",
        "// A smoke test: random inputs, one warm-up and ten timed launches, a checksum of each output.",
        "// Usage: ./a.out [tiles_m tiles_n iters batch]",
        "template <typename T>",
        "static T* twill_random_tensor(size_t n, unsigned seed) {",
        "  T* host = static_cast<T*>(malloc(n * sizeof(T)));",
        "  for (size_t i = 0; i < n; ++i) {",
        "    seed = seed * 1664525u + 1013904223u;",
        "    host[i] = static_cast<T>(static_cast<float>((seed >> 9) & 0xffff) / 65536.0f - 0.5f);",
        "  }",
        "  T* dev = nullptr;",
        "  if (cudaMalloc(&dev, n * sizeof(T)) != cudaSuccess) exit(1);",
        "  cudaMemcpy(dev, host, n * sizeof(T), cudaMemcpyHostToDevice);",
        "  free(host);",
        "  return dev;",
        "}",
        "",
        "template <typename T>",
        "static double twill_checksum(const T* dev, size_t n) {",
        "  T* host = static_cast<T*>(malloc(n * sizeof(T)));",
        "  cudaMemcpy(host, dev, n * sizeof(T), cudaMemcpyDeviceToHost);",
        "  double s = 0;",
        "  for (size_t i = 0; i < n; ++i) s += static_cast<double>(static_cast<float>(host[i]));",
        "  free(host);",
        "  return s;",
        "}",
        "",
        "int main(int argc, char** argv) {",
        f"  {ns}::Problem p;",
        "  if (argc > 4) {",
        "    p.tiles_m = atoi(argv[1]);",
        "    p.tiles_n = atoi(argv[2]);",
        "    p.iters = atoi(argv[3]);",
        "    p.batch = atoi(argv[4]);",
        "  } else {",
        f"    p.iters = {max(8, r.m.stages)};",
        "  }",
    ]
    for i, t in enumerate(tensors):
        T = ctype(t.dtype)
        lines.append(f"  p.{t.name} = twill_random_tensor<{T}>({ns}::elements_{t.name}(p), {i + 1}u);")
    lines += [
        f"  cudaError_t err = {ns}::launch(p);",
        "  if (err == cudaSuccess) err = cudaDeviceSynchronize();",
        "  if (err != cudaSuccess) {",
        "    printf(\"launch failed: %s\\n\", cudaGetErrorString(err));",
        "    return 1;",
        "  }",
        "  cudaEvent_t start, stop;",
        "  cudaEventCreate(&start);",
        "  cudaEventCreate(&stop);",
        "  cudaEventRecord(start);",
        f"  for (int rep = 0; rep < 10; ++rep) {ns}::launch(p);",
        "  cudaEventRecord(stop);",
        "  cudaEventSynchronize(stop);",
        "  float ms = 0;",
        "  cudaEventElapsedTime(&ms, start, stop);",
        "  printf(\"%.4f ms per launch\\n\", ms / 10);",
    ]
    for t in tensors:
        if t.kind in ("output", "store"):
            lines.append(f"  printf(\"checksum {t.name}: %.6e\\n\", twill_checksum(p.{t.name}, {ns}::elements_{t.name}(p)));")
    lines += ["  return 0;", "}", "#endif  // TWILL_MAIN"]
    return lines
