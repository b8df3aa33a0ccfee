"""Fuzz the twill CLI with malformed inputs: every run must keep the user-facing contract.

    python bench/fuzz.py [--seed 42] [--cases 60] [--jobs 2] [--families tir,yaml,ttgir,schedule,options]
                         [--keep DIR] [--report out.json]

What it does: takes the real inputs in the tree (examples/*.tir, tests/data/**/*.tir, specs/*.yaml,
tests/data/ttgir/**/*.ttgir, tests/data/emit/*.json), mutates each a seeded number of times, and runs the
real `twill` console-script code (`twill_cli.entry.run`) in a subprocess per case, 30 s wall each:

- tir       `twill solve G.tir --gpu h100|b200 --swp-only -o OUT` (every 5th case `emit-cuda G.tir --swp-only
            --no-ptxas-loop -o OUT.cu`, every 8th the full solve with --time-limit 10, every 16th `twill explain
            --time-limit 10`): lines deleted, duplicated, swapped; the file cut at a random byte; numbers replaced
            by 0, -1, 1e30, nan, inf, 2^63, a huge shape; unknown dtypes, opcodes, spaces, attributes; non-UTF-8
            bytes, CRLF, tabs, a BOM, NUL bytes; an empty file; a directory. 40% of the cases are "soft": one
            dimension changed everywhere, a valid dtype or space swapped, so that the graph still parses and the
            solvers and the emitter meet it.
- yaml      `twill solve examples/gemm_hopper.tir --gpu M.yaml --swp-only`: keys deleted, values retyped
            (string, list, map, null, bool), zero/negative/huge/nan capacities and latencies, duplicate keys,
            a list where a map is expected, anchors and aliases, deep nesting, a cut file, tabs.
- ttgir     `twill import K.ttgir -o OUT` (every 6th case `twill solve K.ttgir --swp-only`): truncated, lines
            deleted or duplicated, types, attributes and locations mangled, numbers replaced.
- schedule  `twill emit-cuda S.json -o OUT --no-ptxas-loop`: truncated JSON, fields deleted or retyped, numbers
            replaced, the graph swapped for another kernel's.
- options   option values: --gpu (unknown, empty, a directory, a .tir), --time-limit (-1, 0, nan, inf, 1e400),
            --max-ii 0, --warps -1 and 2^63, --registers 0, --depth 0, --split-rows 0, -o into a missing folder,
            onto a directory, onto the input itself; a schedule or machine file where a graph goes.

Every case pre-creates its output file (-o) with sentinel bytes. A finding is: an exit code outside the
contract's {0, 1, 2, 3}; "Traceback" on stderr (an unhandled exception); a hang past 30 s; exit 2 whose
message names neither the input file nor any FILE:LINE:COL; a failed run (exit 1 or 2) whose sentinel output
changed. Cases are grouped into findings by (family, kind, detail). For tir and ttgir, an exit 2 that names
the file but no line (a whole-file problem: no loop at all) is counted in the summary, not a finding.

Deterministic: the same --seed and --cases give the same cases (random.Random(seed) per family, files in
sorted order). The report (--report) lists each finding with the command line that reproduces it; --keep DIR
keeps every case's input files there.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "import sys; from twill_cli.entry import run; sys.exit(run())"
SENTINEL = b"sentinel: a file the user had\n"
TIMEOUT = 30
CONTRACT = {0, 1, 2, 3}


@dataclass
class Case:
    family: str
    what: str
    files: dict            # name -> bytes (None: a directory)
    argv: list             # with {name} placeholders for files, {out} for the output path
    out: str | None = "out"  # the output's file name (pre-created with SENTINEL), or None
    expect_line: bool = False  # exit 2 must say FILE:LINE:COL of the input named `subject`
    subject: str | None = None


@dataclass
class Result:
    case: Case
    rc: int
    stderr: str
    seconds: float
    findings: list = field(default_factory=list)
    lineless: bool = False  # exit 2 naming the file but no FILE:LINE:COL (where the family has lines)


# -- text mutations ---------------------------------------------------------------------------------

NUMBERS = ["0", "-1", "1e30", "nan", "inf", "-inf", str(2 ** 63), str(2 ** 64 + 1), "1e400", "0.5", "-0",
           "99999999999999999999", "0x10", "1_000"]
DTYPES = ["f17", "f16x", "u8", "float", "i0", "f", "bf16[", "tf32tf32", "f8e4m3fnuz", "i128"]
WORDS = ["nosuchop", "@dram", "@smem@smem", "{bogus = 1}", "{cycles = }", "{unit = nowhere}", "{cycles = nan}",
         "{cycles = 1e30}", "{occupancy = -1}", "{issue = thread}", "{async = maybe}", "{cycles = 1, cycles = 2}",
         "[]", "[,]", "[0]", "[-4]", "[1,,2]", f"[{2 ** 40},{2 ** 40}]", "[128,128,128,128,128,128,128,128,128]",
         "$", "\\", "\"", "'", "=", "==", ":", "::", "@", "@0", "@-1", "@99999999999999999999", "loop {", "}",
         "yield", "kernel", "input", "carry", "#", "\u00e9", "\u200b", "\x00", "\x0c", "\x1b[31m"]
SPECIALS = [b"\xff\xfe", b"\x80", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\r", b"\t", b"\xef\xbb\xbf"]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def m_delete_line(r, data):
    ls = _lines(data)
    del ls[r.randrange(len(ls))]
    return b"\n".join(ls), "delete a line"


def m_duplicate_line(r, data):
    ls = _lines(data)
    i = r.randrange(len(ls))
    ls.insert(i, ls[i])
    return b"\n".join(ls), "duplicate a line"


def m_swap_lines(r, data):
    ls = _lines(data)
    i, j = r.randrange(len(ls)), r.randrange(len(ls))
    ls[i], ls[j] = ls[j], ls[i]
    return b"\n".join(ls), "swap two lines"


def m_cut(r, data):
    n = r.randrange(len(data) + 1)
    return data[:n], f"cut at byte {n}"


def m_number(r, data):
    spots = [m for m in re.finditer(rb"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?(?![\w.])", data)]
    if not spots:
        return data + b"\n0\n", "append a number"
    m = r.choice(spots)
    new = r.choice(NUMBERS).encode()
    return data[:m.start()] + new + data[m.end():], f"number {m.group().decode()} -> {new.decode()}"


def m_dtype(r, data):
    spots = [m for m in re.finditer(rb"\b(f64|f32|tf32|f16|bf16|f8e4m3|f8e5m2|f4|i64|i32|i16|i8|i1)\b", data)]
    if not spots:
        return m_word(r, data)
    m = r.choice(spots)
    new = r.choice(DTYPES).encode()
    return data[:m.start()] + new + data[m.end():], f"dtype {m.group().decode()} -> {new.decode()}"


def m_word(r, data):
    ls = _lines(data)
    i = r.randrange(len(ls))
    line = ls[i]
    pos = r.randrange(len(line) + 1)
    w = r.choice(WORDS).encode()
    ls[i] = line[:pos] + (b" " if r.random() < 0.5 else b"") + w + line[pos:]
    return b"\n".join(ls), f"insert {w!r} in line {i + 1}"


def m_identifier(r, data):
    spots = [m for m in re.finditer(rb"[A-Za-z_][\w.]*", data)]
    if not spots:
        return m_word(r, data)
    m = r.choice(spots)
    new = r.choice([b"zz_undefined", b"9bad", b"", b"a" * 5000, b"loop", b"yield", m.group() + m.group()])
    return data[:m.start()] + new + data[m.end():], f"identifier {m.group()[:20]!r} -> {new[:20]!r}"


def m_bytes(r, data):
    pos = r.randrange(len(data) + 1)
    b = r.choice(SPECIALS)
    return data[:pos] + b + data[pos:], f"insert bytes {b!r} at {pos}"


def m_whitespace(r, data):
    kind = r.choice(["crlf", "tabs", "bom", "cr", "no-newline", "nbsp"])
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n"), "CRLF line ends"
    if kind == "tabs":
        return data.replace(b"  ", b"\t"), "tabs for spaces"
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, "a byte-order mark"
    if kind == "cr":
        return data.replace(b"\n", b"\r"), "CR line ends"
    if kind == "nbsp":
        return data.replace(b" ", "\u00a0".encode(), 3), "non-breaking spaces"
    return data.rstrip(b"\n"), "no final newline"


def m_empty(r, data):
    return r.choice([b"", b"\n", b"   \n\n", b"# only a comment\n", b"\x00" * 64]), "empty or blank"


def m_huge_line(r, data):
    ls = _lines(data)
    i = r.randrange(len(ls))
    ls[i] = ls[i] + b" " + b"x" * r.choice([10_000, 300_000])
    return b"\n".join(ls), f"a huge line at {i + 1}"


def m_repeat(r, data):
    ls = _lines(data)
    i = r.randrange(len(ls))
    ls[i:i + 1] = [ls[i]] * r.choice([50, 2000])
    return b"\n".join(ls), f"line {i + 1} repeated"


SOFT_NUMBERS = ["1", "2", "3", "8", "16", "32", "48", "64", "96", "128", "192", "256", "512", "4096"]
VALID_DTYPES = ["f64", "f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2", "f4", "i64", "i32", "i16", "i8", "i1"]


def m_soft_number(r, data):
    """A number replaced by another plausible one: the graph usually still parses, and the later stages
    (normalization, the solvers, the emitter) meet shapes and attributes nobody wrote."""
    spots = [m for m in re.finditer(rb"(?<![\w.@])\d+(?![\w.])", data)]
    if not spots:
        return data, "no number"
    m = r.choice(spots)
    new = r.choice(SOFT_NUMBERS).encode()
    return data[:m.start()] + new + data[m.end():], f"number {m.group().decode()} -> {new.decode()}"


def m_soft_dtype(r, data):
    spots = [m for m in re.finditer(rb"\b(" + b"|".join(d.encode() for d in VALID_DTYPES) + rb")\b", data)]
    if not spots:
        return data, "no dtype"
    m = r.choice(spots)
    new = r.choice(VALID_DTYPES).encode()
    return data[:m.start()] + new + data[m.end():], f"dtype {m.group().decode()} -> {new.decode()}"


def m_soft_space(r, data):
    spots = [m for m in re.finditer(rb"@(smem|reg|tmem)\b", data)]
    if not spots:
        return data, "no space"
    m = r.choice(spots)
    new = r.choice([b"@smem", b"@reg", b"@tmem"])
    return data[:m.start()] + new + data[m.end():], f"space {m.group().decode()} -> {new.decode()}"


def m_soft_all_numbers(r, data):
    """One dimension changed everywhere it appears (all 128s become 64s): shapes stay consistent, so the graph
    reaches the solvers and the emitter with tiles nobody wrote."""
    found = sorted(set(re.findall(rb"(?<=[\[,])\d+(?=[\],])", data)))
    if not found:
        return data, "no dimension"
    old = r.choice(found)
    new = r.choice([b"16", b"32", b"48", b"64", b"96", b"128", b"192", b"256"])
    return re.sub(rb"(?<=[\[,])" + old + rb"(?=[\],])", new, data), f"every dimension {old.decode()} -> {new.decode()}"


SOFT_MUTATIONS = [m_soft_all_numbers, m_soft_all_numbers, m_soft_all_numbers, m_soft_number, m_soft_dtype, m_soft_space, m_delete_line, m_swap_lines]

TEXT_MUTATIONS = [m_delete_line, m_duplicate_line, m_swap_lines, m_cut, m_number, m_number, m_dtype, m_word,
                  m_word, m_identifier, m_bytes, m_whitespace, m_empty, m_huge_line, m_repeat]


def mutate(r, data, mutations=TEXT_MUTATIONS, rounds=None):
    whats = []
    for _ in range(rounds or r.choice([1, 1, 1, 2, 3])):
        data, what = r.choice(mutations)(r, data)
        whats.append(what)
    return data, "; ".join(whats)


# -- YAML mutations (on the parsed machine, written back; and on the text) -----------------------------

def _paths(node, prefix=()):
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _get(node, path):
    for p in path:
        node = node[p]
    return node


YAML_VALUES = [0, -1, -0.5, 1e30, float("nan"), float("inf"), 2 ** 63, "", "many", None, True, [], [1, 2], {},
               {"a": 1}, "1e400", "2*M*", "M*N*K*elements*bytes*1e300", "(((", "1/0", "elements - elements",
               "__import__('os')", 0.0001, "0x10"]


def yaml_mutation(r, data: bytes):
    import yaml
    doc = yaml.safe_load(data)
    kind = r.choice(["delete", "retype", "retype", "retype", "rename", "text", "dup", "anchor", "nest",
                     "list", "addkey"])
    if kind == "text":
        return mutate(r, data, [m_cut, m_delete_line, m_duplicate_line, m_bytes, m_whitespace, m_word, m_number])
    if kind == "dup":
        ls = _lines(data)
        keyed = [i for i, l in enumerate(ls) if re.match(rb"\s*[A-Za-z_]\w*:", l)]
        i = r.choice(keyed)
        ls.insert(i + 1, ls[i])
        return b"\n".join(ls), f"duplicate key line {i + 1}"
    if kind == "anchor":
        top = [k for k in doc if isinstance(doc[k], dict)]
        k = r.choice(top)
        text = yaml.safe_dump(doc, sort_keys=False)
        text = text.replace(f"\n{k}:", f"\n{k}: &a", 1) if r.random() < 0.5 else text
        text += f"extra: &b [*b]\n" if r.random() < 0.3 else "alias_bomb: &x [1,1,1,1,1,1,1,1,1]\n" \
            "y: &y [*x,*x,*x,*x,*x,*x,*x,*x,*x]\nz: &z [*y,*y,*y,*y,*y,*y,*y,*y,*y]\n"
        return text.encode(), f"anchors/aliases (on {k})"
    if kind == "nest":
        return (b"a:\n" + b"".join(b"  " * i + b"b:\n" for i in range(1, 200)) + b"  " * 200 + b"1\n"
                if r.random() < 0.5 else b"[" * 5000 + b"]" * 5000), "deep nesting"
    paths = [p for p in _paths(doc)]
    path = r.choice(paths)
    parent = _get(doc, path[:-1])
    if kind == "delete":
        del parent[path[-1]]
        what = f"delete {'.'.join(map(str, path))}"
    elif kind == "rename" and isinstance(parent, dict):
        parent[str(path[-1]) + "x"] = parent.pop(path[-1])
        what = f"rename {'.'.join(map(str, path))}"
    elif kind == "list":
        parent[path[-1]] = [parent[path[-1]]]
        what = f"{'.'.join(map(str, path))} as a list"
    elif kind == "addkey" and isinstance(parent, dict):
        parent["bogus_key"] = 1
        what = f"add bogus_key beside {'.'.join(map(str, path))}"
    else:
        v = r.choice(YAML_VALUES)
        parent[path[-1]] = v
        what = f"{'.'.join(map(str, path))} = {v!r}"
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode(), what


# -- JSON schedule mutations ----------------------------------------------------------------------

JSON_VALUES = [None, 0, -1, 1e30, 2 ** 63, "x", "", [], {}, True, 0.5, [1], {"a": 1}, float("nan")]


def json_mutation(r, data: bytes, other_graphs: list[str]):
    doc = json.loads(data)
    kind = r.choice(["text", "delete", "retype", "retype", "retype", "graph", "deepop"])
    if kind == "text":
        return mutate(r, data, [m_cut, m_number, m_bytes, m_delete_line, m_identifier])
    if kind == "graph":
        doc["graph"] = r.choice(other_graphs)
        doc.pop("graph_digest", None) if r.random() < 0.5 else None
        fd = doc.get("field_digests")
        if isinstance(fd, dict) and r.random() < 0.5:
            fd.pop("graph", None)
        return json.dumps(doc, indent=1).encode(), "the graph of another kernel"
    paths = _paths(doc)
    if kind == "deepop":
        paths = [p for p in paths if p and p[0] in ("ops", "warps", "roles")] or paths
    path = r.choice(paths)
    parent = _get(doc, path[:-1])
    if kind == "delete":
        del parent[path[-1]]
        what = f"delete {'.'.join(map(str, path))}"
    else:
        v = r.choice(JSON_VALUES)
        parent[path[-1]] = v
        what = f"{'.'.join(map(str, path))} = {v!r}"
    return json.dumps(doc, indent=1).encode(), what


# -- cases --------------------------------------------------------------------------------------

def _sorted(pattern_root: Path, pattern: str) -> list[Path]:
    return sorted(pattern_root.glob(pattern))


def tir_cases(r, n):
    files = _sorted(ROOT / "examples", "*.tir") + _sorted(ROOT / "tests/data", "**/*.tir")  # (loops in sequence too)
    cases = []
    for k in range(n):
        src = r.choice(files)
        data = src.read_bytes()
        if k % 29 == 28:
            cases.append(Case("tir", "a directory as the graph", {"g.tir": None},
                              ["solve", "{g.tir}", "--gpu", "h100", "--swp-only", "-o", "{out}"], subject="g.tir"))
            continue
        soft = r.random() < 0.4
        new, what = mutate(r, data, SOFT_MUTATIONS if soft else TEXT_MUTATIONS)
        what = ("soft: " if soft else "") + what
        gpu = "b200" if r.random() < 0.3 else "h100"
        if k % 5 == 4:
            argv = ["emit-cuda", "{g.tir}", "--gpu", gpu, "--swp-only", "--no-ptxas-loop", "-o", "{out}.cu"]
            out = "out.cu"
        elif k % 16 == 15:
            argv = ["explain", "{g.tir}", "--gpu", gpu, "--time-limit", "10"]
            out = None
        elif k % 8 == 7:
            argv = ["solve", "{g.tir}", "--gpu", gpu, "--time-limit", "10", "-o", "{out}"]
            out = "out"
        else:
            argv = ["solve", "{g.tir}", "--gpu", gpu, "--swp-only", "-o", "{out}"]
            out = "out"
        cases.append(Case("tir", f"{src.name}: {what}", {"g.tir": new}, argv, out, expect_line=True,
                          subject="g.tir"))
    return cases


def yaml_cases(r, n):
    specs = _sorted(ROOT / "specs", "*.yaml")
    cases = []
    for _ in range(n):
        src = r.choice(specs)
        new, what = yaml_mutation(r, src.read_bytes())
        cases.append(Case("yaml", f"{src.name}: {what}", {"m.yaml": new},
                          ["solve", str(ROOT / "examples/gemm_hopper.tir"), "--gpu", "{m.yaml}", "--swp-only",
                           "-o", "{out}"], subject="m.yaml"))
    return cases


def ttgir_cases(r, n):
    dumps = [p for p in _sorted(ROOT / "tests/data/ttgir", "**/*.ttgir") if p.stat().st_size < 60_000]
    cases = []
    for k in range(n):
        src = r.choice(dumps)
        data = src.read_bytes()
        muts = TEXT_MUTATIONS + [m_loc, m_type, m_type, m_attr]
        new, what = mutate(r, data, muts)
        argv = (["solve", "{k.ttgir}", "--gpu", "h100", "--swp-only", "-o", "{out}"] if k % 6 == 5 else
                ["import", "{k.ttgir}", "-o", "{out}"])
        cases.append(Case("ttgir", f"{src.relative_to(ROOT / 'tests/data/ttgir')}: {what}", {"k.ttgir": new},
                          argv, expect_line=True, subject="k.ttgir"))
    return cases


def m_loc(r, data):
    spots = list(re.finditer(rb"loc\(#?[^)\n]*\)", data))
    if not spots:
        return m_word(r, data)
    m = r.choice(spots)
    new = r.choice([b"loc(", b"loc(#zz)", b"loc(\"a\":1:2)", b"loc(unknown)", b"", b"loc(#loc99999)"])
    return data[:m.start()] + new + data[m.end():], f"location {m.group()[:20]!r} -> {new!r}"


def m_type(r, data):
    spots = list(re.finditer(rb"tensor<[^>\n]*>", data))
    if not spots:
        return m_dtype(r, data)
    m = r.choice(spots)
    new = r.choice([b"tensor<>", b"tensor<128x>", b"tensor<0x64xf16>", b"tensor<-1x64xf16>", b"tensor<128x64xf99>",
                    b"tensor<99999999999999999999x64xf16>", b"tensor<128x64xf16, #nope>", b"tensor<?x64xf16>",
                    b"tensor<128x64xf16", b"i32"])
    return data[:m.start()] + new + data[m.end():], f"type {m.group()[:30]!r} -> {new!r}"


def m_attr(r, data):
    spots = list(re.finditer(rb"\{[^{}\n]*\}", data))
    if not spots:
        return m_word(r, data)
    m = r.choice(spots)
    new = r.choice([b"{", b"{}", b"{a = }", b"{\"ttg.num-warps\" = \"x\"}", b"{x = dense<>}", b"{{}}"])
    return data[:m.start()] + new + data[m.end():], f"attributes {m.group()[:30]!r} -> {new!r}"


def _emits(path: Path) -> bool:
    """Whether emit-cuda accepts the schedule fixture as it is (some are kept for older digests)."""
    p = subprocess.run([sys.executable, "-c", ENTRY, "emit-cuda", str(path), "--no-ptxas-loop", "-q"],
                       capture_output=True, env=dict(os.environ, TWILL_PTXAS_LOOP="0"), timeout=TIMEOUT)
    return p.returncode == 0


def schedule_cases(r, n):
    sched = [p for p in _sorted(ROOT / "tests/data/emit", "*.json") if _emits(p)]  # seeds that are sound now
    graphs = [p.read_text() for p in _sorted(ROOT / "examples", "*.tir")]
    cases = []
    for _ in range(n):
        src = r.choice(sched)
        new, what = json_mutation(r, src.read_bytes(), graphs)
        cases.append(Case("schedule", f"{src.name}: {what}", {"s.json": new},
                          ["emit-cuda", "{s.json}", "-o", "{out}.cu", "--no-ptxas-loop"], out="out.cu",
                          subject="s.json"))
    return cases


def option_cases(r, n):
    g = str(ROOT / "examples/gemm_hopper.tir")
    s = str(ROOT / "tests/data/emit/gemm_hopper.h100.json")
    t = str(sorted((ROOT / "tests/data/ttgir").glob("*.ttgir"))[0])
    table = [
        (["solve", g, "--gpu", "nosuch", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "{d/}", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", g, "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--time-limit", "-1", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--time-limit", "0", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--time-limit", "nan", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--time-limit", "inf", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--time-limit", "1e400", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--max-ii", "0", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--max-ii", "1", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--max-ii", str(2 ** 63), "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--warps", "-1", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--warps", "1", "--time-limit", "10", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--registers", "0", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--depth", "0", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--depth", "100000", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--normalize-bound", "1", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--normalize-bound", str(2 ** 40), "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--split-rows", "0", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--split-rows", "7", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--split-rows", "100000", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--group", ",", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--group", "nosuch,op", "--time-limit", "10", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--loop", "0", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--swp-only", "-o", "{missing/}x.json"], None),
        (["solve", g, "--gpu", "h100", "--swp-only", "-o", "{d/}"], None),
        (["solve", g, "--gpu", "h100", "--swp-only", "-o", g], None),
        (["solve", g, "--swp-only", "-o", "{out}"], None),
        (["solve", "{nosuch.tir}", "--gpu", "h100", "--swp-only", "-o", "{out}"], None),
        (["solve", g, "--gpu", "h100", "--swp-only", "--format", "xml"], None),
        (["explain", g, "--gpu", "h100", "--time-limit", "nan"], None),
        (["explain", g, "--gpu", "h100", "--max-ii", "0"], None),
        (["explain", s, "--gpu", "h100"], None),
        (["emit-cuda", s, "-o", "{d/}", "--no-ptxas-loop"], None),
        (["emit-cuda", s, "-o", "{missing/}k.cu", "--no-ptxas-loop"], None),
        (["emit-cuda", s, "--gpu", "b200", "-o", "{out}", "--no-ptxas-loop"], None),
        (["emit-cuda", s, "--gpu", "nosuch", "-o", "{out}", "--no-ptxas-loop"], None),
        (["emit-cuda", s, "--ctas-per-sm", "0", "-o", "{out}", "--no-ptxas-loop"], None),
        (["emit-cuda", s, "--ctas-per-sm", "64", "-o", "{out}", "--no-ptxas-loop"], None),
        (["emit-cuda", s, "--binding", "torch", "--no-ptxas-loop"], None),
        (["emit-cuda", g, "-o", "{out}", "--no-ptxas-loop"], None),
        (["emit-cuda", "{nosuch.json}", "-o", "{out}", "--no-ptxas-loop"], None),
        (["import", t, "--loop", "-1", "-o", "{out}"], None),
        (["import", t, "--loop", "99", "-o", "{out}"], None),
        (["import", t, "--loop", str(2 ** 63), "-o", "{out}"], None),
        (["import", t, "--split-rows", "0", "-o", "{out}"], None),
        (["import", t, "--split-rows", "3", "-o", "{out}"], None),
        (["import", t, "--grow-rows", "-2", "-o", "{out}"], None),
        (["import", t, "--grow-rows", "1000", "-o", "{out}"], None),
        (["import", g, "-o", "{out}"], None),
        (["import", s, "-o", "{out}"], None),
        (["import", "{d/}", "-o", "{out}"], None),
        (["import", t, "-o", "{d/}"], None),
        (["import", t, "-o", t], None),
        (["plot", g, "--gpu", "h100", "--swp-only", "-o", "{d/}"], None),
        (["calibrate", "{nosuch.json}"], None),
        (["solve", g, "--gpu", "h100", "--warps", str(2 ** 63), "--time-limit", "10", "-o", "{out}"], None),
        (["emit-cuda", s, "--ctas-per-sm", str(2 ** 63), "-o", "{out}", "--no-ptxas-loop"], None),
        (["solve", s, "--gpu", "h100", "--swp-only", "-o", "{out}"], None),
        (["explain", str(ROOT / "specs/h100.yaml"), "--gpu", "h100"], None),
        (["calibrate", "--out", "{missing/}x.yaml"], None),
        (["solve"], None),
        (["nosuchcommand"], None),
    ]
    cases = []
    for k in range(len(table)):  # a fixed table: all of it, whatever --cases
        argv, _ = table[k]
        cases.append(Case("options", " ".join(a if len(a) < 60 else "..." for a in argv), {"d/": None}, argv))
    return cases


FAMILIES = {"tir": tir_cases, "yaml": yaml_cases, "ttgir": ttgir_cases, "schedule": schedule_cases,
            "options": option_cases}


# -- running -------------------------------------------------------------------------------------

def _first_error(err: str) -> str:
    lines = [l for l in err.strip().splitlines() if "error" in l.lower()] or err.strip().splitlines() or [""]
    return lines[0][:300]


def run_case(case: Case, work: Path, index: int) -> Result:
    folder = work / f"c{index:04d}"
    folder.mkdir(parents=True)
    for name, data in case.files.items():
        p = folder / name.rstrip("/")
        if data is None:
            p.mkdir()
        else:
            p.write_bytes(data)
    out = folder / case.out if case.out else None
    if out is not None:
        out.write_bytes(SENTINEL)

    def subst(a):
        for name in case.files:
            a = a.replace("{" + name + "}", str(folder / name.rstrip("/")))
        a = a.replace("{missing/}", str(folder / "missing") + "/")
        a = re.sub(r"\{(nosuch[^}]*)\}", lambda m: str(folder / m.group(1)), a)
        return a.replace("{out}", str(folder / "out"))

    argv = [subst(a) for a in case.argv]
    env = dict(os.environ, TWILL_CACHE_DIR=str(work / "cache"), TWILL_PTXAS_LOOP="0", NO_COLOR="1",
               TMPDIR=str(folder), PYTHONHASHSEED="0")
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", ENTRY, *argv], cwd=folder, env=env, capture_output=True,
                           timeout=TIMEOUT)
        rc, err = p.returncode, p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        rc, err = -9, (exc.stderr or b"").decode("utf-8", "replace")
    res = Result(case, rc, err, time.perf_counter() - t0)
    (folder / "case.txt").write_text(f"{case.family}: {case.what}\ntwill {' '.join(argv)}\nexit {rc}\n{err}")
    res.argv = argv
    if rc == -9:
        res.findings.append(("hang", f"no exit within {TIMEOUT} s"))
    elif rc not in CONTRACT:
        res.findings.append(("exit code", f"exit {rc}"))
    if "Traceback" in err:
        last = [l for l in err.strip().splitlines() if l and not l.startswith(" ")][-1:]
        res.findings.append(("traceback", last[0] if last else "?"))
    if rc == 2 and "Traceback" not in err:
        subject = case.subject and str(folder / case.subject.rstrip("/"))
        if "error" not in err.lower():
            res.findings.append(("no message", err.strip()[-200:]))
        elif subject and subject not in err and not re.search(r"\S+:\d+:\d+: error", err):
            res.findings.append(("no file named", _first_error(err)))
        elif subject and case.expect_line and not re.search(re.escape(subject) + r":\d+:\d+", err):
            res.lineless = True  # the file named, no line: counted, not a finding (a whole-file problem)
    if out is not None and rc in (1, 2) and out.exists() and out.is_file() and out.read_bytes() != SENTINEL:
        res.findings.append(("overwritten", f"{case.out} changed by a failed run (exit {rc})"))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--cases", type=int, default=60, help="cases per family")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--keep", help="keep the cases' folders here")
    ap.add_argument("--report", help="write the findings as JSON here")
    args = ap.parse_args(argv)

    cases = []
    for name in args.families.split(","):
        cases += FAMILIES[name](random.Random(f"{args.seed}:{name}"), args.cases)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="twill-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    t0, cpu0 = time.time(), os.times()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda ic: run_case(ic[1], work, ic[0]), enumerate(cases)))
    cpu1 = os.times()
    groups: dict = {}
    for i, res in enumerate(results):
        for kind, detail in res.findings:
            key = (res.case.family, kind, re.sub(r"/\S*/c\d{4}/", "", detail)[:120])
            groups.setdefault(key, []).append(i)
    codes: dict = {}
    for res in results:
        codes.setdefault(res.case.family, {}).setdefault(res.rc, 0)
        codes[res.case.family][res.rc] += 1
    print(f"{len(cases)} cases in {time.time() - t0:.0f} s wall, "
          f"{cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system:.0f} s CPU "
          f"(children); {sum(r.lineless for r in results)} exit-2 message(s) name the file without a line; "
          f"exit codes per family: {json.dumps({f: dict(sorted(c.items())) for f, c in codes.items()})}")
    report = []
    for (family, kind, detail), idx in sorted(groups.items()):
        first = results[idx[0]]
        print(f"FINDING [{family}] {kind}: {detail}  ({len(idx)} case(s); first: c{idx[0]:04d} {first.case.what})")
        report.append({"family": family, "kind": kind, "detail": detail, "cases": idx, "what": first.case.what,
                       "argv": ["twill", *first.argv], "stderr": first.stderr[-2000:]})
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(report)} finding(s)" if report else "no findings")
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
