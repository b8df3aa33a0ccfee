"""A sequence's loops as one kernel (twill/emit/seqfuse.py): where it is chosen and where refused (and why), the
one kernel of the held-out LayerNorm (batch 7: three loops, its schedule stored in tests/data/seq) against
tests/golden/seqfuse, its nvcc build for sm_90a with no spill, and K.py's one-kernel path run with each loop's
launch evaluated in numpy (tests/test_colsplit.py's stand-ins): every loop's block packed and deferred, handed
to the one kernel's entry in order, and the outputs those of the loops run one by one. The GPU run:
bench/seq/fused_check.py."""
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import nvcc, nvcc_compile
from twill.emit import seqfuse
from twill.emit.cuda import Renderer
from twill.emit.sequence import loop_kernel
from twill.machine import load_machine
from twill.sequence import load_sequence_schedule
from twill_cli.main import main

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data" / "seq"
GOLDEN = TESTS / "golden" / "seqfuse"
LAYERNORM = "layernorm_fwd_sm90.h200"  # bench/heldout/run.py build --batch 7 layernorm_fwd: its solved schedules


def _loops(fixture: str, machine=None):
    seq = load_sequence_schedule(DATA / f"{fixture}.json")
    machine = machine or load_machine(fixture.split(".")[1])
    return [(name, Renderer(loop_kernel(s, machine)[0])) for name, s in zip(seq.names, seq.schedules)]


# -- where the one kernel applies --------------------------------------------------------------------

@pytest.mark.parametrize("fixture, why", [
    (LAYERNORM, ""),
    ("row_var_sm90.h200", ""),
    ("gemm_chain_sm90.h200", "loop L0: its grid walks columns too (tiles_n)"),
    ("attn_two_pass_sm90.h200", "loop L1: its grid walks columns too (tiles_n)"),
    ("row_var_sm100.b200", "loop L0: its target keeps accumulators in tensor memory"),
])
def test_the_one_kernel_is_chosen_where_the_loops_walk_one_grid_of_row_tiles(fixture, why):
    fp = seqfuse.plan(_loops(fixture))
    assert fp.why_not.startswith(why) and bool(fp.why_not) == bool(why), fp.why_not


def test_layernorms_plan_runs_each_loops_budgets_on_one_cta():
    fp = seqfuse.plan(_loops(LAYERNORM))
    # each loop: a load warp (24) and one computing warpgroup (248), both raised to the 256 registers they are
    # launched with (the registers neither takes: two warpgroups of 256 are the whole file), so no setmaxnreg
    assert (fp.threads, fp.launch, fp.persistent, fp.masks) == (256, 256, True, True)
    assert fp.budgets == ((256, 256),) * 3


def test_the_one_kernel_is_refused_where_the_loops_shared_memory_does_not_fit():
    machine = load_machine("h200")
    small = dataclasses.replace(machine, limits=dataclasses.replace(machine.limits, smem_bytes=80000))
    fp = seqfuse.plan(_loops(LAYERNORM, small))
    assert re.match(r"the loops' shared memory side by side \(\d+ bytes\) exceeds smem_bytes \(80000\)", fp.why_not)


def test_a_refused_sequence_says_why_in_its_binding(tmp_path):
    out = tmp_path / "chain.cu"
    r = CliRunner().invoke(main, ["emit-cuda", str(DATA / "gemm_chain_sm90.h200.json"), "-o", str(out), "--binding",
                                  "torch", "--no-ptxas-loop"])
    assert r.exit_code == 0 and "one kernel per loop: loop L0: its grid walks columns" in r.output, r.output
    text = (tmp_path / "chain.py").read_text()
    assert "FUSED = None" in text and "No one kernel: loop L0: its grid walks columns too" in text
    assert not (tmp_path / "chain.fused.cu").exists()


# -- the one kernel of LayerNorm ---------------------------------------------------------------------

