"""Triton's random numbers (tl.rand): the stream in numpy (twill/philox.py) against Philox's published known answers;
the emitted runtime's Philox (emit/cuda_runtime/philox.cuh, built for the host by nvcc) against it, bit for bit;
the import that collapses a dump's inlined rounds into one `rand` op after checking them by value (ttgir/rand.py) and
lowers its offsets to the op's counter (ttgir/draw.py), with its refusals; the op's vocabulary entry; the seed's
64 bits through the binding; and seeded dropout (the Triton tutorial 04's `_seeded_dropout`, batch 9) in numpy,
its binding's launches of a flat map's tail included, against the kernel's formula over Triton's stream.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import nvcc
from twill import counter, philox
from twill.errors import InputError
from twill.ttgir import import_ttgir, load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
RUNTIME = Path(__file__).parents[1] / "twill" / "emit" / "cuda_runtime"


# -- the stream ---------------------------------------------------------------------------------------

# Random123's published known answers for philox4x32-10 (tests/kat_vectors of github.com/DEShawResearch/random123):
# counter words, key words (k0, k1), the four output words. Triton's rounds (random.py's philox_impl) are Random123's
# with (c0, c1, c2, c3) the counter and (k0, k1) = the seed's low and high words.
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("ctr, key, want", KAT)
def test_the_stream_is_philox_4x32_10(ctr, key, want):
    got = philox.philox(key[0] | key[1] << 32, *ctr)
    assert tuple(int(w) for w in got) == want


def test_tl_rand_is_the_first_word_as_a_float_below_one():
    """tl.rand = uint_to_uniform_float(randint): the word as an int32, ~x where negative, times the f32 nearest
    4.6566127342e-10, in f32; a negative seed is its two's complement (Triton's seed.to(tl.uint64))."""
    offsets = np.arange(-5, 300)
    words = philox.randint(123, offsets)
    assert np.array_equal(words, philox.philox(123, offsets % (1 << 32))[0])
    u = philox.rand(123, offsets)
    assert u.dtype == np.float32 and (u >= 0).all() and (u < 1).all()
    x = words.view(np.int32)
    assert np.array_equal(u, np.where(x < 0, ~x, x).astype(np.float32) * np.float32(4.6566127342e-10))
    assert philox.uniform([0, 0xFFFFFFFF]).tolist() == [0.0, 0.0] and philox.uniform([0x7FFFFFFF])[0] < 1
    assert np.array_equal(philox.rand(-1, offsets), philox.rand((1 << 64) - 1, offsets))
    assert not np.array_equal(philox.rand(-1, offsets), philox.rand((1 << 32) - 1, offsets))
    # 64-bit offsets: the high word is c1
    assert philox.randint(5, [1 << 32], bits=64)[0] == philox.philox(5, 0, 1)[0] != philox.randint(5, [0])[0]


HOST = """\
#include <cstdint>
#include <cstdio>
#include <cstring>
namespace twill {
#include "philox.cuh"
}
int main() {
  unsigned long long seed;
  unsigned counter;
  int rounds;
  while (scanf("%llu %u %d", &seed, &counter, &rounds) == 3) {
    const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    const uint32_t w = rounds == 10 ? twill::philox_word<10>(counter, 0u, k0, k1) : twill::philox_word<7>(counter, 0u, k0, k1);
    const float u = rounds == 10 ? twill::philox_rand<10>(seed, counter) : twill::philox_uniform(w);
    uint32_t bits;
    memcpy(&bits, &u, 4);
    printf("%u %u\\n", w, bits);
  }
  return 0;
}
"""


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_runtimes_philox_is_tritons_bit_for_bit(tmp_path):
    """emit/cuda_runtime/philox.cuh, built for the host by nvcc (its __umulhi the 64-bit product's high word
    there), on seeds of both signs and beyond 32 bits, counters across the 32-bit range, 10 and 7 rounds: the same
    words and the same floats' bits as twill/philox.py."""
    (tmp_path / "philox.cuh").write_text((RUNTIME / "philox.cuh").read_text())
    (tmp_path / "main.cu").write_text(HOST)
    done = subprocess.run([nvcc(), "-std=c++17", "-o", str(tmp_path / "philox"), str(tmp_path / "main.cu")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    rng = np.random.default_rng(11)
    counters = np.concatenate([np.arange(0, 64), [2**31 - 1, 2**31, 2**32 - 1, 98431, 98432],
                               rng.integers(0, 2**32, 200)]).astype(np.uint64)
    seeds = [0, 1, 123, (1 << 64) - 1, (1 << 64) - 2**31, 2**31 - 1, (1 << 40) + 77]
    cases = [(s, int(c), r) for s in seeds for c in counters for r in (10, 7)]
    run = subprocess.run([str(tmp_path / "philox")], input="".join(f"{s} {c} {r}\n" for s, c, r in cases),
                         capture_output=True, text=True, timeout=60)
    got = [tuple(map(int, line.split())) for line in run.stdout.splitlines()]
    assert len(got) == len(cases)
    for (s, c, r), (word, bits) in zip(cases, got):
        want = philox.randint(s, [c], r)[0]
        assert word == int(want), (s, c, r)
        assert bits == int(philox.uniform([want]).view(np.uint32)[0]), (s, c, r)


# -- the import -----------------------------------------------------------------------------------------

def _seeded(form: str = "t39/prepipe", arch: str = "sm90") -> str:
    return (DATA / "heldout9" / form / f"seeded_dropout_{arch}.ttgir").read_text()


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_seeded_dropout_imports_every_form_as_one_graph(arch):
    """04's `_seeded_dropout`: its ~90 Philox ops and the float conversion (located in triton/language/random.py)
    are one `rand` whose counter is the element's index in the flat map (row = extent, the view's row length;
    col = 1), its seed an i64 prologue scalar; `random > p` the table's gt of the argument p. Every form (Triton 3.9
    and 3.6, before and after the pipeliner, whose folding and hoisting of the rounds differ) is one graph (but for
    the name of 1 - p's prologue op, Triton's SSA name)."""
    from twill.tir import print_tir
    texts = set()
    for form in FORMS:
        graph, notes = import_ttgir(_seeded(form, arch), f"seeded_dropout_{arch}.ttgir")
        assert not notes, form
        rand = [op for op in graph.ops if op.opcode == "rand"]
        assert len(rand) == 1 and str(rand[0].type) == {"sm90": "f32[64,128]", "sm100": "f32[128,64]"}[arch], form
        assert dict(rand[0].attrs) == {"seed": "seed", "row": "extent", "col": 1}, form
        gt = next(op for op in graph.ops if op.opcode == "gt")
        assert [o.name for o in gt.operands] == [rand[0].name, "p"], form
        assert [(v.name, v.type.dtype) for v in graph.prologue.scalars] == [("seed", "i64"), ("p", "f32")], form
        assert ("seed", "seed") in graph.arguments and graph.flat == "n_elements", form
        texts.add(re.sub(r"\s+", " ", re.sub(r"output(_\d+)?_neg", "output_neg", print_tir(graph))))  # (SSA's name)
    assert len(texts) == 1


def _launch(graph, arrays: dict, numbers: dict, extent: int, flat_first: int = 0) -> dict:
    """The graph in numpy on one launch over [rows, extent] views of its tensors (a flat map's, as the binding
    views them), the rand op by its attributes (twill/counter.py), as emit/rand.py draws it: element (g, l) at
    row * g + col * l + base (+ the launch's first element, a flat map's) mod 2^32. The stored arrays by argument."""
    feeds = {t: a for a, t in graph.arguments if t is not None}
    env = {s.name: numbers[feeds.get(s.name, s.name)] for s in graph.prologue.scalars}
    rows = next(iter(arrays.values())).shape[0]
    g, col = np.meshgrid(np.arange(rows, dtype=np.int64), np.arange(extent, dtype=np.int64), indexing="ij")
    values = {n: v for n, v in env.items()} | {counter.EXTENT: extent}

    def coef(value) -> int:
        return sum(c * int(np.prod([values[n] for n in ns])) for ns, c in counter.poly(value))
    table = {"neg": lambda a: -a, "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
             "gt": lambda a, b: (a > b).astype(np.float32), "select": lambda c, a, b: np.where(c != 0, a, b)}
    out = {}
    for op in graph.prologue.ops + graph.ops:
        if op.opcode == "load":
            env[op.name] = arrays[feeds[op.name]]
        elif op.opcode == "store":
            out[feeds[op.name]] = env[op.operands[0].name]
        elif op.opcode == "rand":
            ctr = coef(op.attr("row")) * g + coef(op.attr("col")) * col + coef(op.attr("base", 0)) + flat_first
            env[op.name] = philox.rand(env[op.attr("seed")], ctr % (1 << 32), int(op.attr("rounds", 10)))
        else:
            xs = [np.float32(env[o.name]) if np.ndim(env[o.name]) == 0 else env[o.name] for o in op.operands]
            xs += [np.float32(op.attr("scalar"))] if op.attr("scalar") is not None else []
            env[op.name] = table[op.opcode](*xs)
    return out


def _reference(x, p: float, seed: int):
    """The Triton kernel's formula: tl.rand(seed, offsets) > p keeps x / (1 - p), offsets the element's index."""
    keep = philox.rand(seed, np.arange(x.size)) > np.float32(p)
    return np.where(keep, x / (np.float32(1) - np.float32(p)), np.float32(0))


@pytest.mark.parametrize("width", [128, 256, 1024])
def test_seeded_dropout_in_numpy_is_the_kernels_formula_in_any_view(width):
    """The graph evaluated over the binding's [n / W, W] view of x (W = 128, 2 or 8 blocks a row): Triton's kept
    set and scale at each element's own index, for seeds of both signs and p = 0.3; a counter of the element's
    column alone (row = 0) or of the rows by 128 whatever the view (row = 128) is another set."""
    graph, _ = import_ttgir(_seeded(), "seeded_dropout_sm90.ttgir")
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    for seed in (123, -7, (1 << 40) + 3):
        want = _reference(x, 0.3, seed)
        got = _launch(graph, {"x_ptr": x.reshape(-1, width)}, {"p": 0.3, "seed": seed}, width)["output_ptr"]
        assert np.array_equal(got.reshape(-1), want), seed
    from dataclasses import replace
    for wrong in (0, 128 if width != 128 else 256):
        ops = tuple(replace(op, attrs=tuple((k, wrong if k == "row" else v) for k, v in op.attrs))
                    if op.opcode == "rand" else op for op in graph.ops)
        got = _launch(replace(graph, ops=ops), {"x_ptr": x.reshape(-1, width)}, {"p": 0.3, "seed": 123},
                      width)["output_ptr"]
        assert not np.array_equal(got.reshape(-1), _reference(x, 0.3, 123)), wrong


class _Flat:
    """A stand-in torch tensor over a numpy array, with torch's views: view(-1) and slices share the memory."""

    def __init__(self, a, dtype="float32"):
        self.a, self.dtype, self.device, self.shape = a, dtype, "cuda:0", a.shape

    def numel(self):
        return self.a.size

    def is_contiguous(self):
        return self.a.flags.c_contiguous

    def view(self, *shape):
        return _Flat(self.a.view().reshape(*shape), self.dtype)

    def __getitem__(self, s):
        return _Flat(self.a[s], self.dtype)

    def copy_(self, other):
        self.a[...] = other.a


def test_the_flat_maps_tail_launch_keeps_each_elements_counter(tmp_path, monkeypatch):
    """98433 elements (rows of R = 128 x the blocks the pipeline needs, and a rest): the binding runs the kernel on
    the first n - n mod R and then on the rest copied into a padded row, telling that launch its first element
    (Args::flat_first = n - n mod R), so the padded row's element 0 draws that counter, as Triton's offsets do. Each launch here is the graph in numpy
    (_launch); the output is the kernel's formula everywhere. Its spec takes the seed as 64 bits."""
    import importlib.util
    import types
    from twill.emit import build_model
    from twill.emit.binding import binding_files
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    machine = load_machine("h200")
    graph, _ = import_ttgir(_seeded("t36/prepipe"), "seeded_dropout_sm90.ttgir")
    model = build_model(solve(graph, machine, SolveOptions(time_limit=60)), machine)
    for path, text in binding_files(model, str(tmp_path / "sd.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("sd", tmp_path / "sd.py")
    sd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sd)
    assert sd.SPEC["flat_first"] and [s["type"] for s in sd.SPEC["scalars"]] == ["int64", "float"]
    assert re.search(r"memcpy\(&p\.seed, &a\.scalars\[0\], 8\)", (tmp_path / "sd_entry.cu").read_text())
    assert "p.flat_first = a.flat_first;" in (tmp_path / "sd_entry.cu").read_text()
    fake = types.SimpleNamespace(Tensor=_Flat, float32="float32",
                                 empty=lambda shape, dtype, device: _Flat(np.full(shape, np.nan, np.float32), dtype),
                                 zeros=lambda shape, dtype, device: _Flat(np.zeros(shape, np.float32), dtype))
    launched = []

    def kernel(spec, here, tensors, sizes=None, flat_first=0, scalars=(), **kw):
        n = tensors["x_ptr"].numel()
        width = 128 * sd._flat_blocks(n // 128, 128, spec)  # the view's row, as the binding's _flat_views takes it
        launched.append((n, flat_first))
        seed, p = scalars
        got = _launch(graph, {"x_ptr": tensors["x_ptr"].a.reshape(-1, width)}, {"p": p, "seed": seed}, width,
                      flat_first)
        tensors["output_ptr"].a[...] = got["output_ptr"].reshape(-1)
        return tensors["output_ptr"]

    monkeypatch.setattr(sd, "call", kernel)
    row = 128 * sd._flat_need(sd.SPEC, 128)  # the blocks a row needs for the pipeline's stages
    for n in (98433, 98432 + 77, 300):
        launched.clear()
        x = _Flat(np.random.default_rng(n).standard_normal(n).astype(np.float32))
        out = sd._flat_tail(sd.SPEC, "", {"x_ptr": x, "output_ptr": None}, fake, dict(stream=None, scalars=[77, 0.25]),
                            {})
        head = n - n % row
        assert launched == ([(head, 0)] if head else []) + [(row, head)], n
        assert np.array_equal(out.a, _reference(x.a, 0.25, 77)), n


def test_the_seed_is_passed_as_its_64_bits():
    """An int64 scalar (a rand's seed) is packed as its two's complement bits, not through a double: 2^64 - 1 is -1,
    2^53 + 1 keeps its last bit; a float or a number past 64 bits is refused, naming the argument."""
    import struct
    from twill.emit.binding_runtime import ArgumentError, args_format, check_scalars
    spec = {"args": [{"name": "x"}], "scalars": [{"name": "seed", "type": "int64"}, {"name": "p", "type": "float"}],
            "flat_first": True}
    assert args_format(spec).endswith("qqdq")  # ... strides, the seed (q), p (d), flat_first (q)
    assert check_scalars(spec, [(1 << 64) - 1, 0.5]) == [-1, 0.5]
    assert check_scalars(spec, [(1 << 53) + 1, 1]) == [(1 << 53) + 1, 1.0]
    struct.pack("<qd", *check_scalars(spec, [(1 << 63), 0.5]))
    for bad, match in [(1.5, "expected a Python int"), (1 << 64, "does not fit 64 bits"), (-(1 << 63) - 1, "64 bits")]:
        with pytest.raises(ArgumentError, match=match):
            check_scalars(spec, [bad, 0.5])


def test_an_i32_coefficient_past_32_bits_is_refused():
    """An int scalar (an i32 of the imported kernel: a rand's row coefficient, the stride) goes to a C++ int through
    a double: a value past 32 bits (which Triton would pass as an i64, another kernel) is refused, naming it, rather
    than converted out of range (undefined in C++); the edges of 32 bits pass."""
    from twill.emit.binding_runtime import ArgumentError, check_scalars
    spec = {"args": [{"name": "x"}], "scalars": [{"name": "stride", "type": "int"}]}
    assert check_scalars(spec, [(1 << 31) - 1]) == [float((1 << 31) - 1)]
    assert check_scalars(spec, [-(1 << 31)]) == [float(-(1 << 31))]
    for bad in (1 << 31, -(1 << 31) - 1, 1 << 40):
        with pytest.raises(ArgumentError, match=r"^stride: .* does not fit 32 bits"):
            check_scalars(spec, [bad])


def test_the_draw_is_checked_by_value_before_it_is_collapsed():
    """Each draw is evaluated against Triton's stream before it becomes one op: a dump whose rounds differ in one
    key constant (or one xor made an or) is an error at the draw's number naming tl.rand, not a `rand` of other
    numbers; so is a draw whose seed is folded into its rounds (no seed read)."""
    text = _seeded()
    for old, new in [("%k0 = arith.constant -1879881855 : i32", "%k0 = arith.constant -1879881854 : i32"),
                     ("%c0_128 = arith.xori %c0_126, %c0_127", "%c0_128 = arith.ori %c0_126, %c0_127")]:
        edited = text.replace(old, new, 1)
        assert edited != text
        with pytest.raises(InputError) as err:
            import_ttgir(edited, "seeded_dropout_sm90.ttgir")
        d = err.value.diagnostics[0]
        assert "tl.rand" in d.message and "neither rand of Triton's Philox stream" in d.message, d.message
        assert "%random_133 = arith.mulf" in edited.splitlines()[d.span.line - 1]
    folded = text.replace("%seed_26 = arith.extsi %seed : i32 to i64", "%seed_26 = arith.constant 123 : i64", 1)
    with pytest.raises(InputError, match=r"tl\.rand.*no seed \(a constant seed is folded"):
        import_ttgir(folded, "seeded_dropout_sm90.ttgir")


def test_a_seed_computed_in_the_kernel_is_refused_at_the_draw():
    """The rounds of `seed + pid` (a seed no argument holds: the binding could not pass it) are refused at the draw's
    number naming tl.rand; so are offsets that are no element index (`offsets * 3`: the flat map's element index is
    the counter, a multiple of it is not: no flat map, the error at the draw).""" 
    text = _seeded()
    edited = text.replace("%seed_26 = arith.extsi %seed : i32 to i64",
                          "%seed_pid = arith.addi %seed, %pid : i32 loc(#loc52)\n"
                          "    %seed_26 = arith.extsi %seed_pid : i32 to i64", 1)
    with pytest.raises(InputError, match=r"tl\.rand.*its seed '%seed_pid' is computed in the kernel") as err:
        import_ttgir(edited, "seeded_dropout_sm90.ttgir")
    assert "%random_133" in edited.splitlines()[err.value.diagnostics[0].span.line - 1]
    three = text.replace("%c2 = tt.mulhiui %source_16, %offsets_21", "%c2 = tt.mulhiui %source_16, %offs3", 1) \
        .replace("%c3 = arith.muli %offsets_21, %source_16", "%c3 = arith.muli %offs3, %source_16", 1) \
        .replace("    %seed_26 = arith.extsi", "    %x_three = arith.constant dense<3> : tensor<1024xi32, #blocked>\n"
                 "    %offs3 = arith.muli %offsets_21, %x_three : tensor<1024xi32, #blocked> loc(#loc54)\n"
                 "    %seed_26 = arith.extsi", 1)
    with pytest.raises(InputError, match=r"tl\.rand .* other than the index itself") as err:
        import_ttgir(three, "seeded_dropout_sm90.ttgir")
    assert "twill.philox10" in three.splitlines()[err.value.diagnostics[0].span.line - 1] or \
        "%random_133 = arith.mulf" in three.splitlines()[err.value.diagnostics[0].span.line - 1]


def test_attention_dropouts_counter_reads_the_query_key_and_head():
    """Batch 6's attention with dropout, `tl.rand(seed, bh * N * N + offs_m[:, None] * N + cols[None, :])`: the
    rand of the scores' tile, row = N_CTX (an i32 prologue scalar), col = 1 (the loop's keys), batch = N_CTX *
    N_CTX (the head, program id y); the same op in every form but sm_100's after the pipeliner (refused before the
    draw: tests/test_heldout6.py), whose in-loop draw serves the next block (its base 64, the peeled copy's 0)."""
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            if arch == "sm100" and form.endswith("after"):
                continue
            graph, _ = load_ttgir(DATA / "heldout6" / form / f"attn_dropout_{arch}.ttgir")
            rand, = [op for op in graph.ops if op.opcode == "rand"]
            assert dict(rand.attrs) == {"seed": "seed", "row": "N_CTX", "col": 1, "batch": "N_CTX*N_CTX"}, form
            assert str(rand.type) == "f32[128,64]"
            assert {v.name: v.type.dtype for v in graph.prologue.scalars} == \
                {"seed": "i64", "N_CTX": "i32", "dropout_p": "f32"}, form


# -- the op -----------------------------------------------------------------------------------------------

RAND_TIR = """\
kernel k
input x : f32[64,128] @smem
prologue {{
  scalar seed : i64
  scalar N : i32
}}
loop {{
  r = rand : {type} {{{attrs}}}
  y = mul x, r : f32[64,128]
  store y
}}
"""


def test_the_rand_op_reads_prints_and_refuses_in_the_tir():
    from twill.tir import parse_tir, print_tir
    good = RAND_TIR.format(type="f32[64,128]", attrs='seed = seed, row = "2*N + 1", col = 1, batch = "N*N", base = 5, '
                                                     'rounds = 7')
    graph = parse_tir(good)
    op = graph.by_name["r"]
    assert counter.poly(op.attr("row")) == (((), 1), (("N",), 2)) and op.attr("rounds") == 7
    assert parse_tir(print_tir(graph)) == graph
    for attrs, type_, match in [("row = 1, col = 1", "f32[64,128]", "needs the attribute 'seed'"),
                                ("seed = seed, col = 1", "f32[64,128]", "needs the attribute 'row'"),
                                ('seed = seed, row = "N N", col = 1', "f32[64,128]", "a coefficient is an integer"),
                                ("seed = seed, row = 1, col = 1, rounds = 0", "f32[64,128]", "from 1 to 64"),
                                ("seed = seed, row = 1, col = 1", "f16[64,128]", "f32 \\(tl.rand"),
                                ("seed = seed, row = 1, col = 1", "f32[128]", "rank-2 tile")]:
        with pytest.raises(InputError, match=match):
            parse_tir(RAND_TIR.format(type=type_, attrs=attrs))


def test_the_rand_op_costs_its_rounds():
    """rand costs elements * 48 / rates.bit on the ALU (its Philox rounds) and holds 16 registers of scratch while
    it runs (vocab.py): a 64 x 128 tile is 6144 cycles on the H200's 64 integer ops a clock."""
    from twill import vocab
    from twill.costs import bind
    from twill.machine import load_machine
    from twill.tir import parse_tir
    machine = load_machine("h200")
    graph = parse_tir(RAND_TIR.format(type="f32[64,128]", attrs="seed = seed, row = N, col = 1"))
    cost = next(c for c in bind(graph, machine) if c.name == "r")
    assert cost.unit == "alu" and cost.cycles == pytest.approx(64 * 128 * 48 / 64)
    assert vocab.VOCAB["rand"].scratch == 16


def test_coefficients_read_and_print():
    for text, want in [("N_CTX*N_CTX", "N_CTX*N_CTX"), ("2*M + 1", "2*M + 1"), ("1 + M*2", "2*M + 1"),
                       ("N*N - 2*M", "-2*M + N*N"), ("extent", "extent"), ("3", 3), (0, 0)]:
        assert counter.text(counter.poly(text)) == want, text
    for bad in ("a b", "3x", "", "1+", "--1", "N**2", True):
        assert counter.poly(bad) is None, bad
    assert counter.cxx("2*M + 1", lambda n: f"args.{n}") == "(1u + 2u * static_cast<uint32_t>(args.M))"
    assert counter.cxx(-1, str) == "(4294967295u)"


# -- the forms users write (bench/heldout/randoms.py, Triton 3.9 and 3.6) ----------------------------------

RANDOMS = DATA / "randoms"
ROWS = {"seed": "seed", "row": "stride", "col": 1}
IMPORTS = {"dropout_rows": ROWS, "dropout_rows_loop": ROWS, "dropout_2d": ROWS,
           "rand_rounds7": {"seed": "seed", "row": "extent", "col": 1, "rounds": 7},
           "noise_flat": {"seed": "seed", "row": "extent", "col": 1}}
REFUSED = {"randn_flat": (r"arith\.mulf", r"tl\.randn.*neither rand of Triton's Philox stream"),
           "seed_ptr": (r"arith\.mulf", r"tl\.rand.*its seed '%seed' is computed in the kernel"),
           "gemm_dropout": (r"arith\.mulf", r"tl\.rand after the loop")}


@pytest.mark.parametrize("name", sorted(IMPORTS) + sorted(REFUSED))
def test_the_forms_users_write_import_or_are_refused_naming_tl_rand(name):
    """Each form of randoms.py, every dump (Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100):
    one row a program with or without a column loop and a 2-D grid's blocks draw at `row * stride + cols` (the
    counter's row is the argument stride, an i32 prologue scalar); n_rounds = 7 is the op's rounds; an i64 seed is
    the seed. tl.randn, a seed loaded from memory and tl.rand after a GEMM's K loop are each an error at the
    number's line naming tl.rand (or tl.randn)."""
    from conftest import refused_at_its_line
    from twill.tir import print_tir
    for arch in ("sm90", "sm100"):
        texts = set()
        for form in FORMS:
            path = RANDOMS / form / f"{name}_{arch}.ttgir"
            if name in REFUSED:
                refused_at_its_line(path, *REFUSED[name])
                continue
            graph, notes = load_ttgir(path)
            rand, = [op for op in graph.ops if op.opcode == "rand"]
            assert dict(rand.attrs) == IMPORTS[name], (form, arch)
            assert {v.name: v.type.dtype for v in graph.prologue.scalars}["seed"] == "i64"
            texts.add(re.sub(r"\s+", " ", print_tir(graph)))
        assert len(texts) <= 1, (arch, texts)


@pytest.mark.parametrize("name", ["dropout_rows", "dropout_rows_loop", "dropout_2d"])
def test_a_rows_counter_is_its_stride_in_numpy(name):
    """The row kernels' graphs in numpy over [M, N] rows held `stride` apart (N = 1000 in rows of 1000 and of 1024):
    each element draws at row * stride + column, Triton's offsets; a counter of N a row (the row's length, not the
    argument) is another set where the stride is not N."""
    graph, _ = load_ttgir(RANDOMS / "t39/prepipe" / f"{name}_sm90.ttgir")
    x = np.random.default_rng(5).standard_normal((300, 1000)).astype(np.float32)
    for stride in (1000, 1024):
        offs = np.arange(300)[:, None] * stride + np.arange(1000)[None, :]
        keep = philox.rand(-5, offs) > np.float32(0.3)
        want = np.where(keep, x / (np.float32(1) - np.float32(0.3)), np.float32(0))
        got = _launch(graph, {"X": x}, {"p": 0.3, "seed": -5, "stride": stride}, 1000)["Y"]
        assert np.array_equal(got, want), stride
        wrong = _launch(graph, {"X": x}, {"p": 0.3, "seed": -5, "stride": 1000}, 1000)["Y"]
        assert np.array_equal(wrong, want) == (stride == 1000)


def test_noise_and_seven_rounds_in_numpy():
    """x + scale * tl.rand(seed, offs) of an i64 seed beyond 32 bits, and tl.rand(seed, offs, n_rounds=7): the flat
    maps' graphs in numpy equal the formulas over Triton's stream (7 rounds is not 10's)."""
    x = np.random.default_rng(6).standard_normal(4096).astype(np.float32)
    seed = (1 << 40) + 9
    graph, _ = load_ttgir(RANDOMS / "t36/prepipe/noise_flat_sm90.ttgir")
    got = _launch(graph, {"X": x.reshape(-1, 256)}, {"scale": 0.25, "seed": seed}, 256)["Y"].reshape(-1)
    want = x + np.float32(0.25) * philox.rand(seed, np.arange(4096))
    assert np.allclose(got, want, rtol=1e-6) and not np.allclose(got, x + np.float32(0.25) * philox.rand(9, np.arange(4096)))
    graph, _ = load_ttgir(RANDOMS / "t36/prepipe/rand_rounds7_sm90.ttgir")
    got = _launch(graph, {"X": x.reshape(-1, 128)}, {"p": 0.5, "seed": 77}, 128)["Y"].reshape(-1)
    for rounds, equal in ((7, True), (10, False)):
        keep = philox.rand(77, np.arange(4096), rounds) > np.float32(0.5)
        assert np.array_equal(got, np.where(keep, x / np.float32(0.5), np.float32(0))) == equal, rounds


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name, arch", [("dropout_2d", "sm90"), pytest.param("dropout_2d", "sm100", marks=pytest.mark.extended),
                                        pytest.param("noise_flat", "sm90", marks=pytest.mark.extended)])
def test_a_rows_draw_emits_and_compiles_clean(name, arch, tmp_path):
    """A 2-D grid's dropout, import -> solve -> emit-cuda -> nvcc, no spill: the counter's row coefficient the
    launch's `stride` (args.stride), no flat_first (no flat map)."""
    from conftest import emitted_and_built
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    machine = load_machine("b200" if arch == "sm100" else "h200")
    graph, _ = load_ttgir(RANDOMS / "t36/prepipe" / f"{name}_{arch}.ttgir")
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.cu")
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    text = (tmp_path / f"{name}.cu").read_text()
    assert "twill::op_rand<10>(" in text
    assert ("static_cast<uint32_t>(args.stride)" in text) == (name == "dropout_2d")
    assert ("args.flat_first" in text) == (name == "noise_flat")
