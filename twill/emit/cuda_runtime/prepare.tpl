namespace {{ns}} {

// A sequence's one kernel (seqfuse.py) runs this loop's roles in its own: the Args and tensor maps this loop's
// launch() would pass its kernel, by the same checks; whether it would loop over tiles and mask a partial tile.
inline cudaError_t fused_prepare(const Problem& p, Args& args, CUtensorMap* maps, bool* tiles, bool* tail) {
  const int iters = loop_iters(p);
  if (iters < kStages || p.tiles_m < 1 || p.tiles_n < 1 || p.batch < 1) return cudaErrorInvalidValue;
  {{extent_check}}
    return cudaErrorInvalidValue;  // a partial last tile this kernel cannot take (kRagged), or no loop axis
  {{splits}}
  {{checks}}
  args.iters = iters;
  args.loop_tail = p.loop_extent > 0 ? p.loop_extent - (iters - 1) * kLoopStep : kLoopStep;
  args.tiles_m = p.tiles_m;
  args.tiles_n = p.tiles_n;
  args.tiles = p.tiles_m * p.tiles_n * p.batch;
  args.exp2_scale = p.exp2_scale;
  {{args}}
  {{maps}}
  *tiles = kPersistent && (p.persistent > 0 || (p.persistent < 0 && iters <= 32));
  *tail = kMasks && args.loop_tail < kLoopStep;
  return cudaSuccess;
}

}  // namespace {{ns}}
