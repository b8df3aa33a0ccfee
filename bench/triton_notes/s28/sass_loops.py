"""Loops of one SASS function: backward branches; count instructions, HGMMA, uniform-pipe ops per loop."""
import re, sys, collections
text = open(sys.argv[1]).read()
fn = int(sys.argv[2]) if len(sys.argv) > 2 else 0
funcs = re.split(r"\n\s*Function : ", text)[1:]
body = funcs[fn]
ins = []
for line in body.splitlines():
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).strip()))
addr = {a: i for i, (a, _) in enumerate(ins)}
for i, (a, s) in enumerate(ins):
    m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", s)
    if not m: continue
    t = int(m.group(1), 16)
    if t > a or t not in addr: continue
    loop = ins[addr[t]:i + 1]
    ops = [re.sub(r"^@!?U?P\w+\s+", "", s).split()[0] for _, s in loop]
    mn = [o.split(".")[0] for o in ops]
    c = collections.Counter(mn)
    if c["HGMMA"] == 0 and len(loop) < 30: continue
    uni = sum(v for k, v in c.items() if k.startswith("U") or k in ("R2UR", "S2UR", "VOTEU"))
    print(f"loop {t:#x}-{a:#x}: {len(loop)} instrs, HGMMA {c['HGMMA']}, uniform {uni}, WARPGROUP {c['WARPGROUP']}, BAR {c['BAR']}, SYNCS {sum(v for k,v in c.items() if k.startswith('SYNCS'))}")
    if len(sys.argv) > 3: print("  ", sorted(c.items(), key=lambda kv: -kv[1])[:40])
