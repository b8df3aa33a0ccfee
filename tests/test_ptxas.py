"""ptxas in the loop (twill/ptxas.py, twill/ptxas_loop.py): real nvcc on real emitted kernels, the
report read per entry function and per role, the loop, --no-ptxas-loop, and the path without nvcc."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill import ptxas
from twill.emit import build_model, emit_cuda
from twill.emit.cuda import render
from twill.machine import load_machine
from twill.ptxas_loop import emitter, run, shortfall
from twill.schedule import Schedule
from twill_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "emit"
needs_nvcc = pytest.mark.skipif(ptxas.find_nvcc() is None, reason="nvcc not found (NVCC, PATH, CUDA_HOME)")


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ptxas-cache"))


@pytest.fixture(autouse=True)
def loop_on(monkeypatch, compile_cache):
    """The loop on (conftest turns it off for every other test), one compile cache for the module."""
    monkeypatch.delenv("TWILL_PTXAS_LOOP", raising=False)
    monkeypatch.setenv("TWILL_CACHE_DIR", compile_cache)


def fixture(name: str):
    s = Schedule.from_json((DATA / f"{name}.json").read_text())
    return s, load_machine(s.machine)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig1.h100", "gemm_i8.b200"])
def test_the_report_of_a_real_kernel_is_read_per_entry(name):
    s, machine = fixture(name)
    report = ptxas.compile_kernel(emit_cuda(s, machine), machine.arch)
    assert report.ok and report.clean, report.log[-3000:]
    used = [int(n) for n in re.findall(r"Used (\d+) registers", report.log)]
    entries = re.findall(r"Compiling entry function '([^']+)' for '(\w+)'", report.log)
    assert [(e.name, e.arch) for e in report.entries] == entries and entries
    assert [e.registers for e in report.entries] == used
    assert all(e.instance.startswith("kernel<") and e.arch == machine.arch for e in report.entries)
    assert "no spills, no serialized wgmma" in report.summary()


@needs_nvcc
@pytest.mark.slow
def test_a_spill_and_a_serialization_are_read_and_given_to_their_role():
    """The SWP-only GEMM (its derived roles: one warpgroup holds both 64x256 accumulators, 256
    registers per thread) spills and has its wgmmas serialized; the probes say it is the mma
    role's, not the load warp's."""
    s, machine = fixture("gemm_hopper.h100.swp")
    model = build_model(s, machine)
    text = render(model)
    roles = [(r.ident, r.name, r.registers, None) for r in model.roles]
    found = ptxas.attribute(text, machine.arch, roles)
    assert found.report.spill_bytes > 0 and found.report.serialized, found.report.log[-3000:]
    codes = {a.code for e in found.report.entries for a in e.advisories if a.serializes}
    assert codes and all(re.fullmatch(r"C\d{4}", c) for c in codes)
    by_role = {f.role: f for f in found.roles}
    mma_roles = {r.name for r in model.roles if any(s.by_name[o].opcode == "mma" for o in r.ops)}
    assert {f.role for f in found.offending} == mma_roles, by_role
    assert all(by_role[r.name].clean for r in model.roles if r.name not in mma_roles)
    assert not found.unattributed


def test_a_probe_keeps_only_its_roles_calls():
    s, machine = fixture("attention_fwd_hopper.h100")
    text = emit_cuda(s, machine)
    calls = ptxas.role_calls(text)
    assert set(calls) == {r.name for r in s.roles} and all(calls.values())
    for role in calls:
        probe = ptxas.probe_source(text, role)
        assert ptxas.role_calls(probe) == {role: calls[role]}
        assert probe.count("\n") == text.count("\n")  # one statement replaced per call, nothing else
        assert probe.count("{") - probe.count("}") == 0 == text.count("{") - text.count("}")  # (kernel<true>'s loop)


def test_the_parser_on_coded_messages_and_failures():
    log = "\n".join([
        "ptxas info    : Compiling entry function '_ZN1a6kernelILb1ELb0EEEv' for 'sm_90a'",
        "ptxas info    : Function properties for _ZN1a6kernelILb1ELb0EEEv",
        "    16 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads",
        "ptxas info    : Used 168 registers, used 3 barriers, 16 bytes cumulative stack size",
        "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "something in the function '_ZN1a6kernelILb1ELb0EEEv'",
        "ptxas warning : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "insufficient register resources for the wgmma pipeline in the function '_ZN1a6kernelILb1ELb0EEEv'",
        "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "insufficient register resources for the function '_ZN1a6kernelILb1ELb0EEEv'",
    ])
    r = ptxas.parse(log)
    (e,) = r.entries
    assert (e.instance, e.registers, e.barriers, e.stack_bytes, e.spill_stores, e.spill_loads) == \
        ("kernel<true, false>", 168, 3, 16, 12, 20)
    assert [a.code for a in e.advisories] == ["C7515", "C7510", "C7512"] and e.serialized and not r.clean
    assert "kernel<true, false>: 12 bytes spill stores, 20 loads; wgmma serialized (C7510, C7512, C7515)" in r.summary()
    bad = ptxas.parse("x.cu(3): error: expected a ';'", rc=2)
    assert not bad.ok and not bad.clean and "expected a ';'" in bad.errors


def _entry_log(instance_flags: str, spill: int = 0, serialized: bool = False) -> list[str]:
    name = f"_ZN1a6kernelI{instance_flags}EEv"
    lines = [f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'",
             f"ptxas info    : Function properties for {name}",
             f"    0 bytes stack frame, {spill} bytes spill stores, {spill} bytes spill loads",
             "ptxas info    : Used 168 registers, used 3 barriers"]
    if serialized:
        lines.append("ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized "
                     f"due to insufficient register resources for the function '{name}'")
    return lines


@pytest.mark.parametrize("persistent, one_tile, worse, clean", [
    ((0, True), (12, False), True, False),   # the Triton causal forward's: serialized against a 12-byte spill
    ((8, False), (0, False), True, True),    # a spill in the tile loop alone: one CTA per tile is clean
    ((0, False), (0, False), False, True),   # both clean
    ((0, True), (0, True), False, False),    # both serialized: no better without the tile loop
    ((4, False), (12, False), False, False),  # the tile loop spills less
])
def test_a_persistent_kernel_that_compiles_worse_is_dropped(persistent, one_tile, worse, clean):
    """ptxas_loop.persistent_worse: kernel<true, ...> against kernel<false, ...> (serialization first,
    then spill bytes); one_tile_clean: the instances of one tile per CTA alone."""
    from twill.ptxas_loop import one_tile_clean, persistent_worse
    log = "\n".join(_entry_log("Lb1ELb0E", *persistent) + _entry_log("Lb0ELb0E", *one_tile)
                    + _entry_log("Lb0ELb1E", *one_tile))
    r = ptxas.parse(log)
    assert [e.instance for e in r.entries] == ["kernel<true, false>", "kernel<false, false>", "kernel<false, true>"]
    assert persistent_worse(r) == worse and one_tile_clean(r) == clean
    assert not persistent_worse(ptxas.parse("\n".join(_entry_log("Lb0ELb0E", 12))))  # no kernel<true>: nothing to drop


def test_shortfall_follows_the_rule():
    spill = ptxas.RoleFinding("c", budget=240, model_registers=200, spill_bytes=100)
    assert shortfall(spill, 8) == 72  # 240 + 25 - 200 = 65, in granules of 8
    assert shortfall(ptxas.RoleFinding("c", 240, 200, 0, serialized=True), 8) == 8
    assert shortfall(ptxas.RoleFinding("c", 240, 240, 4), 8) == 8  # at least a granule
    # ptxas's own count of the role, above its budget, sizes the shortfall (a serialization too)
    assert shortfall(ptxas.RoleFinding("c", 240, 200, 0, serialized=True, registers=251), 8) == 56
    assert shortfall(ptxas.RoleFinding("c", 240, 200, 100, registers=230), 8) == 72  # within budget: the spill rule


def test_a_count_probe_has_no_register_budget_and_one_role():
    """role_registers compiles the role's code alone with no setmaxnreg and no launch bounds, so
    that `Used N registers` is what that code takes."""
    s, machine = fixture("attention_fwd_hopper.h100")
    text = emit_cuda(s, machine)
    assert "setmaxnreg_" in text and "__launch_bounds__" in text
    for role in ptxas.role_calls(text):
        probe = ptxas.count_source(text, role)
        assert ptxas.role_calls(probe) == {role: ptxas.role_calls(text)[role]}
        assert "twill::setmaxnreg_" not in probe.split("__global__", 1)[1] and "__launch_bounds__(" not in probe


def test_only_the_role_that_contradicts_is_tightened():
    """role_reserve: registers a role holding the given ops keeps for the whole loop; another role's
    count is unchanged, and the option round-trips through a schedule's record."""
    from twill.liveness import role_register_use
    from twill.options import ModelOptions
    from twill.pipeline import SolveOptions, solve
    from twill.ptxas_loop import _tightened, model_registers
    from twill.fileio import load_graph
    graph = load_graph(ROOT / "examples" / "gemm_hopper.tir")
    machine = load_machine("h100")
    base = solve(graph, machine, SolveOptions(time_limit=60))
    mma = max(base.roles, key=lambda r: (r.registers, r.name))
    finding = ptxas.RoleFinding(mma.name, mma.registers, None, 64, ops=mma.ops, warps=mma.warps)
    reserve = _tightened((), finding, 16)
    assert reserve == ((mma.ops, 16, mma.warps),) and _tightened(reserve, finding, 8) == ((mma.ops, 24, mma.warps),)
    tight = solve(graph, machine, SolveOptions(time_limit=60, role_reserve=reserve))
    before, after = model_registers(base, machine), model_registers(tight, machine)
    assert tight.ii == base.ii and {r.ops for r in tight.roles} == {r.ops for r in base.roles}
    name = {r.ops: r.name for r in tight.roles}
    for r in base.roles:  # the same roles: the tightened one counts 16 more, the others as before
        assert after[name[r.ops]] == before[r.name] + (16 if r.ops == mma.ops else 0)
    assert ModelOptions.from_recorded(tight.options).role_reserve == reserve
    from twill.schedule import problems
    from twill.verify import verify
    back = Schedule.from_json(tight.to_json())
    assert dict(back.options)["role_reserve"] and problems(back) == [] and verify(back, graph, machine) == []


