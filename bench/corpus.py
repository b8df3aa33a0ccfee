"""A generated corpus of tile-loop graphs for the solver benchmark: graphs nobody tuned the solver on.

    python bench/corpus.py [--list] [--write DIR]

Every case is made by a function of (its parameters, a seed) and is the same on every run: the
random families draw from `random.Random(seed)`, the structured ones are written from their
parameters and sub-tiled by `twill.split.split_rows` (1 to 4 ways). Families:

- `random`: layered DAGs (10-150 ops) over the tensor, SFU and ALU units and TMA loads, with
  loop-carried edges (carries, and `NAME@D` reads of earlier iterations), explicit cycle counts;
- `attn_fwd`, `attn_bwd`: FlashAttention forward / backward tiles of M rows, sub-tiled;
- `gemm_chain`: chains of 1-3 GEMMs with conversions between them (an MLP), sub-tiled;
- `fa4`: Blackwell forward with S, P and O in tensor memory, sub-tiled in 128-row parts (FA4's
  load, MMA, softmax-per-part and correction roles are one optimal answer);
- `mixed_units`: the above on machines with units of capacity 2-4;
- `tmem`: Blackwell GEMMs accumulating in tensor memory with an epilogue.

A case is (name, family, gpu, seed, tir text, machine: a bundled name or YAML text). The machine
variants are the bundled spec with its `units:` lines changed.
"""
from __future__ import annotations

import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUS = ("h100", "h200", "b200")


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    gpu: str  # the bundled spec it starts from
    seed: int
    tir: str
    units: tuple[tuple[str, int], ...] = ()  # unit capacities changed from the spec's

    def machine_yaml(self) -> str:
        text = (ROOT / "specs" / f"{self.gpu}.yaml").read_text()
        for unit, cap in self.units:
            text, n = re.subn(rf"^(\s+{unit}:\s*)\d+", rf"\g<1>{cap}", text, count=1, flags=re.M)
            assert n == 1, (self.gpu, unit)
        return text

    def ops(self) -> int:
        from twill.tir import parse_tir
        return len(parse_tir(self.tir, self.name).ops)


# -- random layered DAGs ------------------------------------------------------------------------

