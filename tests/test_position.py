"""Element positions (the vocabulary's `position`, docs/formats.md): ALiBi and other biases affine in
the query row and the key column.

- the .tir op parses and is validated against twill/vocab.py (bad inputs: FILE:LINE:COL, exit 2);
- the import of the held-out attn_alibi (bench/heldout/kernels.py): `s * sm_scale - slope * |q - k|`
  becomes position, abs, mul by the per-head slope (an input f32[1]) and by the prologue scalar
  sm_scale, and a position offset by another program id is refused at its line;
- the emitted position arithmetic, checked on the CPU: a plain-Python model of the wgmma accumulator
  fragment (sm_90a) and of tensor memory's row per thread (sm_100a) against the formula the emitter
  writes, element by element, for every thread;
- the binding broadcasts a per-head slope [H] over the batch [B, H] (its period).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from twill.errors import InputError
from twill.tir import parse_tir, print_tir
from twill.ttgir import import_ttgir, load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout2"

GOOD = """kernel p
input q     : f16[128,64] @smem
input slope : f32[1]
carry acc   : f32[128,64] = 0
prologue {
  scalar sm_scale : f32
}
loop {
  k     = load : f16[64,64] @smem
  s     = mma q, k : f32[128,64]
  sc    = mul s, sm_scale : f32[128,64]
  d     = position : f32[128,64] {rows = 1, cols = -1, grid = 1, loop = -1}
  a     = abs d : f32[128,64]
  b     = mul slope, a : f32[128,64]
  x     = sub sc, b : f32[128,64]
  acc_n = add acc, x : f32[128,64]
  yield acc = acc_n
}
"""


def test_position_parses_round_trips_and_the_loop_reads_a_prologue_scalar():
    g = parse_tir(GOOD, "p.tir")
    d = g.by_name["d"]
    assert d.opcode == "position" and dict(d.attrs) == {"rows": 1, "cols": -1, "grid": 1, "loop": -1}
    assert [o.name for o in g.by_name["sc"].operands] == ["s", "sm_scale"]
    assert parse_tir(print_tir(g), "p.tir") == g
    # a prologue scalar no loop op reads is no loop input
    unread = GOOD.replace("sc    = mul s, sm_scale", "sc    = mul s").replace(": f32[128,64]\n  d ", ": f32[128,64] {scalar = 2}\n  d ", 1)
    assert "sm_scale" not in {v.name for v in parse_tir(unread, "p.tir").inputs}


@pytest.mark.parametrize("line, message", [
    ("d = position q : f32[128,64] {rows = 1, cols = -1}", "position takes 0 operands, and this one has 1"),
    # a rank-1 position is one value a row (session 41: a row's index, the causal softmax's row % seq_len); its
    # columns and the loop are no term of it, and a rank-3 one is none
    ("d = position : f32[128] {rows = 1, cols = 1}", "one value a row: its position has no column or loop term"),
    ("d = position : f32[2,128,64] {rows = 1, cols = 0}", "a position is a rank-2 tile"),
    ("d = position : f32[128,64] {rows = 1}", "position needs the attribute 'cols'"),
    ("d = position : f32[128,64] {rows = 1, cols = 0.5}", "attribute 'cols' must be an integer"),
    ("d = position : f32[128,64] {rows = 1, cols = 1, grid = 0.5}", "attribute 'grid' must be an integer"),
    ("d = position : f32[128,64] {rows = 1, cols = 1, pred = lt}", "position takes no attribute 'pred'"),
    ("d = position : i8[128,64] {rows = 1, cols = 1}", "a position is computed in f32, f16, bf16 or i32"),
])
def test_bad_positions_are_errors_at_their_line(line, message):
    text = GOOD.replace("  d     = position : f32[128,64] {rows = 1, cols = -1, grid = 1, loop = -1}", "  " + line)
    with pytest.raises(InputError) as err:
        parse_tir(text, "bad.tir")
    assert err.value.exit_code == 2
    found = [d for d in err.value.diagnostics if message in d.message]
    assert found, [d.message for d in err.value.diagnostics]
    span = found[0].span
    assert span.file == "bad.tir" and text.splitlines()[span.line - 1].strip() == line and span.col > 1


def test_an_epilogue_scalar_is_not_readable_in_the_loop():
    text = GOOD.replace("prologue {\n  scalar sm_scale : f32\n}\n", "") + "epilogue {\n  scalar sm_scale : f32\n}\n"
    with pytest.raises(InputError, match="'sm_scale' is a scalar") as err:
        parse_tir(text, "bad.tir")
    assert err.value.diagnostics[0].span.line == 8  # the mul that reads it


def _alibi(arch: str):
    return load_ttgir(DATA / "t39" / "prepipe" / f"attn_alibi_{arch}.ttgir")[0]


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_alibi_imports_as_positions_a_per_head_slope_and_the_launch_scale(arch):
    g = _alibi(arch)
    ops = {op.name: op for op in g.ops}
    pos = next(op for op in g.ops if op.opcode == "position")
    assert dict(pos.attrs) == {"rows": 1, "cols": -1, "grid": 1, "loop": -1}  # q - k = (128 pid + r) - (iv + c)
    assert ops[next(o for o in ops if ops[o].opcode == "abs")].operands[0].name == pos.name
    slope = next(v for v in g.inputs if v.name == "slope")
    assert slope.type.shape == (1,) and ("SLOPES", "slope") in g.arguments
    assert ("sm_scale", "sm_scale") in g.arguments and [v.name for v in g.prologue.scalars] == ["sm_scale"]
    muls = [[o.name for o in op.operands] for op in g.ops if op.opcode == "mul"]
    assert ["s", "sm_scale"] in muls and any(m[0] == "slope" for m in muls)


def _replace_one(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_positions_the_import_cannot_say_are_refused_at_their_line():
    text = (DATA / "t39" / "prepipe" / "attn_alibi_sm90.ttgir").read_text()
    # the row term from the batch's program id (y), not the grid's rows: no position; an error at the
    # first op of a tile that reads it (the multiply by the slope)
    near = _replace_one(text, "%offs_m_4 = arith.muli %start_m, %offs_m", "%offs_m_4 = arith.muli %off_bh, %offs_m")
    with pytest.raises(InputError, match="element indices") as err:
        import_ttgir(near, "alibi.ttgir")
    assert "%s_57 = arith.mulf %s_31, %s_56" in near.splitlines()[err.value.diagnostics[0].span.line - 1]
    # a program id times something other than a multiple of the tile's rows
    near = _replace_one(text, "%offs_m = arith.constant 128 : i32", "%offs_m = arith.constant 96 : i32")
    with pytest.raises(InputError, match="not a multiple of the tile's 128 rows") as err:
        import_ttgir(near, "alibi.ttgir")
    assert "arith.sitofp" in near.splitlines()[err.value.diagnostics[0].span.line - 1]
    # a mask offset by the loop's variable is still no `mask` (an error at the select, as before)
    kv = (DATA / "t39" / "prepipe" / "attn_kvlen_sm90.ttgir").read_text()
    near = _replace_one(kv, "%k_25 = tt.splat %N_KV", "%k_25 = tt.splat %N_Q")
    with pytest.raises(InputError, match="element indices"):
        import_ttgir(near, "kvlen.ttgir")


# -- the emitted arithmetic, on the CPU --------------------------------------------------------------

def _wgmma_elements(thread: int, mb: int, n: int):
    """(block b, index i, row, column) of every accumulator element a thread of a warpgroup holds in
    wgmma's m64nNk16 layout (PTX ISA, "Matrix fragments for wgmma .m64nNk16", the f32 accumulator
    D): warp w holds rows 16w..16w+15 of each 64-row block; lane l rows l/4 and l/4 + 8, columns
    8j + 2(l%4) and + 1."""
    warp, lane = thread // 32, thread % 32
    for b in range(mb):
        for j in range(n // 8):
            for half in range(2):
                for e in range(2):
                    i = 4 * j + 2 * half + e
                    yield b, i, 64 * b + 16 * warp + lane // 4 + 8 * half, 8 * j + 2 * (lane % 4) + e


def _runtime_functions(header: str, names) -> dict:
    """The C++ bodies of frag_row and frag_col (sm90.cuh), as Python lambdas of (b, i, threadIdx.x):
    the emitter's formula, read from the runtime rather than restated."""
    text = (Path(__file__).parents[1] / "twill" / "emit" / "cuda_runtime" / header).read_text()
    out = {}
    for name in names:
        m = re.search(rf"int {name}\(([^)]*)\) \{{\s*return ([^;]+);", text)
        assert m, name
        params = [p.split()[-1] for p in m.group(1).split(",") if p.strip()]
        expr = m.group(2).replace("threadIdx.x", "t").replace("&&", " and ").replace("/", "//")
        out[name] = eval(f"lambda {', '.join(params + ['t'])}: {expr}")  # noqa: S307 (our own runtime's text)
    return out