def _emit_layernorm(folder: Path) -> list[str]:
    r = CliRunner().invoke(main, ["emit-cuda", str(DATA / f"{LAYERNORM}.json"), "-o", str(folder / f"{LAYERNORM}.cu"),
                                  "--binding", "torch", "--no-ptxas-loop"])
    assert r.exit_code == 0, r.output
    return sorted(p.name for p in folder.iterdir())


def test_layernorms_one_kernel_and_binding_match_golden(tmp_path, golden):
    written = _emit_layernorm(tmp_path)
    loops = [f"{LAYERNORM}.{loop}{part}" for loop in ("L0", "L1", "L2") for part in (".cu", ".py", "_entry.cu")]
    assert written == sorted(loops + [f"{LAYERNORM}.fused.cu", f"{LAYERNORM}.fused_entry.cu", f"{LAYERNORM}.py"])
    for name in written:  # (all of them: tests/test_gpu.py runs this binding)
        golden(f"seqfuse/{name}", (tmp_path / name).read_text())
    kernel = (tmp_path / f"{LAYERNORM}.fused.cu").read_text()
    # each warpgroup's own path: the load warp's and the computing warpgroup's, every loop on each, a CTA barrier
    # after each loop (three per tile, on both paths), the loops' own role functions
    assert kernel.count("twill::named_sync(0, kThreads);") == 6
    assert kernel.count("role_role<kTail>(sm, tm, args, n, tile);") == 1  # L1 masks the partial last tile
    assert "FUSED = ('layernorm_fwd_sm90.h200.fused.cu', 'layernorm_fwd_sm90.h200.fused_entry.cu')" in \
        (tmp_path / f"{LAYERNORM}.py").read_text()
    # the launch (checked for session 36's cudaErrorInvalidValue, whose cause was the blocks' splits, below): the
    # shared-memory limit raised on the variant launched, to the bytes it is launched with, within the machine's
    launch = kernel.split("namespace twill_layernorm_fwd_kernel_fused {")[-1]
    assert "const size_t smem = sizeof(Smem);" in launch and "entry<<<grid, kThreads, smem, stream>>>(" in launch
    assert "cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem))" in launch
    assert "static_assert(sizeof(Smem) <= 232448, \"the loops' shared memory side by side" in kernel
    assert "__launch_bounds__(kThreads, 1) kernel(" in kernel and "constexpr int kThreads = 256;" in kernel


