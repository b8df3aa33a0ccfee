#!/usr/bin/env python3
"""Where a tile's time goes in an emitted FA3 forward kernel: clock64 stamps, on the GPU.

    python3 bench/gpu_stamps.py [attention|attention_h200|attention_k192] [N,N,...]

Patches a copy of NAME's kernel (tests/golden/emit/FIXTURE.cu, which is not touched): thread 0 of each
warpgroup of the first 160 CTAs writes clock64() at the phases of every tile (entry, inputs landed, prologue, steady
loop, last windows, after-loop stores) and, in the consumers, after each wait, hand-over and op of
the steady window j = 5. Prints the mean cycles of each phase over CTAs and tiles, and times the
patched kernel next to the committed one (the stamps cost a few percent, and a few spilled
registers). B = 4, H = 32, D = 128. The figures cited by specs/h200.yaml (exp2's latency) and by
docs/gpu-results.md (session 10: the epilogue's divisions) come from this script.
"""
import ctypes
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench as g  # noqa: E402

ROUNDS, SLOTS, CTAS, ROLES = 24, 48, 160, 3  # tiles recorded per CTA, stamps per tile
# stamp k is written at the end of phase PHASES[k] (stamp 0 at the role's entry for the tile)
PHASES = ["", "waiting for the inputs", "prologue", "steady loop", "last windows and epilogue", "after-loop stores",
          "inputs handed back"]
EVENT = re.compile(r"^\s*(twill::(named_sync|named_arrive|wgmma_wait|wgmma_commit|op_\w+)|sm\.ring_\w+\.wait_full)")
WINDOW = 16  # the first slot of the window's events

STAMP = r'''__device__ unsigned long long twill_stamps[%d];
#define STAMP(role, k) do { if (threadIdx.x %% 128 == 0 && blockIdx.x < %d && tile.round < %d) { unsigned long long c_; \
  asm volatile("mov.u64 %%0, %%%%clock64;" : "=l"(c_) :: "memory"); \
  twill_stamps[((blockIdx.x * %d + (role)) * %d + tile.round) * %d + (k)] = c_; } } while (0)
''' % (CTAS * ROLES * ROUNDS * SLOTS, CTAS, ROUNDS, ROLES, ROUNDS, SLOTS)


def _block_end(text, start):
    """Index of the brace closing the block that opens at or after `start`."""
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
        i += 1


def _after_line(text, key, stamp, start=0):
    """Insert `stamp` after the line holding `key` (its first occurrence from start), if any."""
    i = text.find(key, start)
    if i < 0:
        return text
    e = text.index("\n", i)
    return text[:e + 1] + "  " + stamp + "\n" + text[e + 1:]


def patch(src):
    """The kernel's text with the stamps in, and each consumer's window events' labels."""
    t = open(src).read().replace("// ---- shared memory ----", STAMP + "// ---- shared memory ----", 1)
    labels = {}
    for role, fn in enumerate(("role_load", "role_consumer0", "role_consumer1")):
        a = t.index("void %s(" % fn)
        b = _block_end(t, a)
        body = t[a:b]
        body = body[:body.index("{") + 1] + "\n  STAMP(%d, 0);" % role + body[body.index("{") + 1:]
        body = re.sub(r"(twill::mbar_wait\(&sm.inputs_ready\[ib\][^\n]*\n)", r"\1  STAMP(%d, 1);\n" % role, body, count=1)
        body = body.replace("  // ---- steady state", "  STAMP(%d, 2);\n  // ---- steady state" % role, 1)
        body = body.replace("  switch (n - j) {", "  STAMP(%d, 3);\n  switch (n - j) {" % role, 1)
        body = body.replace("  // ---- after the loop", "  STAMP(%d, 4);\n  // ---- after the loop" % role, 1)
        body = re.sub(r"(\n  twill::warp_arrive\(&sm.inputs_free)", "\n  STAMP(%d, 5);\\1" % role, body, count=1)
        body += "  STAMP(%d, 6);\n" % role
        if role:  # the first steady window of the loop: a stamp after each event
            w = body.index("{  // steady window J = j:", body.index("for (; j + 2 <= n; j += 2) {"))
            we = _block_end(body, w)
            lines, out, k = body[w:we].split("\n"), [], WINDOW
            for line in lines:
                out.append(line)
                m = EVENT.match(line)
                if m and k < SLOTS:
                    out.append("      if (j == 5) STAMP(%d, %d);" % (role, k))
                    labels.setdefault(role, []).append(m.group(1).replace("twill::", ""))
                    k += 1
            body = body[:w] + "      if (j == 5) STAMP(%d, %d);\n" % (role, WINDOW - 1) + "\n".join(out) + body[we:]
        t = t[:a] + body + t[b:]
    return t, labels