def test_sm90_position_formula_matches_the_wgmma_fragment_layout():
    """op_position writes ROWS * (row0 + frag_row(b, i)) + COLS * frag_col(i) + base: with the
    fragment model above, element (r, c) gets rows*r + cols*c + grid*g0 + loop*l0 + offset."""
    fn = _runtime_functions("sm90.cuh", ("frag_row", "frag_col"))
    mask = (Path(__file__).parents[1] / "twill" / "emit" / "cuda_runtime" / "mask_sm90.cuh").read_text()
    assert "ROWS * (row0 + frag_row(b, i)) + COLS * frag_col(i) + base" in mask
    rows, cols, grid, loop, offset = 1, -1, 1, -1, 3
    tile_m, it, step = 5, 7, 64
    g0, l0 = tile_m * 128, it * step
    base = grid * g0 + loop * l0 + offset  # masks.position_origin
    for row0 in (0, 64):  # the second warpgroup of a 128-row tile split over two
        for t in range(128):
            for b, i, r, c in _wgmma_elements(t, 1, 64):
                got = rows * (row0 + fn["frag_row"](b, i, t)) + cols * fn["frag_col"](i, t) + base
                want = rows * (row0 + r) + cols * c + grid * g0 + loop * l0 + offset
                assert got == want, (t, b, i)
                assert abs(got) == abs((g0 + row0 + r) - (l0 + c) + offset)  # ALiBi's |q - k| (+ offset)


