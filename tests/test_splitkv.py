"""Split-KV attention end to end (docs/emit-cuda.md, "A grid axis of splits"): the held-out kernel
(bench/heldout/kernels3.py attn_splitkv, tests/data/ttgir/heldout3) imported with `grid split =
SPLIT_LEN` (test_heldout3.py has the import of every form and the near misses), solved, emitted with
the split as the outer part of the batch index, compiled for sm_90a and sm_100a with no spill, and its
binding's checks, which need no GPU (`resolve` on Meta tuples). The GPU check against the kernel's
reference is `bench/heldout/run.py check --batch 3` (the lead's)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc
from twill.emit import build_model, emit_cuda
from twill.emit.binding import binding_files
from twill.emit.model import EmitError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.ttgir import load_ttgir
from twill.verify import verify

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout3"
# (form, arch, machine): one dump per Triton version and pipeliner form, each arch
BUILDS = [("t39/prepipe", "sm90", "h100"), pytest.param("t36/after", "sm90", "h200", marks=pytest.mark.extended),
          ("t39/after", "sm100", "b200"), pytest.param("t36/prepipe", "sm100", "b200", marks=pytest.mark.extended)]
# (one build per arch in CI; test_ttgir checks that both forms import to the same graph)


def _schedule(form: str, arch: str, gpu: str):
    graph, _ = load_ttgir(DATA / form / f"attn_splitkv_{arch}.ttgir", split_rows="auto")
    machine = load_machine(gpu)
    schedule = solve(graph, machine, SolveOptions(time_limit=120))
    assert schedule.stage == "joint" and schedule.optimal and schedule.complete
    assert verify(schedule, graph, machine) == []
    return graph, schedule, machine


@pytest.fixture(scope="module")
def binding(tmp_path_factory):
    """The binding of the t39 prepipe sm_90 dump on h100, imported (no build: resolve is plain Python)."""
    _, schedule, machine = _schedule("t39/prepipe", "sm90", "h100")
    out = tmp_path_factory.mktemp("splitkv")
    for path, text in binding_files(build_model(schedule, machine), str(out / "sk.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("binding_splitkv", out / "sk.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _meta(mod, shape, dtype="float16"):
    return mod.Meta(tuple(shape), dtype, "cuda:0", True, 1 << 20)


def _given(mod, o=(4, 16, 64, 64), lse=(4, 16, 64), keys=4096):
    return {"Q": _meta(mod, (2, 8, 64, 64)), "K": _meta(mod, (2, 8, keys, 64)), "V": _meta(mod, (2, 8, keys, 64)),
            "O_PART": None if o is None else _meta(mod, o, "float32"),
            "LSE_PART": None if lse is None else _meta(mod, lse, "float32")}


@pytest.mark.parametrize("form, arch, gpu", BUILDS)
def test_the_split_is_the_outer_part_of_the_batch_index(form, arch, gpu):
    _, schedule, machine = _schedule(form, arch, gpu)
    cu = emit_cuda(schedule, machine)
    assert "return tile.b / args.batch * args.iters;" in cu  # the split's first iteration
    # each role's locals, once per tile (splits.role_lines)
    assert "const int twill_split_first = split_first(args, tile);" in cu
    assert "const int twill_split_b = tile.b % args.batch;" in cu
    loads = re.findall(r"twill::tma_load\([^;]*tm\.(\w+),[^;]*;", cu)
    assert {"q", "k", "v"} <= set(loads)
    for line in re.findall(r"twill::tma_load\([^;]*tm\.[kv],[^;]*;", cu):  # keys from the split's first iteration
        assert "(twill_split_first + it) * 64" in line, line
    assert re.search(r"tma_load\([^;]*tm\.q,[^;]*, twill_split_b\);", cu)  # Q: the batch entry
    assert "twill_b_k = twill_split_b / args.k_batch_group" in cu
    assert "int splits = 1;" in cu and "args.tiles *= p.splits;" in cu
    # the outputs: [splits * batch] entries; K and V along every split's keys
    assert re.search(r"encode\(&tm_out_acc,[^;]*static_cast<uint64_t>\(p\.batch\) \* static_cast<uint64_t>\(p\.splits\)", cu)
    assert re.search(r"encode\(&tm_k,[^,]*,[^,]*, p\.k, loop_elements\(p, 64\) \* static_cast<uint64_t>\(p\.splits\)", cu)
    assert "constexpr bool kRagged = false;" in cu  # each split runs whole tiles


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("form, arch, gpu", BUILDS)
def test_split_kv_compiles_clean(form, arch, gpu, tmp_path):
    """Emitted as `twill emit-cuda` does, through its ptxas loop (twill/ptxas_loop.py): on the H200
    the plain kernel<false> spilled 8 bytes, and the loop's ring position hidden from the compiler
    compiles clean."""
    _, schedule, machine = _schedule(form, arch, gpu)
    _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"splitkv_{arch}.cu")  # the loop's own build
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]


def test_the_binding_reads_the_splits_off_the_outputs(binding):
    plan = binding.resolve(binding.SPEC, _given(binding), split=1024)
    assert (plan["splits"], plan["loop_extent"], plan["iters"], plan["batch"]) == (4, 1024, 16, 16)
    assert plan["shapes"]["O_PART"] == (4, 16, 64, 64) and plan["shapes"]["K"] == (2, 8, 4096, 64)
    # SPLIT_LEN not passed: the launch's L / splits
    assert binding.resolve(binding.SPEC, _given(binding), split=None)["loop_extent"] == 1024
    # outputs not passed: allocated [splits, *batch, ...] from SPLIT_LEN
    plan = binding.resolve(binding.SPEC, _given(binding, o=None, lse=None), split=512)
    assert plan["splits"] == 8 and plan["shapes"]["O_PART"] == (8, 2, 8, 64, 64)
    assert plan["shapes"]["LSE_PART"] == (8, 2, 8, 64)
    assert binding.SPEC["split"] == "SPLIT_LEN"
    assert "[splits, *batch, M, N]" in binding.run.__doc__


@pytest.mark.parametrize("change, said", [
    (dict(split=1000), "SPLIT_LEN = 1000, but LSE_PART's 4 splits of L = 4096"),
    (dict(split=1000, o=None, lse=None), "SPLIT_LEN = 1000 does not divide L = 4096"),
    (dict(split=32, o=(128, 16, 64, 64), lse=(128, 16, 64)), "SPLIT_LEN = 32 is not a multiple of 64"),
    (dict(split=None, o=None, lse=None), "SPLIT_LEN: missing, and no output gives the splits"),
    (dict(split=1024, o=(4, 8, 64, 64)), "O_PART: expected shape [splits, *batch, ...]"),
    (dict(split=1024, o=(2, 16, 64, 64)), "LSE_PART: 4 splits (its first dimension), but O_PART has 2"),
    (dict(split=None, o=(3, 16, 64, 64), lse=(3, 16, 64)), "3 splits do not divide L = 4096"),
    (dict(split=64, o=(64, 16, 64, 64), lse=(64, 16, 64)), "the loop runs 1 iteration(s)"),
    (dict(split=1024.0), "SPLIT_LEN: expected a positive Python int"),
])
def test_a_split_that_does_not_fit_is_an_argument_error(binding, change, said):
    given = _given(binding, **{k: v for k, v in change.items() if k in ("o", "lse")})
    with pytest.raises(binding.ArgumentError) as err:
        binding.resolve(binding.SPEC, given, split=change["split"])
    assert said in str(err.value), str(err.value)


def test_the_entry_point_passes_the_splits(binding, tmp_path):
    entry = Path(binding.__file__).with_name("sk_entry.cu").read_text()
    assert "int64_t splits;" in entry and "p.splits = static_cast<int>(a.splits);" in entry
    assert binding.args_format(binding.SPEC).endswith("q")


def test_a_causal_loop_with_a_split_is_refused_at_emit():
    """A split and a causal mask's per-tile trip count are not emitted together (splits.why_not)."""
    from twill.tir import load_tir, parse_tir, print_tir
    text = print_tir(load_tir(Path(__file__).parents[1] / "examples" / "attention_fwd_causal_hopper.tir"))
    kernel, rest = text.split("\n", 1)
    graph = parse_tir(f"{kernel}\nargument n\ngrid split = n\n{rest}", "causal_split.tir")
    assert graph.split == "n"
    machine = load_machine("h100")
    schedule = solve(graph, machine, SolveOptions(time_limit=120))
    with pytest.raises(EmitError, match="grid split: a causal loop"):
        emit_cuda(schedule, machine)
