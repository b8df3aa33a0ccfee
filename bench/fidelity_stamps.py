"""The clock64 stamps of bench/fidelity.py: a copy of an emitted kernel whose roles write clock64()
at the top of each pass of every steady-state loop, and the reading of what they wrote.

Each role's function (`void role_X(Smem& sm, ..., const twill::TileIdx& tile)`) gets, before each of
its steady loops (`for (; j < n; ++j)` or `for (; j + U <= n; j += U)`, U iterations a pass), a pass
counter, and at the top of the loop's body a stamp: the first thread of the role (lane 0 of its
first warp: threadIdx.x a multiple of 32 x the role's warps) of each of the first CTAS CTAs writes
the SM's clock64 into twill_fid[cta][role][loop][pass], on the CTA's first tile only (`tile.round ==
0`: a persistent kernel's first tile, a CTA-per-tile kernel's one tile), passes past SLOTS left out.
"""
import re
import statistics

from gpu_stamps import _block_end as block_end

CTAS, ROLES, LOOPS, SLOTS = 132, 8, 4, 64
ROLE = re.compile(r"__device__ __forceinline__ void (role_\w+)\(")
STEADY = re.compile(r"\n(\s*)for \(; (j[^;]*); (\+\+j|j \+= (\d+))\) \{\n")
WORDS = CTAS * ROLES * LOOPS * SLOTS  # unsigned long long each

STAMP = r'''__device__ unsigned long long twill_fid[%d];
#define FID_STAMP(role, loop, warps, k) do { if (threadIdx.x %% (32 * (warps)) == 0 && blockIdx.x < %d && tile.round == 0 && (k) < %d) { \
  unsigned long long c_; asm volatile("mov.u64 %%0, %%%%clock64;" : "=l"(c_) :: "memory"); \
  twill_fid[((blockIdx.x * %d + (role)) * %d + (loop)) * %d + (k)] = c_; } } while (0)
''' % (WORDS, CTAS, SLOTS, ROLES, LOOPS, SLOTS)

ENTRY = ('\nextern "C" int fid_get(void* dst, size_t n) { return (int)cudaMemcpyFromSymbol(dst, NS::twill_fid, n); }'
         '\nextern "C" int fid_clear(size_t n) { void* p; cudaGetSymbolAddress(&p, NS::twill_fid); '
         'return (int)cudaMemset(p, 0, n); }\n')


def roles(text):
    """(name, start, end) of each role's device function, in the file's order."""
    return [(m.group(1), m.start(), block_end(text, m.start())) for m in ROLE.finditer(text)]


def stamped(text, warps=None):
    """The kernel with a stamp at the top of each pass of every steady loop of every role, and per
    role (in the file's order) the iterations per pass of each of its loops. `warps`: the warps of
    each role by its short name (the schedule's; 4, a warpgroup, where not given)."""
    if "// ---- shared memory ----" not in text:
        raise ValueError("not an emitted kernel: no '// ---- shared memory ----' line")
    t = text.replace("// ---- shared memory ----", STAMP + "// ---- shared memory ----", 1)
    found = roles(t)
    if len(found) > ROLES:
        raise ValueError("%d roles: the stamps have room for %d" % (len(found), ROLES))
    steps = []
    for index, (name, _, _) in enumerate(found):
        a = t.index("void %s(" % name)
        b = block_end(t, a)
        body, role_steps = t[a:b], []
        every = (warps or {}).get(name.removeprefix("role_"), 4)
        pos = 0
        while (m := STEADY.search(body, pos)) is not None:
            loop = len(role_steps)
            if loop >= LOOPS:
                raise ValueError("%s: more than %d steady loops" % (name, LOOPS))
            role_steps.append(int(m.group(4) or 1))
            ind = m.group(1)
            new = "\n%sint fid_pass%d = 0;\n%sfor (; %s; %s) {\n%s  FID_STAMP(%d, %d, %d, fid_pass%d); ++fid_pass%d;\n" % (
                ind, loop, ind, m.group(2), m.group(3), ind, index, loop, every, loop, loop)
            body = body[:m.start()] + new + body[m.end():]
            pos = m.start() + len(new)
        steps.append(role_steps)
        t = t[:a] + body + t[b:]
    return t, steps


def entry_with_reader(entry, text):
    """The binding's entry .cu with fid_get / fid_clear, which copy and clear the stamps."""
    ns = next(n for n in re.findall(r"namespace (\w+) \{", text) if n != "twill")  # the kernel's own
    return entry + ENTRY.replace("NS::", ns + "::")


def per_role(words, names, steps, skip=2):
    """Each role's cycles per iteration from the stamps (`words`: the whole twill_fid array): for
    each loop, the differences of consecutive passes past the first `skip` of every CTA, divided by
    the loop's iterations per pass; the role's figure is its loop with the most such differences
    (its main loop): median, min, 99th percentile, count, and which loop."""
    out = {}
    for index, (name, loops) in enumerate(zip(names, steps)):
        best = None
        for loop, step in enumerate(loops):
            diffs = []
            for cta in range(CTAS):
                base = ((cta * ROLES + index) * LOOPS + loop) * SLOTS
                xs = [w for w in words[base:base + SLOTS] if w]
                diffs += [(y - x) / step for x, y in zip(xs[skip:], xs[skip + 1:])]
            if diffs and (best is None or len(diffs) > best["n"]):
                qs = sorted(diffs)
                best = {"median": statistics.median(qs), "min": qs[0], "p99": qs[max(0, int(0.99 * len(qs)) - 1)],
                        "n": len(qs), "loop": loop, "loops": len(loops)}
        if best:
            out[name.removeprefix("role_")] = best
    return out
