"""Program ids the graph does not represent (twill/ttgir/grid.py, docs/ttgir-import.md section 2,
"Program ids"): a loop whose range moves with a program id, a store offset by a program id no load
reads. Each is an error at its line; each near miss imports. (Split-KV's real dumps: test_heldout3.py.)"""
from __future__ import annotations

import pytest

from twill.errors import InputError
from twill.ttgir import import_ttgir

T = "tensor<64x64xf32, #blocked>"
T16 = "tensor<64x64xf16, #blocked>"
PTRS = "tensor<64x64x!tt.ptr<f16>, #blocked>"


def _kernel(lo: str = "%c0", hi: str = "%n", load_off: str = "%by", store_off: str = "%by", extra: str = "") -> str:
    """A one-loop GEMM-like kernel: X read at X + load_off, the result stored at O + store_off."""
    return f"""#blocked = #ttg.blocked<{{sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}}>
module attributes {{"ttg.num-warps" = 4 : i32}} {{
  tt.func public @k(%X: !tt.ptr<f16>, %O: !tt.ptr<f16>, %n: i32) {{
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %zero = arith.constant dense<0.000000e+00> : {T}
    %px = tt.get_program_id x : i32
    %py = tt.get_program_id y : i32
    %pz = tt.get_program_id z : i32
    %by = arith.muli %py, %n : i32
    %bz = arith.muli %pz, %n : i32
    %byz = arith.addi %by, %bz : i32
    %lo_z = arith.muli %pz, %n : i32
    %hi_z = arith.addi %lo_z, %n : i32
    %hi_y = arith.muli %py, %c64 : i32
    %ny = tt.get_num_programs y : i32
    %sz = arith.muli %pz, %ny : i32
    %szy = arith.addi %sz, %py : i32
    %split_off = arith.muli %szy, %n : i32
{extra}
    %xb = tt.addptr %X, {load_off} : !tt.ptr<f16>, i32
    %xp = tt.splat %xb : !tt.ptr<f16> -> {PTRS}
    %w = tt.load %xp : {PTRS}
    %r:1 = scf.for %i = {lo} to {hi} step %c64 iter_args(%acc = %zero) -> ({T}) : i32 {{
      %x = tt.load %xp : {PTRS}
      %d = tt.dot %x, %w, %acc : {T16} * {T16} -> {T}
      scf.yield %d : {T}
    }}
    %h = arith.truncf %r#0 : {T} to {T16}
    %ob = tt.addptr %O, {store_off} : !tt.ptr<f16>, i32
    %op = tt.splat %ob : !tt.ptr<f16> -> {PTRS}
    tt.store %op, %h : {PTRS}
    tt.return
  }}
}}
"""


def _line(text: str, needle: str) -> int:
    return next(k for k, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_a_loop_over_a_fixed_range_and_stores_the_loads_place_import():
    g, _ = import_ttgir(_kernel(), "k.ttgir")
    assert "mma" in [op.opcode for op in g.ops]
    import_ttgir(_kernel(load_off="%byz", store_off="%byz"), "k.ttgir")  # program id z read by the load too


@pytest.mark.parametrize("lo, hi, said", [
    ("%lo_z", "%n", ["lower bound %lo_z depends on program_id(2)",
                     "no split of the loop over the grid: its upper bound is not the lower bound plus n"]),
    ("%c0", "%hi_y", ["upper bound %hi_y depends on program_id(1)", "lower bound is not program_id(1) * ARG"]),
    ("%hi_y", "%hi_z", ["lower bound %hi_y depends on program_id(1)", "its bounds read 2 program ids"]),
])
def test_a_loop_whose_range_moves_with_a_program_id_is_an_error_at_the_loop(lo, hi, said):
    text = _kernel(lo=lo, hi=hi)
    for loop in (None, 0):
        with pytest.raises(InputError) as err:
            import_ttgir(text, "k.ttgir", loop=loop)
        (d,) = err.value.diagnostics
        assert d.span.line == _line(text, "scf.for") and d.severity == "error"
        assert "runs over a range that moves with the program id" in d.message
        assert all(s in d.message for s in said), d.message


def test_a_store_offset_by_a_program_id_no_load_reads_is_an_error_at_the_store():
    text = _kernel(store_off="%byz")  # the loads read program id y only
    with pytest.raises(InputError) as err:
        import_ttgir(text, "k.ttgir")
    (d,) = err.value.diagnostics
    assert d.span.line == _line(text, "tt.store") and "offset by program_id(2), which no load" in d.message
    # a program id the kernel computes with but no address reads: not refused
    import_ttgir(_kernel(extra="    %unused = arith.addi %pz, %c0 : i32"), "k.ttgir")


def test_a_split_of_the_loop_over_a_program_id_imports_as_a_grid_split():
    """range(pz * n, pz * n + n, 64) with the output at (pz * num_programs(y) + py) * n: split-KV's form
    (splits.py), the graph's `grid split = n`; the same loop with a store that does not read the
    split (every split would write one place) is an error at the store."""
    g, _ = import_ttgir(_kernel(lo="%lo_z", hi="%hi_z", store_off="%split_off"), "k.ttgir")
    assert g.split == "n"
    text = _kernel(lo="%lo_z", hi="%hi_z")
    with pytest.raises(InputError) as err:
        import_ttgir(text, "k.ttgir")
    (d,) = err.value.diagnostics
    assert d.span.line == _line(text, "tt.store") and "does not read program_id(2)" in d.message
    text = _kernel(lo="%lo_z", hi="%hi_z", store_off="%split_off", load_off="%bz")  # the load reads the split
    with pytest.raises(InputError) as err:
        import_ttgir(text, "k.ttgir")
    assert [d.span.line for d in err.value.diagnostics] == [_line(text, "%w = tt.load"), _line(text, "%x = tt.load")]
    assert all("which splits the loop" in d.message for d in err.value.diagnostics)


def test_both_are_reported_together():
    text = _kernel(lo="%lo_z", hi="%n", store_off="%byz")
    with pytest.raises(InputError) as err:
        import_ttgir(text, "k.ttgir")
    assert [d.span.line for d in err.value.diagnostics] == [_line(text, "scf.for"), _line(text, "tt.store")]
