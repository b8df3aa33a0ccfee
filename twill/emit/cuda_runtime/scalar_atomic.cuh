// A scalar atomic output (emit/scalar_atomic.py), after the target's rows_max: the warp's value, one atomic.
// The largest value of the warp's lanes (every lane gets it).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int s = 16; s > 0; s /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, s));
  return v;
}
// *p = max(*p, v) for floats: the integer max of the bits where v's sign is clear (non-negative floats
// order as their bits), the unsigned min where it is set (negative floats order reversed). Every non-NaN
// float, -0 too (its sign is set: the unsigned min keeps any positive value and lowers a negative one).
__device__ __forceinline__ void atomic_max_float(float* p, float v) {
  if (__float_as_int(v) >= 0) atomicMax(reinterpret_cast<int*>(p), __float_as_int(v));
  else atomicMin(reinterpret_cast<unsigned int*>(p), __float_as_uint(v));
}