@needs_nvcc
@pytest.mark.slow
def test_compiles_are_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path))
    compile_cache = tmp_path
    s, machine = fixture("fig1.h100")
    text = emit_cuda(s, machine)
    first = ptxas.compile_kernel(text, machine.arch)
    entries = list(Path(compile_cache, "ptxas").glob("*.json"))
    assert len(entries) == 1
    # the entry is what is read back: a changed entry changes the answer (then restore it)
    saved = entries[0].read_text()
    data = json.loads(saved)
    entries[0].write_text(json.dumps({"rc": 0, "log": data["log"].replace("0 bytes spill stores", "8 bytes spill stores", 1)}))
    assert ptxas.compile_kernel(text, machine.arch).spill_bytes == 8
    entries[0].write_text(saved)
    assert ptxas.compile_kernel(text, machine.arch) == first
    ptxas.compile_kernel(text + "\n// another text\n", machine.arch)
    assert len(list(Path(compile_cache, "ptxas").glob("*.json"))) == 2


def notes(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("ptxas")]


def _emit(args, tmp_path, env=None):
    out = tmp_path / "k.cu"
    result = CliRunner(env=env).invoke(main, ["emit-cuda", *map(str, args), "-o", str(out)])
    return result, out


@needs_nvcc
@pytest.mark.slow
def test_emit_cuda_reports_ptxas_and_no_ptxas_loop_skips_it(tmp_path):
    result, out = _emit([DATA / "fig1.h100.json"], tmp_path)
    assert result.exit_code == 0, result.output
    assert re.search(r"ptxas \(sm_90a\): \d+ registers at launch, no spills, no serialized wgmma", result.output)
    text = out.read_text()
    skipped, again = _emit([DATA / "fig1.h100.json", "--no-ptxas-loop"], tmp_path)
    assert skipped.exit_code == 0 and notes(skipped.output) == []
    assert again.read_text() == text  # a clean kernel: the loop changes nothing, byte for byte