@pytest.mark.extended
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
def test_layernorms_one_kernel_compiles_without_spills(tmp_path):
    """nvcc -Xptxas -v on the golden entry (the one kernel, its four variants, and each loop's host side): no
    spill in any of the one kernel's variants. Extended (CI's time: ~15-30 s of nvcc); tests/test_gpu.py builds the
    same library and checks its spills where a GPU is."""
    for name in (f"{LAYERNORM}.fused.cu", f"{LAYERNORM}.fused_entry.cu"):
        (tmp_path / name).write_text((GOLDEN / name).read_text())
    rc, err = nvcc_compile(tmp_path / f"{LAYERNORM}.fused_entry.cu",
                           ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err
    fused = re.findall(r"Function properties for \S*fused6kernel\S*\n\s*(\d+) bytes stack frame, (\d+) bytes spill "
                       r"stores, (\d+) bytes spill loads", err)
    assert len(fused) == 4 and not any(int(x) for f in fused for x in f), err
    assert "C75" not in err, err


# -- K.py's one-kernel path, each loop evaluated in numpy -----------------------------------------------

def _run_fused_in_numpy(seq_mod, seq, x, monkeypatch, fused):
    """test_colsplit's numpy run of K.py (each loop's `call` evaluated in numpy), each loop's function noting
    whether K.py called it deferred, and K.py's one kernel (`_fused_library`) a stand-in recording what it is
    given: (the result, the splits each loop ran, the one kernel's launches, each a tuple of the deferred loops)."""
    from test_colsplit import _Tensor, _run_in_numpy
    monkeypatch.setattr(_Tensor, "__getitem__", lambda self, i: _Tensor(self.a[i]), raising=False)
    launches = []

    class Library:
        def twill_launch(self, *blocks):
            launches.append(blocks)
            return 0

    monkeypatch.setattr(seq_mod, "_fused_library", lambda first: Library())
    for loop, file, _, _ in seq_mod.LOOPS:
        mod = seq_mod._module(file)

        own = getattr(mod, "_unwrapped_run", mod.run)  # (a second run in one test wraps the function, not the wrapper)
        monkeypatch.setattr(mod, "_unwrapped_run", own, raising=False)

        def run(*a, _run=own, _mod=mod, _loop=loop, **k):
            out = _run(*a, **k)
            blocks = _mod.DEFERRED.get()
            if blocks is not None:  # (the loop's own `call` packs its block here; the numpy one stands in)
                blocks.append(_loop)
            return out
        monkeypatch.setattr(mod, "run", run)
    whole = getattr(seq_mod, "_unwrapped_run", seq_mod.run)
    monkeypatch.setattr(seq_mod, "_unwrapped_run", whole, raising=False)
    monkeypatch.setattr(seq_mod, "run", lambda t: whole(t, fused=fused))
    got, ran = _run_in_numpy(seq_mod, seq, x, monkeypatch)
    for loop, file, _, _ in seq_mod.LOOPS:
        assert seq_mod._module(file).DEFERRED.get() is None  # reset after each loop's call
    return got, ran, launches


@pytest.mark.parametrize("name", ["softmax_online", "softmax_3pass"])
def test_the_sequence_binding_runs_the_loops_as_one_kernel(tmp_path, monkeypatch, name):
    """Each loop's call (its checks, its outputs allocated) deferred, none launched; the one kernel launched once
    with the loops' blocks in order; the result the softmax, as the loops run one by one compute it (a fold's one
    partial [1, M] handed over as [M], a view the kernel writes)."""
    from test_colsplit import _emitted, _seq, _softmax
    seq_mod, seq = _emitted(tmp_path, "heldout7", name), _seq("heldout7", name)
    assert seq_mod.FUSED == (f"{name}.fused.cu", f"{name}.fused_entry.cu")
    x = np.random.default_rng(8).standard_normal((1000, 1024)) * 3
    got, ran, launches = _run_fused_in_numpy(seq_mod, seq, x, monkeypatch, True)
    names = tuple(loop for loop, _, _, _ in seq_mod.LOOPS)
    assert launches == [names] and set(ran.values()) == {1}, (launches, ran)
    assert np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12)
    got, ran, launches = _run_fused_in_numpy(seq_mod, seq, x, monkeypatch, False)  # one kernel per loop
    assert launches == [] and np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12)
    # the default: 8 row tiles of 128 on 132 SMs split by columns, so one kernel per loop (its wider grid was the
    # faster on the H200, session 37)
    got, ran, launches = _run_fused_in_numpy(seq_mod, seq, x, monkeypatch, None)
    assert launches == [] and max(ran.values()) > 1 and np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12)


def test_long_rows_split_by_columns_keep_one_kernel_per_loop(tmp_path, monkeypatch):
    from test_colsplit import _emitted, _seq, _softmax
    seq_mod, seq = _emitted(tmp_path, "heldout7", "softmax_online"), _seq("heldout7", "softmax_online")
    x = np.random.default_rng(9).standard_normal((1000, 5120)) * 3  # 40 iterations a row tile: split by columns
    got, ran, launches = _run_fused_in_numpy(seq_mod, seq, x, monkeypatch, None)
    assert launches == [] and ran["L0"] > 1 and np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12)
    got, ran, launches = _run_fused_in_numpy(seq_mod, seq, x, monkeypatch, True)  # asked for: one split each
    assert len(launches) == 1 and set(ran.values()) == {1} and np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12)


# -- K.py's one-kernel path through each loop's own `call` (its checks, split choice and packing) -----------------
# The H100 run of session 36 failed here: called deferred with no split, a loop's `call` chose its own column
# split (_own_split: 16 row tiles of 64 on 132 SMs -> 4 splits), so its block asked for 4 splits, and the one
# kernel's fused_prepare returned cudaErrorInvalidValue for every kernel at every size. The numpy tests above
# stand in for `call` and never saw it; these run the real one (the runtime each binding carries), with a
# torch stand-in that answers what `call` asks of torch and a library stand-in that records the packed blocks.