def main():
    import torch
    name = sys.argv[1] if len(sys.argv) > 1 else "attention"
    sizes = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "2048,8192").split(",")]
    fixture, ns, _, _ = g.KERNELS[name]
    fname = fixture + ".cu"
    build = "/tmp/twill-stamps"
    os.makedirs(build, exist_ok=True)
    text, labels = patch(os.path.join(g.KDIR, fname))
    with open(os.path.join(build, fname), "w") as f:
        f.write(text)
    # the kernel's binding beside the patched copy, its entry point with two more functions
    shutil.copy(os.path.join(g.KDIR, fixture + ".py"), build)
    with open(os.path.join(g.KDIR, fixture + "_entry.cu")) as f:
        entry = f.read()
    nbytes = CTAS * ROLES * ROUNDS * SLOTS * 8
    with open(os.path.join(build, fixture + "_entry.cu"), "w") as f:
        f.write(entry + (r"""
extern "C" int twill_stamps_get(void* dst, size_t bytes) { return (int)cudaMemcpyFromSymbol(dst, NS::twill_stamps, bytes); }
extern "C" int twill_stamps_clear(size_t bytes) { void* p; cudaGetSymbolAddress(&p, NS::twill_stamps); return (int)cudaMemset(p, 0, bytes); }
""").replace("NS::", ns + "::"))
    mod, spills = g.build_binding(fixture, build)
    lib = mod.library(mod.SPEC, mod.HERE)
    print("%s (%s), patched: %s" % (name, fname, "; ".join(spills) or "no spills"))
    stamped, plain = g.TwillAttention(mod), g.TwillAttention(g.build(name)[0])
    for N in sizes:
        BH, D = 128, 128
        q, k, v = (torch.randn(BH, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        o = stamped.outputs(BH, N, D, "cuda")
        flops = 4.0 * BH * N * N * D
        ms0 = g.bench_ms(lambda: plain(q, k, v, o, 0.088))
        ms1 = g.bench_ms(lambda: stamped(q, k, v, o, 0.088))
        lib.twill_stamps_clear(ctypes.c_size_t(nbytes))
        stamped(q, k, v, o, 0.088)
        torch.cuda.synchronize()
        buf = (ctypes.c_ulonglong * (nbytes // 8))()
        lib.twill_stamps_get(buf, ctypes.c_size_t(nbytes))
        a = torch.tensor(list(buf), dtype=torch.float64).view(CTAS, ROLES, ROUNDS, SLOTS)
        seen = a[:, 1, :, 0] > 0
        ctas, rounds = int(seen.any(1).sum()), int(seen.any(0).sum())
        print("\nN = %d: %.1f TFLOP/s committed, %.1f stamped; %d CTAs, %d tiles each recorded, SM clock after: %s MHz"
              % (N, flops / ms0 / 1e9, flops / ms1 / 1e9, ctas, rounds, g.sm_clock_mhz()))
        for role, rname in enumerate(("load", "consumer0", "consumer1")):
            x = a[:ctas, role, :rounds]

            def mean(i, j):
                ok = (x[..., i] > 0) & (x[..., j] > 0)
                return float((x[..., j] - x[..., i])[ok].mean()) if ok.any() else float("nan")
            have = [i for i in range(len(PHASES)) if (x[..., i] > 0).any()]
            row = ", ".join("%s %.0f" % (PHASES[j], mean(i, j)) for i, j in zip(have, have[1:]))
            period = (x[:, 1:, 0] - x[:, :-1, 0])[(x[:, 1:, 0] > 0) & (x[:, :-1, 0] > 0)]
            if period.numel():
                row += "; tile period %.0f" % float(period.mean())
            print("  %-9s cycles: %s" % (rname, row))
            if role in labels:
                ev = labels[role]
                steps = ["%s %.0f" % (ev[i], mean(WINDOW - 1 + i, WINDOW + i)) for i in range(len(ev))]
                print("  %-9s window j = 5 (cycles up to each event): %s; whole window %.0f"
                      % ("", ", ".join(steps), mean(WINDOW - 1, WINDOW - 1 + len(ev))))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
