// A scalar atomic output (emit/scalar_atomic.py): a tile's rows to one value (then scalar_atomic.cuh).
// The thread's row (TScalR: one row a thread; of a 64-row tile, a copy of the row 16 lanes below, which a max
// takes twice to no effect).
template <int R>
__device__ __forceinline__ float rows_max(const TScalR<R>& r) { return r.x; }
