
// ==== the op vocabulary's register math beyond the attention set (twill/vocab.py) ================
// Included only by kernels that use one of these opcodes or a column vector, so that the kernels of
// the original opcodes keep their text. Every op computes in f32 and rounds to the result's type;
// integer tiles are held as the exact float of each value (exact up to 2^24).
namespace twill {

// A scalar (f32[1], a reduction of a whole vector) in and out of memory: one float, the same in every
// thread (each target's for_each over it is in its own header).
template <typename T, int ROWS, int COLS>
__device__ __forceinline__ void tile_to_frag(float& out, const void* tile, int) { out = to_float<T>(*static_cast<const T*>(tile)); }
template <typename T>
__device__ __forceinline__ void frag_to_buffer(T* buf, float v, int, int) { if (threadIdx.x % 128 == 0) buf[0] = from_float<T>(v); }
template <typename T>
__device__ __forceinline__ void buffer_to_frag(float& out, const T* buf, int, int) { out = to_float<T>(buf[0]); }
// reduce_{sum,max,min,prod} (KIND 0, 1, 2, 3) of a whole rank-1 tile in shared memory (Tile<T, 1, M>), in order.
template <typename T, int M, int KIND>
__device__ __forceinline__ void reduce_vector(float& out, const void* tile) {
  const char* base = static_cast<const char*>(tile);
  float v = KIND == 0 ? 0.f : KIND == 1 ? -INFINITY : KIND == 2 ? INFINITY : 1.f;
  for (int k = 0; k < M; ++k) {
    const float e = to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, 1, M>::offset(0, k)));
    v = KIND == 0 ? v + e : KIND == 1 ? fmaxf(v, e) : KIND == 2 ? fminf(v, e) : v * e;
  }
  out = v;
}

// out = EXPR of each element v of x (operands broadcast as at() reads them).
#define TWILL_UNARY(NAME, EXPR)                                              \
  template <typename Out, typename X>                                        \
  __device__ __forceinline__ void op_##NAME(Out& out, const X& x) {          \
    constexpr bool R = is_rows<Out>::value;                                  \
    for_each(out, [&](auto... e) {                                           \
      const float v = at<R>(x, e...);                                        \
      return EXPR;                                                           \
    });                                                                      \
  }
// out = EXPR of each pair of elements a of x and b of y.
#define TWILL_BINARY(NAME, EXPR)                                             \
  template <typename Out, typename X, typename Y>                            \
  __device__ __forceinline__ void op_##NAME(Out& out, const X& x, const Y& y) { \
    constexpr bool R = is_rows<Out>::value;                                  \
    for_each(out, [&](auto... e) {                                           \
      const float a = at<R>(x, e...), b = at<R>(y, e...);                    \
      return EXPR;                                                           \
    });                                                                      \
  }