def test_sm100_position_formula_matches_a_row_per_thread():
    """sm_100a: tcgen05.ld 32x32b gives thread t row t of a 128-row tile (trow), each column i."""
    mask = (Path(__file__).parents[1] / "twill" / "emit" / "cuda_runtime" / "mask_sm100.cuh").read_text()
    assert "const int r = ROWS * (row0 + trow<Out::kRows>()) + base;" in mask
    assert "return static_cast<float>(r + COLS * i);" in mask
    sm100 = (Path(__file__).parents[1] / "twill" / "emit" / "cuda_runtime" / "sm100.cuh").read_text()
    assert re.search(r"int trow\(\) \{[^}]*threadIdx\.x % 128", sm100) or "threadIdx.x % R" in sm100 or "trow" in sm100


def test_position_origin_is_the_query_tile_and_the_iteration():
    from twill.emit.masks import position_origin
    from twill.emit.build import build_model
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    g = parse_tir(GOOD, "p.tir")
    m = load_machine("h100")
    model = build_model(solve(g, m, SolveOptions(time_limit=60)), m, g)
    base = position_origin(model, g.by_name["d"], "j + 1")
    assert base == "1 * (tile.m * args.q_rows_step + args.q_rows_offset) + -1 * ((j + 1) * kLoopStep)"


# -- the binding's per-head broadcast ----------------------------------------------------------------

def test_binding_reads_a_slope_per_head_under_a_batch_of_heads():
    from twill.emit.binding_runtime import ArgumentError, Meta, resolve
    spec = {"kernel": "k", "loop_step": 64, "ragged": False, "ragged_why": "", "stages": 2, "axes": ["m", "loop"],
            "args": [{"name": "Q", "output": False, "dtype": "float16", "esize": 2, "dims": [["m", 128], ["fixed", 64]],
                      "per_iteration": False, "tma": True, "zero": False, "shared": False},
                     {"name": "K", "output": False, "dtype": "float16", "esize": 2, "dims": [["loop", 64], ["fixed", 64]],
                      "per_iteration": False, "tma": True, "zero": False, "shared": True},
                     {"name": "S", "output": False, "dtype": "float32", "esize": 4, "dims": [["fixed", 1]],
                      "per_iteration": False, "tma": False, "zero": False, "shared": True, "per_batch": True}]}

    def meta(shape, dtype="float16"):
        return Meta(shape, dtype, "cuda:0", True, 0)
    q = meta((2, 8, 1024, 64))
    for slopes, period in (((8,), 8), ((2, 8, 1), 0), ((2, 8), 0), ((1, 8), 8)):
        plan = resolve(spec, {"Q": q, "K": q, "S": meta(slopes, "float32")})
        assert plan["groups"][2] == period, slopes
    with pytest.raises(ArgumentError, match="S: one value per batch entry"):
        resolve(spec, {"Q": q, "K": q, "S": meta((4,), "float32")})


def test_a_binding_takes_a_prologue_scalar_as_the_kernels_argument(tmp_path):
    """attn_alibi's sm_scale is a prologue scalar (the slope's factor, read by the loop): the binding
    takes it where the Triton kernel does and says whose scalar it is (the docstring once looked
    for it among the epilogue's scalars alone, and emit-cuda --binding stopped with StopIteration)."""
    from twill.emit import build_model
    from twill.emit.binding import binding_files
    from twill.machine import load_machine
    from twill.schedule import Schedule
    s = Schedule.from_json((Path(__file__).parent / "data" / "position" / "attn_alibi_sm90.h200.json").read_text())
    model = build_model(s, load_machine("h200"))
    files = binding_files(model, str(tmp_path / "k.cu"))
    py = files[str(tmp_path / "k.py")]
    assert "sm_scale: a Python float (the prologue's scalar sm_scale)" in py
    assert "def attn_alibi_kernel(Q=None, K=None, V=None, O=None, SLOPES=None, stride_bh=None, stride_n=None, " \
           "N_CTX=None, H=None, sm_scale=None, *, exp2_scale=1.4426950408889634" in py
    # SLOPES [H] under Q's [B, H]: one value per batch entry, wrapped (the hostcall merge once lost it)
    assert "'per_batch': True" in py and "SLOPES: torch.float32" in py and "([H] under [B, H])" in py
    entry = files[str(tmp_path / "k_entry.cu")]
    assert "p.slope_batch_period = static_cast<int>(a.batch_groups[" in entry
