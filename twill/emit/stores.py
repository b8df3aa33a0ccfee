"""`Renderer`'s stores: one device function per output and store tensor that writes a tile to
global memory, row-major [batch][rows][cols], at the tile's origin along the grid and loop axes:
each thread its elements (float2 atomics where several CTAs add into one tile), or through a
swizzled shared-memory staging and TMA, 128-byte column blocks at a time."""
from __future__ import annotations

from . import batch_groups, colsplit, partial, splits
from .lines import Lines
from .model import DIM_LABELS, EmitError
from .ops import ctype


class Stores:
    """`Renderer`'s store functions (see the module docstring)."""

    # -- stores to global memory ---------------------------------------------------------------------
    def _origin(self, t, it: str) -> tuple[str, str, str]:
        """(row origin, column origin, batch index) of the tile of tensor t in iteration `it`."""
        def org(dim):
            axis, size, label = t.axes[dim], t.tile[dim], DIM_LABELS[dim]
            if axis in ("m", "n"):
                return f"tile.{axis} * args.{t.name}_{label}_step + args.{t.name}_{label}_offset"
            return f"{self.loop_index(it)} * {size}" if axis == "loop" else "0"
        rows = "0" if t.rank == 1 else org(0)
        cols = org(1)
        d, count, index = t.iter_div, self.loop_count(), self.loop_index(it)
        batch = ((f"tile.b * {count} + {index}" if d == 1 else f"tile.b * (({count} + {d - 1}) / {d}) + {index} / {d}")
                 if t.per_iteration and not batch_groups.unbatched(t) else  # ({batch = none}: entry 0's, below)
                 (index if d == 1 else f"{index} / {d}") if t.per_iteration
                 else batch_groups.batch_index(t, self.split, colsplit.fixed_up(self.m.graph)))
        return rows, cols, batch

    def loop_index(self, it: str) -> str:
        """Iteration `it` of the tile's loop as an index along the loop's whole extent: itself, or
        past the tile's first iteration where a causal loop starts per tile (ragged.causal_first) or
        the loop is split over the grid (splits.split_first)."""
        if self.causal.starts:
            return f"(causal_first(args, tile) + {it})"
        return f"({splits.first(self.m)}{it})"

    def loop_count(self) -> str:
        """The loop's iterations over its whole extent: n, or args.iters where n is per tile (causal)."""
        return "args.iters" if self.causal.masks else "n"

    def _extent(self, t, dim: int) -> str:
        axis, size, label = t.axes[dim], t.tile[dim], DIM_LABELS[dim]
        if axis in partial.GRID_AXES:  # the caller's extent (a partial last tile), else whole tiles
            step = f"args.{t.name}_{label}_step"
            return f"static_cast<int>({partial.extent(axis, f'args.tiles_{axis}', step, prefix='args.')})"
        return {"loop": f"{self.loop_count()} * {size}"}.get(axis, str(size))

    def _clipped(self, t) -> list[int]:
        """The dimensions of t along which its last tile may be partial (partial.py)."""
        return [d for d, _ in t.placed_dims() if self.partial.get(t.axes[d]) == ""]

    def read_input(self, out: Lines, frag: str, t, row0: str, cols_vector: bool = False) -> None:
        """Input tensor t's tile into fragment `frag` (a register input of the loop, an epilogue's
        operand), each thread its elements from global memory; where the last tile along a grid axis
        may be partial, an element past the caller's extent reads 0 in a tile, the last element inside
        in a row vector (global_to_frag_clip; never written: partial.py)."""
        rows, cols, batch = self._origin(t, "0")
        ncols = self._extent(t, 1)
        nrows = "1" if t.rank == 1 else self._extent(t, 0)
        base = f"args.{t.name} + static_cast<size_t>({batch}) * {nrows} * {ncols}"
        if self._clipped(t):
            left = f"{ncols} - ({cols})" if t.rank == 1 else f"{nrows} - ({rows})"
            out(f"twill::global_to_frag_clip({frag}, {base} + static_cast<size_t>({rows}) * {ncols} + {cols}, {row0}, "
                f"{ncols}, {left}, {ncols} - ({cols}));")
        elif cols_vector:
            out(f"twill::global_to_frag({frag}, {base} + {cols}, 0, 0, 0);")
        else:
            out(f"twill::global_to_frag({frag}, {base} + static_cast<size_t>({rows}) * {ncols} + {cols}, "
                f"{row0}, 0, {ncols});")

    def _stores(self, out: Lines) -> None:
        tensors = [t for t in self.m.tensors if t.kind in ("output", "store")]
        if not tensors:
            return
        out("// ---- tiles to global memory (row-major [batch][rows][cols]) --------------------------------")
        for t in tensors:
            out("template <typename F>",
                f"__device__ __forceinline__ void store_{t.name}(Smem& sm, const Maps& tm, const Args& args, "
                f"const twill::TileIdx& tile, const F& f, int it, int row0, int n) {{",
                "  (void)sm;",
                "  (void)tm;",
                "  (void)it;",
                "  (void)n;")
            # CTAs along a grid axis the tile does not follow all write it: they add into it
            shared = t.kind == "store" and not self.grid_axes() <= set(t.axes)
            if shared and t.dtype != "f32":
                raise EmitError(f"store '{t.value}': several CTAs add into its tile; emit-cuda adds f32 tiles only")
            out.depth += 1
            out(*splits.store_lines(self.m, t))
            if t.name in self.p.staging:
                self._tma_store(out, t, self.p.staging[t.name], shared)
            else:
                self._direct_store(out, t, shared)
            out.depth -= 1
            out("}")
            out("")

    def _direct_store(self, out: Lines, t, shared: bool) -> None:
        """Each thread writes its elements (a float2 atomicAdd where CTAs add into the tile)."""
        if splits.along_columns(self.m, t) and (t.rank == 1 or t.column_major):
            raise EmitError(f"store '{t.value}': a column split (colsplit.py) writes a store along the loop without TMA "
                            "only as a row-major tile")
        rows, cols, batch = self._origin(t, "it")
        nrows = "1" if t.rank == 1 else self._extent(t, 0)
        # a column split's store along the loop (colsplit.py): its rows are every split's columns, which this
        # split's n * tile is not (splits.whole_columns), and it writes its own columns at the whole-extent index
        ncols = splits.whole_columns(t) if splits.along_columns(self.m, t) else self._extent(t, 1)
        out(f"const size_t batch = static_cast<size_t>({batch}) * {nrows} * {ncols};")
        clipped = self._clipped(t)
        if t.rank == 1:  # the column origin as one offset: no tile-invariant part of it is kept across tiles
            if clipped:  # the vector's elements past the caller's extent are not written
                out(f"const int c0 = {cols};",
                    f"twill::frag_to_buffer_clip(args.{t.name} + batch + static_cast<size_t>(c0), f, row0, "
                    f"{ncols} - c0);")
            else:
                out(f"twill::frag_to_buffer(args.{t.name} + batch + static_cast<size_t>({cols}), f, row0, 0);")
            return
        if t.column_major:
            self._transposed_store(out, t, shared, clipped, rows, cols, nrows, ncols)
            return
        call = "frag_add_global" if shared else "frag_to_global"  # shared: CTAs add into the tile (zeroed first)
        if not clipped:
            out(f"twill::{call}(args.{t.name} + batch + static_cast<size_t>({rows}) * {ncols}, f, row0, "
                f"{cols}, {ncols});")
            return
        # a partial last tile along a grid axis: whole tiles store as above, the last one element by element
        out(f"const int r0 = {rows}, c0 = {cols}, ld = {ncols}, rows_left = {nrows} - r0;",
            f"{ctype(t.dtype)}* dst = args.{t.name} + batch + static_cast<size_t>(r0) * ld;")
        with out.block(f"if (rows_left >= {t.tile[0]} && c0 + {t.tile[1]} <= ld)"):
            out(f"twill::{call}(dst, f, row0, c0, ld);")
        with out.block("else"):
            out(f"twill::{call}_clip(dst, f, row0, c0, ld, rows_left, ld);")

    def _transposed_store(self, out: Lines, t, shared: bool, clipped, rows: str, cols: str, nrows: str,
                          ncols: str) -> None:
        """A carry's `{column_major = true}` output (tensors._transposed): t is the argument's layout,
        [cols of the value][rows of the value] row-major, its tile origin (rows, cols) the value's tile
        (cols, rows); element (r, c) of the fragment goes to dst[c * ld + r], dst the tile's origin
        and ld the argument's row pitch (the value's row extent): frag_to_global_t."""
        if shared:
            raise EmitError(f"output '{t.value}' is written transposed ({{column_major = true}}), which emit-cuda does "
                            "for a tile one CTA writes only")
        out(f"{ctype(t.dtype)}* dst = args.{t.name} + batch + static_cast<size_t>({rows}) * {ncols} + {cols};")
        if not clipped:
            out(f"twill::frag_to_global_t(dst, f, row0, {ncols});")
            return
        # a partial last tile along a grid axis: the value's rows left are the argument's columns left
        out(f"const int rows_left = {ncols} - ({cols}), cols_left = {nrows} - ({rows});")
        with out.block(f"if (rows_left >= {t.tile[1]} && cols_left >= {t.tile[0]})"):
            out(f"twill::frag_to_global_t(dst, f, row0, {ncols});")
        with out.block("else"):
            out(f"twill::frag_to_global_t_clip(dst, f, row0, {ncols}, rows_left, cols_left);")

    def _tma_store(self, out: Lines, t, st, shared: bool) -> None:
        """The warpgroup writes the tile into shared memory (the swizzled layout of Tile), and one
        thread stores it with TMA, a 128-byte column block per instruction; before the staging is
        written again, that thread waits until TMA has read it (bulk_wait_read), and a named
        barrier of the role's 128 threads orders the two sides."""
        rows, cols, batch = self._origin(t, "it")
        T, R, C = ctype(t.dtype), t.tile[0], t.tile[1]
        width = C // st.blocks
        bar = f"twill::named_sync({self.role_bar(self.m.role[st.role])}, 128);"
        buf = self.staging(t.name)
        issue = "twill::tma_reduce_add" if shared else "twill::tma_store"
        out("(void)args;",
            "(void)row0;  // one warpgroup holds the whole tile",
            f"const int r0 = {rows}, c0 = {cols}, b = {batch};",
            "const bool leader = threadIdx.x % 128 == 0;  // issues the warpgroup's TMA stores")
        if st.slots == st.blocks:
            out("if (leader) twill::bulk_wait_read<0>();  // TMA has read the last tile stored from here", bar,
                f"twill::frag_to_tile<{T}, {R}, {C}>({buf}[0], f, 0);",
                "twill::fence_async_smem();  // visible to TMA", bar)
            with out.block("if (leader)"):
                out("#pragma unroll")
                out(f"for (int cb = 0; cb < {st.blocks}; ++cb) {issue}(tm.{t.name}, {buf}[cb], "
                    f"c0 + cb * {width}, r0, b);")
                out("twill::bulk_commit();")
            return
        for cb in range(st.blocks):
            slot = cb % st.slots
            out(f"if (leader) twill::bulk_wait_read<{st.slots - 1}>();  // TMA has read slot {slot}", bar,
                f"twill::frag_to_tile_blocks<{T}, {R}, {C}, {cb}, 1>({buf}[{slot}], f, 0);",
                "twill::fence_async_smem();", bar,
                f"if (leader) {{ {issue}(tm.{t.name}, {buf}[{slot}], c0 + {cb * width}, r0, b); "
                f"twill::bulk_commit(); }}")

    def grid_axes(self) -> set[str]:
        return {a for t in self.m.tensors for a in t.axes if a in ("m", "n")}