def test_without_nvcc_the_loop_is_skipped_with_one_note(tmp_path, monkeypatch):
    """PATH without nvcc (and neither NVCC nor CUDA_HOME): one line on stderr, not an error, and
    the kernel of --no-ptxas-loop."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("c++", "gcc", "g++", "cc"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bare / tool)
    monkeypatch.setenv("PATH", str(bare))
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    assert ptxas.find_nvcc() is None
    result, out = _emit([DATA / "fig1.h100.json"], tmp_path)
    assert result.exit_code == 0, result.output
    assert notes(result.output) == ["ptxas: skipped: nvcc not found (set NVCC or put nvcc on PATH; --no-ptxas-loop silences this)"]
    text = out.read_text()
    plain, again = _emit([DATA / "fig1.h100.json", "--no-ptxas-loop"], tmp_path)
    assert plain.exit_code == 0 and again.read_text() == text
    quiet, _ = _emit([DATA / "fig1.h100.json", "-q"], tmp_path)
    assert quiet.exit_code == 0 and notes(quiet.output) == []


@needs_nvcc
@pytest.mark.slow
def test_the_loop_does_not_solve_a_stage_1_schedule_again(tmp_path):
    """A schedule without roles (stage 1 alone) that spills is reported, not re-solved: the
    register reserve is a constraint of the joint stage only."""
    s, machine = fixture("gemm_hopper.h100.swp")
    lines = []
    result = run(s, machine, emitter(machine), None, lines.append)
    assert not result.changed and result.schedule == s and len(result.rounds) == 1
    assert any("spill" in line for line in lines) and any("not solved again" in line for line in lines)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.extended  # (12 s; the corpus builds in CI run the same loop)
def test_the_loop_tightens_a_model_that_ptxas_contradicts(tmp_path):
    """At the machine format's default register reserve (8) the model holds both 64x224
    accumulators of tests/data/ptxas/gemm_2x224.tir in one warpgroup (224 + 8 registers of 248);
    ptxas spills there. The loop gives that role's shortfall (from ptxas's own count of the role's
    code) to that role alone, solves again, and emits the clean kernel of two consumer warpgroups,
    the same on a second run."""
    graph = ROOT / "tests" / "data" / "ptxas" / "gemm_2x224.tir"
    plain, first = _emit([graph, "--gpu", "h100", "--register-reserve", "8", "--no-ptxas-loop"], tmp_path)
    assert plain.exit_code == 0, plain.output
    before = first.read_text()
    assert "role mma: 4 warp(s)" in before and "acc0_n, acc1_n" in before
    looped, out = _emit([graph, "--gpu", "h100", "--register-reserve", "8"], tmp_path)
    assert looped.exit_code == 0, looped.output
    lines = notes(looped.output)
    assert re.search(r"kernel<false, false>: \d+ bytes spill stores", lines[0]), lines
    assert re.search(r"role mma \(setmaxnreg \d+, the model counts 232, ptxas \d+ alone\): \d+ bytes spilled", lines[1]), lines
    assert re.match(r"ptxas loop: round 1: role mma \([\w, ]+\) gets 0 -> \d+ registers the model did not see "
                    r"\(it was \d+ registers short", lines[2]), lines
    # round 1 is clean, or clean but for its persistent kernel<true> (the tile loop's registers: then
    # the kernel runs one CTA per tile, ptxas_loop.persistent_worse)
    assert lines[3].startswith("ptxas loop: I = ") and re.search(r"kernel<false, false>: \d+ bytes spill", lines[3]) is None
    assert lines[4].startswith("ptxas loop: emitting round 1") or (
        lines[4].startswith("ptxas: the persistent kernel<true> compiles worse") and "(round 1's schedule)" in lines[4])
    after = out.read_text()
    assert after != before and "role mma0: 4 warp(s)" in after and "role mma1: 4 warp(s)" in after
    report = ptxas.compile_kernel(after, "sm_90a")
    assert report.clean
    again, out2 = _emit([graph, "--gpu", "h100", "--register-reserve", "8"], tmp_path)
    assert again.exit_code == 0 and out2.read_text() == after  # the same input, the same file


def test_a_hidden_ring_position_is_one_call_per_role_for_the_probes():
    """`hidden_position`: kernel<false>'s call goes through an empty asm on the tile's ring position;
    the probes still find each role's calls (one dispatch line each, kernel<true>'s tile loop then kernel<false>),
    and the default form is unchanged (the goldens pin it)."""
    s, machine = fixture("heldout_attn_d64.h200")
    plain = render(build_model(s, machine))
    hidden = render(build_model(s, machine, hidden_position=True))
    assert "twill_one" not in plain and hidden.count('asm volatile("" : "+r"(twill_one.pos));') == 3
    assert ptxas.role_calls(hidden) == ptxas.role_calls(plain) == {"load": 1, "consumer0": 1, "softmax0": 1}
    probe = ptxas.probe_source(hidden, "consumer0")
    assert probe.count("(void)0") == 4 and "role_consumer0<kTail>(sm, tm, args, n, twill_one)" in probe


@pytest.mark.parametrize("rounds, chosen", [
    ([(128, 1012), (128, 496), (128, 16)], 2),   # swiglu_bwd on b200 (64-column tiles): the same I, 16 bytes
    ([(256, 8472), (287, 1480), (287, 1480)], 0),  # swiglu_bwd (128-column tiles): less spill at a longer I
    ([(128, 100), (128, 100)], 0),                 # no better: the first, as the model solved it
    ([(128, 100), (120, 40), (128, 40)], 1),       # equal spill: the shorter I, then the earlier round
])
def test_no_clean_round_emits_the_least_spill_at_no_more_ii(rounds, chosen):
    """ptxas_loop.least_bad: where no round compiles clean, a later round at no more I that spills less
    (its worst instance) is emitted in place of the first schedule; at a longer I the first stays."""
    from dataclasses import replace as with_
    from twill.ptxas_loop import Round, least_bad
    base = Schedule.from_json((DATA / "attention_fwd_hopper.h100.json").read_text())
    history = [Round((), with_(base, ii=ii), "", ptxas.Attribution(ptxas.parse("\n".join(_entry_log("Lb0ELb0E", spill)))))
               for ii, spill in rounds]
    assert least_bad(history) == chosen
