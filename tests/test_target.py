"""emit-cuda's targets: what differs between architectures lives in twill/emit/target.py only."""
from __future__ import annotations

import ast
from dataclasses import FrozenInstanceError, fields
from pathlib import Path

import pytest

from twill.emit import fragments, ops
from twill.emit.target import SM90, SM100, TARGETS, Target, target_for

EMIT = Path(__file__).resolve().parent.parent / "twill" / "emit"
ARCH_WORDS = ("sm_9", "sm_10", "sm9", "sm10", "hopper", "blackwell")


def _arch_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower().startswith(ARCH_WORDS)


def _arch_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """Where code decides on the architecture by name: an attribute or name `blackwell`/`hopper`,
    `.arch` or an arch name compared, a `startswith` on one, an arch name as an if-expression's test."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.lower() in ("blackwell", "hopper"):
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Name) and node.id.lower() in ("blackwell", "hopper"):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(_arch_string(p) for p in parts) or any(isinstance(p, ast.Attribute) and p.attr == "arch"
                                                          for p in parts):
                found.append((node.lineno, "comparison with an arch"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith")
              and (any(_arch_string(a) for a in node.args)
                   or isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "arch")):
            found.append((node.lineno, "startswith on an arch"))
    return found


def test_no_architecture_branch_outside_the_targets():
    """Every per-architecture choice of the emitter is a field or a table of its Target."""
    files = sorted(p for p in EMIT.glob("*.py") if p.name != "target.py")
    assert len(files) > 10
    found = {p.name: _arch_branches(ast.parse(p.read_text(encoding="utf-8"))) for p in files}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_scan_finds_the_branches_it_forbids():
    code = ("if m.blackwell: pass\n"
            "x = a if arch.startswith('sm_100') else b\n"
            "y = model.arch == 'sm_90a'\n")
    assert sorted(line for line, _ in _arch_branches(ast.parse(code))) == [1, 2, 3]


def test_targets_are_frozen_and_chosen_from_the_arch():
    assert target_for("sm_90a") is SM90 and target_for("sm_100a") is SM100
    assert target_for("sm_80") is None and target_for("") is None
    with pytest.raises(FrozenInstanceError):
        SM90.tensor_memory = True  # type: ignore[misc]
    assert len({t.arch for t in TARGETS}) == len(TARGETS)
    # The two differ in some fact (else one target would do).
    assert [f.name for f in fields(Target) if getattr(SM90, f.name) != getattr(SM100, f.name)]


def test_every_target_has_its_tables_and_headers():
    from importlib.resources import files
    for t in TARGETS:
        assert t.arch in ops.EMITTERS and t.arch in fragments.FRAGMENTS and t.arch in fragments.VIEWS
        for header in (t.runtime, t.mma8_runtime, *t.vocab_runtime):
            assert files("twill.emit").joinpath("cuda_runtime", header).is_file(), header


def test_the_templates_are_packaged():
    """Every file emit-cuda reads from cuda_runtime/ (headers and templates) is in setup.cfg's
    package_data, so an installed copy has it."""
    import configparser
    from fnmatch import fnmatch
    cfg = configparser.ConfigParser()
    cfg.read(EMIT.parent.parent / "setup.cfg")
    patterns = [p.strip() for p in cfg["options.package_data"]["twill.emit"].replace(",", "\n").split()]
    shipped = sorted(p.name for p in (EMIT / "cuda_runtime").iterdir())
    assert {"host.tpl", "main.tpl", "kernel.tpl"} <= set(shipped)
    assert [n for n in shipped if not any(fnmatch(f"cuda_runtime/{n}", pat) for pat in patterns)] == []


def test_fill_checks_holes_and_values():
    from twill.emit.template import fill
    text = fill("main.tpl", ns="k", iters="8", inputs=["a;", "", "b;"], checksums=[])
    assert "  k::Problem p;" in text and "    p.iters = 8;" in text and "\n  a;\n\n  b;\n" in text
    assert "{{" not in text and "checksum" not in text.split("ms per launch")[1]
    with pytest.raises(KeyError):
        fill("main.tpl", ns="k", iters="8", inputs=[])  # a hole without a value
    with pytest.raises(KeyError):
        fill("main.tpl", ns="k", iters="8", inputs=[], checksums=[], extra="x")  # a value without a hole