__device__ __forceinline__ float tanh_approx(float v) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(v));
  return y;
}
__device__ __forceinline__ float div_full(float a, float b) {  // Triton's division (div.full.f32)
  float y;
  asm("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ float max_nan(float a, float b) {  // NaN where either operand is NaN
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ float min_nan(float a, float b) {
  float y;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
__device__ __forceinline__ int32_t as_int(float v) { return __float2int_rz(v); }

TWILL_UNARY(exp, fast_exp2(v * 1.4426950408889634f))
TWILL_UNARY(log, __logf(v))
TWILL_UNARY(log2, __log2f(v))
TWILL_UNARY(abs, fabsf(v))
TWILL_UNARY(neg, -v)
TWILL_UNARY(sqrt, __fsqrt_rn(v))
TWILL_UNARY(rsqrt, rsqrtf(v))
TWILL_UNARY(recip, div_full(1.f, v))
TWILL_UNARY(tanh, tanh_approx(v))
TWILL_UNARY(sigmoid, fmaf(0.5f, tanh_approx(0.5f * v), 0.5f))  // 1 / (1 + e^-v), one MUFU op
TWILL_UNARY(convert_trunc, truncf(v))  // a float tile to an integer one: toward zero, as fptosi
TWILL_BINARY(div, div_full(a, b))
TWILL_BINARY(min, fminf(a, b))
TWILL_BINARY(max_nan, max_nan(a, b))  // NaN where either is NaN (arith.maximumf: max.NaN.f32)
TWILL_BINARY(min_nan, min_nan(a, b))
TWILL_BINARY(ge, a >= b ? 1.f : 0.f)  // comparisons: 1 where it holds, else 0 (false where either is NaN)
TWILL_BINARY(gt, a > b ? 1.f : 0.f)
TWILL_BINARY(le, a <= b ? 1.f : 0.f)
TWILL_BINARY(lt, a < b ? 1.f : 0.f)
TWILL_BINARY(eq, a == b ? 1.f : 0.f)
TWILL_BINARY(ne, a == b ? 0.f : 1.f)  // (true where either is NaN, as arith.cmpf une)
TWILL_BINARY(fill, ((void)a, b))  // fill x {scalar = V}: V in x's shape
TWILL_BINARY(bit_and, static_cast<float>(as_int(a) & as_int(b)))
TWILL_BINARY(bit_or, static_cast<float>(as_int(a) | as_int(b)))
TWILL_BINARY(bit_xor, static_cast<float>(as_int(a) ^ as_int(b)))
TWILL_BINARY(shl, static_cast<float>(as_int(a) << as_int(b)))
TWILL_BINARY(shr, static_cast<float>(as_int(a) >> as_int(b)))  // arithmetic, on the value as held
#undef TWILL_UNARY
#undef TWILL_BINARY

// select cond, a, b: a where cond is nonzero, else b.
template <typename Out, typename C, typename A, typename B>
__device__ __forceinline__ void op_select(Out& out, const C& c, const A& a, const B& b) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return at<R>(c, e...) != 0.f ? at<R>(a, e...) : at<R>(b, e...); });
}
// fma a, b, c: a * b + c.
template <typename Out, typename A, typename B, typename C>
__device__ __forceinline__ void op_fma(Out& out, const A& a, const B& b, const C& c) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return fmaf(at<R>(a, e...), at<R>(b, e...), at<R>(c, e...)); });
}

// reduce_{sum,max,min} along the last axis (a row reduction), with a running value when given.
template <typename Out, typename X>
__device__ __forceinline__ void op_reduce_sum(Out& out, const X& x) { op_rowsum(out, x); }
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_reduce_sum(Out& out, const X& x, const I& init) { op_rowsum(out, x, init); }
template <typename Out, typename X>
__device__ __forceinline__ void op_reduce_max(Out& out, const X& x) { op_rowmax(out, x); }
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_reduce_max(Out& out, const X& x, const I& init) { op_rowmax(out, x, init); }
template <typename Out, typename X>
__device__ __forceinline__ void op_reduce_min(Out& out, const X& x) { row_min(out, x); }
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_reduce_min(Out& out, const X& x, const I& init) {
  Out r;  // the result may be the very buffer that holds init
  row_min(r, x);
  for_each(out, [&](auto... e) { return fminf(at<true>(r, e...), at<true>(init, e...)); });
}

// reduce_prod along the last axis (tl.cumprod's carry of its column tiles: the tile's product), times init.
template <typename Out, typename X>
__device__ __forceinline__ void op_reduce_prod(Out& out, const X& x) { row_prod(out, x); }
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_reduce_prod(Out& out, const X& x, const I& init) {
  Out r;  // the result may be the very buffer that holds init
  row_prod(r, x);
  for_each(out, [&](auto... e) { return at<true>(r, e...) * at<true>(init, e...); });
}

// dequant: (float((code >> SHIFT) & (2^BITS - 1)) - zero) * scale, code the W-bit element of packed
// (held as its value: its two's-complement bits are taken back), zero and scale broadcast.
template <int W, int BITS, int SHIFT>
__device__ __forceinline__ float dequant_code(float v) {
  constexpr uint32_t kWord = W >= 32 ? 0xffffffffu : (1u << W) - 1u;
  const uint32_t raw = static_cast<uint32_t>(as_int(v)) & kWord;
  return static_cast<float>((raw >> SHIFT) & ((1u << BITS) - 1u));
}
template <int W, int BITS, int SHIFT, typename Out, typename P, typename Z, typename S>
__device__ __forceinline__ void op_dequant(Out& out, const P& packed, const Z& zero, const S& scale) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) {
    return (dequant_code<W, BITS, SHIFT>(at<R>(packed, e...)) - at<R>(zero, e...)) * at<R>(scale, e...);
  });
}
template <int W, int BITS, int SHIFT, typename Out, typename P, typename S>
__device__ __forceinline__ void op_dequant(Out& out, const P& packed, const S& scale) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return dequant_code<W, BITS, SHIFT>(at<R>(packed, e...)) * at<R>(scale, e...); });
}

}  // namespace twill