def _torch_for_call(sms: int = 132):
    import math
    import types

    from test_binding_cache import Device, DType, Tensor

    class Viewed(Tensor):
        def __getitem__(self, index):  # t[..., :cols]: a padded buffer's rows as the caller's (same pointer);
            if isinstance(index, int):  # t[0]: a fold's one partial [1, *rows] as its rows
                return Viewed(self.shape[1:], self.dtype.name, self.device, ptr=self.ptr, strides=self.strides[1:])
            cols = index[-1].stop
            return Viewed(self.shape[:-1] + (cols,), self.dtype.name, self.device, ptr=self.ptr, strides=self.strides)

        def numel(self):
            return math.prod(self.shape)

    ptrs = iter(range(1 << 30, 1 << 40, 1 << 28))
    fake = types.ModuleType("torch")
    fake.Tensor = Viewed
    fake.device = lambda name: name
    fake.cuda = types.SimpleNamespace(
        get_device_properties=lambda d: types.SimpleNamespace(multi_processor_count=sms))
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0)
    fake.empty = fake.zeros = lambda shape, dtype, device: Viewed(
        (shape,) if isinstance(shape, int) else shape, dtype.name, Device(), ptr=next(ptrs))
    for name in ("float16", "bfloat16", "float32", "int32"):
        setattr(fake, name, DType(name))
    return fake, Viewed


def _block_fields(mod, block: bytes) -> dict:
    """A loop's packed block (its args_format) by field: the head's, and the splits it asks for."""
    import struct
    spec = mod.SPEC
    n, s = len(spec["args"]), len(spec.get("scalars", ()))
    v = struct.unpack(mod.args_format(spec), block)
    names = ("tiles_m", "tiles_n", "iters", "loop_extent", "batch", "m_extent", "n_extent", "persistent",
             "raster_group", "device")
    fields = dict(zip(names, v))
    tail = v[10 + 2 + 1 + 4 * n + s:]  # (exp2/out scale, the stream, pointers, groups, strides, scalars before it)
    fields["splits"] = tail[0] if spec.get("split") else 1
    return fields


class _Library:
    """Stands in for a compiled library: records each launch's blocks, returns `err` (0: cudaSuccess)."""

    def __init__(self, err=0):
        self.err, self.launches = err, []

    def twill_launch(self, *blocks):
        self.launches.append(blocks)
        return self.err

    def twill_error_string(self, err):
        return b"invalid argument"


def _layernorm_through_call(tmp_path, monkeypatch, err=0):
    """K.py of the LayerNorm's loops (emitted here), its loops' `call` real, torch and the libraries stand-ins:
    (K.py's module, a call(rows, cols, fused), the one kernel's library, each loop's own library)."""
    import importlib.util
    import sys
    _emit_layernorm(tmp_path)
    fake, Tensor = _torch_for_call()
    monkeypatch.setitem(sys.modules, "torch", fake)
    spec = importlib.util.spec_from_file_location("layernorm_seq", tmp_path / f"{LAYERNORM}.py")
    seq = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seq)
    fused, own = _Library(err), {}
    monkeypatch.setattr(seq, "_fused_library", lambda first: fused)
    for loop, file, _, _ in seq.LOOPS:
        mod = seq._module(file)
        own[loop] = _Library()
        monkeypatch.setattr(mod, "library", lambda spec, here, directory=None, _lib=own[loop]: _lib)

    def run(rows, cols, fused):
        x, w, b = Tensor((rows, cols)), Tensor((cols,), "float32", ptr=3 << 20), Tensor((cols,), "float32", ptr=5 << 20)
        return seq.run(N=cols, X=x, eps=1e-5, W=w, B=b, fused=fused)
    return seq, run, fused, own