def random_dag(n: int, seed: int) -> str:
    """n ops in layers of 2-6; each op reads 1-2 ops of earlier layers (or a load), some read a carry
    or an op of an earlier iteration (`NAME@D`); a few results are yielded to carries."""
    rng = random.Random(seed)
    kinds = [("mma", "tensor"), ("exp2", "sfu"), ("max", "alu"), ("add", "alu"), ("mul", "alu")]
    lines = [f"kernel random_{n}_{seed}", "input w : f16[64,64] @smem"]
    carries = [f"c{i}" for i in range(max(1, n // 12))]
    lines += [f"carry {c} : f32[64,64] = 0" for c in carries]
    lines.append("loop {")
    body, layers, made = [], [], 0
    loads = []
    while made < n:
        width = min(rng.randint(2, 6), n - made)
        layer = []
        for _ in range(width):
            name = f"o{made}"
            if not layers or (rng.random() < 0.12 and len(loads) < 4):
                body.append(f"  {name} = load : f16[64,64] @smem")
                loads.append(name)
            else:
                pool = [x for lay in layers[-3:] for x in lay]
                operands = rng.sample(pool, min(len(pool), rng.choice((1, 1, 2))))
                if rng.random() < 0.15:
                    operands.append(rng.choice(carries))
                elif rng.random() < 0.08 and made > 4:
                    operands.append(f"o{rng.randrange(made)}@{rng.randint(1, 2)}")
                opcode, _unit = rng.choice(kinds)
                if opcode == "mma":
                    operands = operands[:1] + ["w"] + operands[1:2]
                elif len(operands) == 3:  # the vocabulary's ternary forms: fma on the ALU, exp2 takes two
                    opcode, operands = ("fma", operands) if opcode != "exp2" else (opcode, operands[:1] + operands[2:])
                cycles = rng.choice((1, 2, 4, 8, 16, 32)) * rng.randint(1, 3)
                body.append(f"  {name} = {opcode} {', '.join(operands)} : f32[64,64] {{cycles = {cycles}}}")
            layer.append(name)
            made += 1
        layers.append(layer)
    computed = [x for lay in layers for x in lay if x not in loads]
    targets = rng.sample(computed[len(computed) // 2:], min(len(carries), len(computed) - len(computed) // 2))
    targets += [computed[-1]] * (len(carries) - len(targets))
    lines += body
    lines.append("  yield " + ", ".join(f"{c} = {t}" for c, t in zip(carries, targets)))
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- structured families ------------------------------------------------------------------------

def attn_fwd(m: int, d: int, space: str = "reg") -> str:
    """FlashAttention forward over K/V tiles of 128 keys; with space = tmem, S, P and O live in
    tensor memory (Blackwell, as FA4)."""
    t = " @tmem" if space == "tmem" else ""
    return f"""kernel attn_fwd_m{m}_d{d}{'_tmem' if t else ''}
input q   : f16[{m},{d}] @smem
carry m   : f32[{m}]     = -inf
carry l   : f32[{m}]     = 0
carry acc : f32[{m},{d}]{t} = 0
loop {{
  k     = load               : f16[128,{d}] @smem
  v     = load               : f16[128,{d}] @smem
  s     = mma q, k           : f32[{m},128]{t}
  m_new = rowmax s, m        : f32[{m}]
  p     = exp2 s, m_new      : f16[{m},128]{t}
  alpha = exp2 m, m_new      : f32[{m}]
  l_new = rowsum p, l, alpha : f32[{m}]
  acc_r = rescale acc, alpha : f32[{m},{d}]{t}
  acc_n = mma p, v, acc_r    : f32[{m},{d}]{t}
  yield m = m_new, l = l_new, acc = acc_n
}}
"""


def attn_bwd(m: int, d: int, parts: int = 1) -> str:
    """FlashAttention backward, FA3's shape: a CTA owns `parts` tiles of 128 keys (sub-tiled along
    the keys, the way the backward splits: its dK, dV rows are keys) and iterates over query tiles of
    m rows; the parts' dQ contributions are summed and stored."""
    lines = [f"kernel attn_bwd_m{m}_d{d}_x{parts}"]
    for j in range(parts):
        lines += [f"input k{j} : f16[128,{d}] @smem", f"input v{j} : f16[128,{d}] @smem"]
    for j in range(parts):
        lines += [f"carry dk{j} : f32[128,{d}] = 0", f"carry dv{j} : f32[128,{d}] = 0"]
    lines += ["loop {", f"  q = load : f16[{m},{d}] @smem", f"  do = load : f16[{m},{d}] @smem",
              f"  lse = load : f32[{m}] @smem", f"  dlt = load : f32[{m}] @smem"]
    for j in range(parts):
        lines += [f"  s{j} = mma q, k{j} : f32[{m},128]",
                  f"  p{j} = exp2 s{j}, lse : f16[{m},128]",
                  f"  dp{j} = mma do, v{j} : f32[{m},128]",
                  f"  ds{j} = sub dp{j}, dlt, p{j} : f16[{m},128]",
                  f"  dv{j}_n = mma p{j}, do, dv{j} : f32[128,{d}] {{transpose_a = true}}",
                  f"  dq{j} = mma ds{j}, k{j} : f32[{m},{d}]",
                  f"  dk{j}_n = mma ds{j}, q, dk{j} : f32[128,{d}] {{transpose_a = true}}"]
    total = "dq0"
    for j in range(1, parts):
        lines.append(f"  dqs{j} = add {total}, dq{j} : f32[{m},{d}]")
        total = f"dqs{j}"
    lines += [f"  store {total}",
              "  yield " + ", ".join(f"dk{j} = dk{j}_n, dv{j} = dv{j}_n" for j in range(parts)), "}"]
    return "\n".join(lines) + "\n"


def gemm_chain(m: int, depth: int, space: str = "reg") -> str:
    """An MLP-like chain: x = A W1, converted, times W2, ..., accumulated over the K loop."""
    t = " @tmem" if space == "tmem" else ""
    lines = [f"kernel gemm_chain_m{m}_x{depth}{'_tmem' if t else ''}"]
    lines += [f"input w{j} : f16[128,128] @smem" for j in range(1, depth)]
    lines += [f"carry acc : f32[{m},128]{t} = 0", "loop {",
              f"  a  = load : f16[{m},64] @smem", "  b  = load : f16[64,128] @smem"]
    prev = "a"
    for j in range(1, depth):
        src_b = "b" if j == 1 else f"w{j - 1}"
        lines.append(f"  s{j} = mma {prev}, {src_b} : f32[{m},128]")
        lines.append(f"  h{j} = convert s{j} : f16[{m},128]")
        prev = f"h{j}"
    last_b = "b" if depth == 1 else f"w{depth - 1}"
    lines += [f"  acc_n = mma {prev}, {last_b}, acc : f32[{m},128]{t}", "  yield acc = acc_n", "}"]
    return "\n".join(lines) + "\n"


def split(tir: str, parts: int, name: str) -> str:
    from twill.split import split_rows
    from twill.tir import parse_tir, print_tir
    return print_tir(split_rows(parse_tir(tir, name), parts))


def cases() -> list[Case]:
    """The corpus, in a fixed order."""
    out: list[Case] = []
    for i, n in enumerate((10, 12, 15, 18, 20, 24, 28, 32, 40, 48, 60, 75, 90, 110, 130, 150)):
        gpu = GPUS[i % 3]
        out.append(Case(f"random_n{n}_s{i}", "random", gpu, i, random_dag(n, i)))
    for m, d, parts, gpu in ((128, 128, 2, "h100"), (128, 128, 2, "h200"), (128, 64, 2, "b200"),
                             (256, 128, 2, "h100"), (256, 64, 4, "h200"), (256, 128, 4, "b200"),
                             (192, 64, 3, "b200"), (256, 64, 4, "h100")):
        out.append(Case(f"attn_fwd_m{m}_d{d}_x{parts}_{gpu}", "attn_fwd", gpu, 0,
                        split(attn_fwd(m, d), parts, "attn_fwd")))
    for m, d, parts, gpu in ((64, 128, 1, "h100"), (64, 128, 2, "h200"), (64, 64, 2, "b200"),
                             (64, 64, 4, "h100"), (128, 64, 3, "b200"), (64, 64, 1, "h200")):
        out.append(Case(f"attn_bwd_m{m}_d{d}_x{parts}_{gpu}", "attn_bwd", gpu, 0, attn_bwd(m, d, parts)))
    for m, depth, parts, gpu in ((128, 3, 2, "h100"), (256, 2, 4, "h200"), (128, 4, 2, "b200"),
                                 (256, 3, 4, "h100"), (192, 3, 3, "h200"), (256, 4, 4, "b200")):
        out.append(Case(f"gemm_chain_m{m}_x{depth}_p{parts}_{gpu}", "gemm_chain", gpu, 0,
                        split(gemm_chain(m, depth), parts, "gemm_chain")))
    for parts, d in ((2, 128), (2, 64), (3, 64)):
        out.append(Case(f"fa4_p{parts}_d{d}", "fa4", "b200", 0,
                        split(attn_fwd(128 * parts, d, "tmem"), parts, "fa4")))
    for tir, units, gpu, tag in ((split(attn_fwd(128, 128), 2, "a"), (("alu", 2),), "h100", "fwd_alu2"),
                                 (split(attn_fwd(128, 128), 2, "a"), (("sfu", 2), ("alu", 4)), "h200", "fwd_sfu2_alu4"),
                                 (attn_bwd(64, 64, 2), (("tensor", 2),), "h100", "bwd_tensor2"),
                                 (random_dag(30, 101), (("alu", 2), ("sfu", 2)), "b200", "random30_alu2_sfu2"),
                                 (random_dag(60, 102), (("tensor", 2), ("alu", 3)), "h100", "random60_tensor2_alu3")):
        out.append(Case(f"mixed_{tag}", "mixed_units", gpu, 101 if "30" in tag else 102 if "60" in tag else 0,
                        tir, units))
    for m, depth, parts in ((256, 3, 2), (384, 2, 3), (256, 2, 4)):
        out.append(Case(f"tmem_gemm_m{m}_x{depth}_p{parts}", "tmem", "b200", 0,
                        split(gemm_chain(m, depth, "tmem"), parts, "tmem_gemm")))
    return out


def write(directory: Path) -> list[tuple[Case, Path, Path]]:
    """Each case as DIR/NAME.tir and DIR/NAME.yaml (the machine)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for c in cases():
        tir, yaml = directory / f"{c.name}.tir", directory / f"{c.name}.yaml"
        tir.write_text(c.tir)
        yaml.write_text(c.machine_yaml())
        out.append((c, tir, yaml))
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if len(sys.argv) > 2 and sys.argv[1] == "--write":
        for c, tir, _ in write(Path(sys.argv[2])):
            print(c.name, c.family, c.gpu, c.ops(), tir)
    else:
        for c in cases():
            print(f"{c.name:40} {c.family:12} {c.gpu:5} seed={c.seed:<4} ops={c.ops()}")
