"""A tile loaded with `{fill = -inf}` (Triton's `other=-inf`) that a rowmax or an exp2 reads straight from shared
memory, its conversion to f32 fused into the reader (emit/ragged.py `_filled_read`): the held-out kernels whose rows
users run at lengths that are no multiple of 128 (softmax(x / T) of batch 11 at its default 3000 columns, GPT-2's
50257, the tutorial's 781; batch 10's kl_logits; the 2-D blocks' rows_softmax).

TMA fills the columns of a partial last tile with 0, not the kernel's -inf, so until session 40 each such loop took
whole tiles only, and the binding refused every ragged call. Each reader copies the tile into registers before it
computes (ops._registers); on the partial last tile alone (the role's kTail instance) that copy is masked to -inf
past the loop's extent (`twill::mask_past` of a 16-bit fragment on sm_90a, `mask_tail` of a thread's 16-bit row on
sm_100a):

- the ragged plan masks each reader (L0's rowmax, L1's exp2) and refuses nothing; L2's exp2 reaches a clipped store
  only and needs no mask; every loop's binding resolves 4096 x 3000, 1000 x 781 and 4096 x 50257;
- the emitted kernel masks the reader's copy between its read from shared memory and its math, and its whole-tile
  instance (kernel<..., false>) is the code emitted before, line for line;
- it compiles with nvcc for sm_90a and sm_100a with no spill;
- a filled load read by rowmax and by another op is still refused, naming the other op.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc
from twill.emit import build_model, emitted
from twill.emit.binding import binding_files
from twill.emit import runtime
from twill.emit.cuda import render
from twill.emit.ragged import Ragged, plan
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.sequence import Sequence
from twill.ttgir.sequence import import_sequence

TTGIR = Path(__file__).parent / "data" / "ttgir"
ARCH = {"h200": "sm90", "b200": "sm100"}


def _loops(dump: str, gpu: str, text: str | None = None):
    """[(loop name, solved schedule, model)] of the t36 prepipe dump `dump` (a path under tests/data/ttgir, with
    {arch}) solved for `gpu`."""
    machine = load_machine(gpu)
    path = TTGIR / dump.format(arch=ARCH[gpu])
    found, _ = import_sequence(path.read_text() if text is None else text, str(path))
    graphs, names = (found.graphs, found.names) if isinstance(found, Sequence) else ((found,), ("L0",))
    out = []
    for graph, name in zip(graphs, names):
        schedule = solve(graph, machine, SolveOptions(time_limit=20))
        out.append((name, schedule, build_model(schedule, machine)))
    return out


def _binding(model, directory: Path, stem: str):
    for path, body in binding_files(model, str(directory / f"{stem}.cu")).items():
        Path(path).write_text(body)
    spec = importlib.util.spec_from_file_location(stem, directory / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SOFTMAX_TEMP = "heldout11/t36/prepipe/softmax_temp_{arch}.ttgir"


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_softmax_temp_binds_ragged_rows(tmp_path, gpu):
    """Each loop masks the readers of its -inf fill (L0's rowmax, L1's exp2; L2's exp2 feeds a clipped store alone),
    and its binding takes X [M, N] at N = 3000 (the kernel's default: 23 tiles and 56 columns), 781 (f16 rows of
    1562 bytes, staged into rows of 784) and 50257 (GPT-2's vocabulary, rows of 50264), and at whole tiles."""
    masks = {"L0": [("z_new", "x", 1)], "L1": [("num", "x", 1)], "L2": []}
    rows = {"L1": ("z",), "L2": ("z", "y")}  # the row statistics each loop reads back
    for loop, _, model in _loops(SOFTMAX_TEMP, gpu):
        ragged = plan(model)
        assert ragged.why_not == "" and list(ragged.masks) == masks[loop], (loop, ragged)
        mod = _binding(model, tmp_path, f"st_{gpu}_{loop}")
        assert mod.SPEC["ragged"] and mod.SPEC["ragged_why"] == "", loop
        M = mod.Meta
        for m, n in ((4096, 3000), (1000, 781), (4096, 50257), (4096, 3072)):
            given = {a["name"]: None for a in mod.SPEC["args"] if a["output"]}
            given["X"] = M((m, n), "float16", "cuda:0", True, 0)
            given.update({r: M((m,), "float32", "cuda:0", True, 0) for r in rows.get(loop, ())})
            got = mod.resolve(mod.SPEC, given)
            tile_m, tile_n = (128, 64) if gpu == "b200" else (64, 128)  # rowprog.TILES: sm_100 dumps' 128 x 64 tiles
            assert (got["loop_extent"], got["iters"], got["tiles_m"]) == (n, -(-n // tile_n), -(-m // tile_m)), (loop, n)
            pitch = -(-n // 8) * 8  # an f16 row's elements rounded up to 16 bytes
            layout = got["layouts"][[a["name"] for a in mod.SPEC["args"]].index("X")]
            assert (layout[0] == "stage") == (pitch != n), (loop, n, layout)


def _unmasked(text: str, target) -> list[str]:
    """The emitted kernel's lines but those that a kernel with masks has and one without has not (its kTail lines,
    its constants that say it masks, the masks' runtime part)."""
    text = text.replace(runtime.tail16_part(target).lstrip("\n"), "")
    if not target.register_fragments:  # (sm_100a's masks of a thread's row: with any mask)
        text = text.replace(runtime.tail_part(target).lstrip("\n"), "")
    out = []
    for line in text.splitlines():
        if re.search(r"if constexpr \(kTail\) if|^template <bool kTail>  // the loop's last tile is partial|"
                     r"constexpr bool (kRagged|kMasks) = ", line.strip()):
            continue
        out.append(line.replace("<kTail>(", "("))
    return [line for line in out if line.strip()]  # (the part's place leaves a blank line)


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_the_reader_masks_its_copy_and_whole_tiles_keep_their_code(gpu):
    """The rowmax's copy of x is masked between its read from shared memory and its math, in the kTail instance on
    the loop's last iteration only; with those lines taken out, the kernel is the one emitted where the loop took
    whole tiles only (the plan before session 40), line for line."""
    fn = "mask_past<1>" if gpu == "h200" else "mask_tail<1>"
    machine = load_machine(gpu)
    for loop, schedule, _ in _loops(SOFTMAX_TEMP, gpu)[:2]:
        model, text = emitted(schedule, machine)  # (the loop split by columns, as emit-cuda writes it)
        reader = "z_new" if loop == "L0" else "num"
        lines = text.splitlines()
        at = [i for i, line in enumerate(lines) if f"twill::{fn}({reader}_arg0, 0, twill_loop_tail" in line]
        assert at, loop
        for i in at:
            assert lines[i].strip().startswith("if constexpr (kTail) if (")
            shape = "128, 64" if gpu == "b200" else "64, 128"  # rowprog.TILES
            assert re.search(rf"twill::tile_to_frag<__half, {shape}>\({reader}_arg0, sm\.ld_x\[", lines[i - 1]), loop
            assert re.search(rf"twill::op_(rowmax|exp2)\(\S+, {reader}_arg0", lines[i + 1]), (loop, lines[i + 1])
        before = Ragged(model.ragged.step, (), "whole tiles only")
        model.__dict__["ragged"] = before  # the cached plan, as it was: the filled load refused
        old = render(model)
        assert "kRagged = false" in old and "kTail) if" not in old
        assert _unmasked(text, model.target) == _unmasked(old, model.target), loop


def test_every_held_out_fill_read_from_shared_memory_is_masked():
    """The other held-out loops whose -inf fill a rowmax or an exp2 read from shared memory: kl_logits' two row maxes
    and two sums of exp (P and Q each), rows_softmax's max and sum (f16 [64, 64] tiles): each reader masked, no
    refusal; kl_logits' L2 reads its fill through subtractions into its tail_mask, as before."""
    want = {("heldout10/t36/prepipe/kl_logits_{arch}.ttgir", "L0"): {("p_10_new", "p_load"), ("q_17_new", "q_load")},
            ("heldout10/t36/prepipe/kl_logits_{arch}.ttgir", "L1"): {("logp_exp2", "p_load"), ("logq_exp2", "q_load")},
            ("heldout10/t36/prepipe/kl_logits_{arch}.ttgir", "L2"): set(),
            ("blocks2d/t36/prepipe/rows_softmax_{arch}.ttgir", "L0"): {("e_new", "x")},
            ("blocks2d/t36/prepipe/rows_softmax_{arch}.ttgir", "L1"): {("e_exp2", "x")},
            ("blocks2d/t36/prepipe/rows_softmax_{arch}.ttgir", "L2"): set()}
    for dump in sorted({d for d, _ in want}):
        for loop, _, model in _loops(dump, "h200"):
            ragged = plan(model)
            assert ragged.why_not == "", (dump, loop, ragged.why_not)
            assert {(op, value) for op, value, _ in ragged.masks} == want[dump, loop], (dump, loop)


def test_a_fill_read_by_another_op_too_is_still_refused():
    """L0 of softmax_temp with x also summed (`rowsum x`: the zero fill is the sum's identity, but the kernel's
    fill is -inf, whose sum is not the row's): whole tiles only, naming the reader."""
    path = TTGIR / SOFTMAX_TEMP.format(arch="sm90")
    from twill.tir import parse_tir, print_tir
    (_, _, model), *_ = _loops(SOFTMAX_TEMP, "h200")
    text = print_tir(model.graph)
    extra = text.replace("  yield z = z_new", "  s_new = rowsum x, s : f32[64]\n  yield z = z_new, s = s_new")
    extra = extra.replace("carry z : f32[64] = -inf", "carry z : f32[64] = -inf\ncarry s : f32[64] = 0")
    assert extra.count("s_new") == 2, text
    machine = load_machine("h200")
    graph = parse_tir(extra, str(path))
    ragged = plan(build_model(solve(graph, machine, SolveOptions(time_limit=20)), machine))
    assert "whole tiles only" in ragged.why_not and "read by other than rowmax and exp2" in ragged.why_not, ragged


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("gpu", ["h200", pytest.param("b200", marks=pytest.mark.extended)])  # (b200: 56 s, 2 cores)
def test_the_masked_reads_compile_clean(tmp_path, gpu):
    """softmax_temp's L0 and L1 (the masked readers) through emit-cuda's ptxas loop: nvcc builds them for sm_90a and
    sm_100a with no spill and no serialized wgmma."""
    machine = load_machine(gpu)
    for loop, schedule, _ in _loops(SOFTMAX_TEMP, gpu)[:2]:
        _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"st_{loop}.cu")
        assert rc == 0, err[-2000:]
        assert "kTail) if" in (tmp_path / f"st_{loop}.cu").read_text(), loop
        assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
        assert "C7510" not in err and "C7511" not in err, err[-2000:]