@pytest.mark.parametrize("rows, cols, fused", [(1000, 1024, True), (4096, 5120, True), (32768, 1024, None)])
def test_the_one_kernels_blocks_ask_each_loop_for_one_split(tmp_path, monkeypatch, rows, cols, fused):
    """1000 x 1024 and 4096 x 5120 (fused=True), 32768 x 1024 (the one kernel by default: its row tiles fill
    the SMs, so no loop splits its columns alone): each loop's block, as
    its own `call` packs it deferred, asks for one split (the one kernel's fused_prepare refuses more) over the
    same row tiles (its check of the loops' tiles); the same loops run one kernel each split their columns."""
    seq, run, lib, own = _layernorm_through_call(tmp_path, monkeypatch)
    run(rows, cols, fused)
    assert len(lib.launches) == 1 and not any(x.launches for x in own.values())
    blocks = [_block_fields(seq._module(file), block) for (_, file, _, _), block in zip(seq.LOOPS, lib.launches[0])]
    assert [f["splits"] for f in blocks] == [1, 1, 1], blocks
    assert len({(f["tiles_m"], f["tiles_n"], f["batch"]) for f in blocks}) == 1, blocks
    text = (tmp_path / f"{LAYERNORM}.fused.cu").read_text()
    assert text.count("if (p.splits != 1) return cudaErrorInvalidValue;") == 3  # what a block of more meets
    run(rows, cols, False)  # one kernel per loop: the loops' own column splits (so the case above could fail)
    apart = [_block_fields(seq._module(file), x.launches[-1][0]) for (loop, file, _, _), x in zip(seq.LOOPS, own.values())]
    assert all(f["splits"] > 1 for f in apart) if fused else all(f["splits"] == 1 for f in apart), apart
    run(rows, cols, fused)  # deferred again after the loops' own launches of the same kind: still one split each
    assert [_block_fields(seq._module(f), b)["splits"] for (_, f, _, _), b in zip(seq.LOOPS, lib.launches[1])] == [1] * 3


def test_a_failed_one_kernel_runs_one_kernel_per_loop_unless_asked_for(tmp_path, monkeypatch):
    """The one kernel's entry returning an error (cudaErrorInvalidValue): fused=None warns and runs the loops one
    kernel each, and later calls of that kind go there at once; fused=True raises the error."""
    seq, run, lib, own = _layernorm_through_call(tmp_path, monkeypatch, err=1)
    with pytest.warns(RuntimeWarning, match=r"one kernel's launch failed: invalid argument \(cudaError 1\); running "
                                            r"one kernel per loop"):
        run(32768, 1024, None)
    assert len(lib.launches) == 1 and all(len(x.launches) == 1 for x in own.values())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(32768, 1024, None)  # that kind: one kernel per loop, the one kernel not tried again
    assert len(lib.launches) == 1 and all(len(x.launches) == 2 for x in own.values())
    with pytest.raises(seq.FusedFailed, match="invalid argument"):
        run(32768, 1024, True)
    assert len(lib.launches) == 2 and all(len(x.launches) == 2 for x in own.values())


@pytest.mark.extended
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
def test_ptxas_refuses_a_one_kernel_that_spills_and_keeps_a_clean_one():
    """seqfuse.compiled: the held-out online softmax's two loops (batch 7, `run.py build`'s h200 schedules) compile
    clean each alone, but as one kernel ptxas spills (its path holds L0's online pair and L1's code at 255
    registers): refused, so its binding runs each loop's kernel; LayerNorm's one kernel is clean and kept."""
    machine = load_machine("h200")
    for fixture, spills in (("softmax_online_sm90.h200", True), (LAYERNORM, False)):
        loops = _loops(fixture)
        fp = seqfuse.plan(loops)
        assert not fp.why_not, fp.why_not
        got = seqfuse.compiled(fp, seqfuse.fused_source(fixture.split(".")[0], loops, fp), machine.arch)
        assert ("spill stores" in got.why_not) == spills, got.why_not
        assert got.why_not.startswith("ptxas on the one kernel") == spills
