"""One row a program (rowprog.py): the online softmax's pair of [BLOCK] carries, a running max and a
rescaled sum, combined after the loop (docs/ttgir-import.md, section 8, "The online pair").

The kernel carries, for each of the BLOCK columns j, the pair (m_j, d_j) of the elements s it has seen
in column j: m_j = max s, d_j = sum exp(s - m_j). Each iteration combines the pair with the one of its
element x_j, (x_j, 1):

    m_new = max(m, x);  d = d * exp(m - m_new) + exp(x - m_new);  m = m_new

and after the loop combines the BLOCK pairs into the row's: M = max(m); D = sum(d * exp(m - M)). With
(m1, d1) (+) (m2, d2) = (M, d1 exp(m1 - M) + d2 exp(m2 - M)), M = max(m1, m2), the pair of a union of
multisets is the combine of their pairs, so (+) is associative and commutative and both the loop's
updates and the combine after it are folds of (+) over the row's elements: the row's pair is the fold
in any order. The 64-rows-a-CTA kernel folds each column tile's pair into a [64] row carry instead:

    m_new = max(m, rowmax(x));  d = d * exp(m - m_new) + rowsum(exp(x - m_new));  m = m_new

(the tile's pair is (t, sum exp(x - t)), t = rowmax(x), and (M, D) (+) (t, sum exp(x - t)) is that
update), and M, D are the carries themselves. exp2 in place of exp is the same with base 2.

The pair is recognized by its dataflow alone: a [BLOCK] carry reduced after the loop by a max and read
after the loop by the combine too. Near misses are refused at the op where they part from the form: a
rescale by another exponent, exp and exp2 mixed, the running max read elsewhere in the loop, a combine
after the loop that is not the pair's fold, a carry starting at other than (-inf, 0).
"""
from __future__ import annotations

from .parser import MOp
from .rowprog import COMBINERS, Refuse, Rewrite, walk_ops

MAXES = ("arith.maxnumf", "arith.maximumf")
EXPS = ("math.exp", "math.exp2")
FORM = ("m_new = max(m, x); d = d * exp(m - m_new) + exp(x - m_new) in the loop, M = max(m); "
        "D = sum(d * exp(m - M)) after it")


def _other(op: MOp, name: str) -> str | None:
    """The operand of a two-operand op other than `name` (None where `name` is not one of them)."""
    names = [n for n, _ in op.operands()]
    if len(names) != 2 or name not in names:
        return None
    return names[1] if names[0] == name and names[1] != name else names[0] if names[1] == name else None


class _Form:
    def __init__(self, rw: Rewrite, where: MOp):
        self.rw, self.where = rw, where

    def fail(self, op: MOp | None, why: str) -> Refuse:
        return Refuse(op or self.where, f"an online softmax's pair of [BLOCK] carries (a running max and a sum it "
                                        f"rescales): {why}; the pair is imported in the form {FORM}")

    def only(self, uses: dict, name: str, what: str, at: MOp) -> MOp:
        readers = uses.get(name, [])
        if len(readers) != 1:
            extra = next((u for u in readers if u is not at), None) if readers else None
            raise self.fail(extra if len(readers) > 1 else at, f"'%{name}' ({what}) is read {len(readers)} times, "
                                                                "where the form reads it once")
        return readers[0]


def pair_carries(rw: Rewrite, loop: MOp, pairs, yields, inner: dict) -> set[str]:
    """Mark each online pair of the loop (rw.reduced, rw.updates, rw.skip, rw.folded); the carry args taken."""
    taken: set[str] = set()
    args = [a for a, _ in pairs]
    defs = {r: o for o in walk_ops(loop.body()) for r in o.results}
    for k, ((a, init), y) in enumerate(zip(pairs, yields)):
        res = loop.results[k] if k < len(loop.results) else None
        after = rw.uses.get(res, [])
        reds = [u for u in after if u.name == "tt.reduce"]
        if len(after) < 2 or len(reds) != 1 or rw.kind.get(rw.rename.get(init, init)) != 2:  # 2: C, a [BLOCK] value
            continue
        comb = next(iter(walk_ops(reds[0].body())), None)
        if comb is None or comb.name not in MAXES:
            continue
        f = _Form(rw, reds[0])
        taken |= _pair(rw, f, loop, pairs, yields, inner, defs, args, k, reds[0])
    return taken


def _pair(rw, f: _Form, loop, pairs, yields, inner, defs, args, k, red_m) -> set[str]:
    a_m, init_m = pairs[k]
    y_m = yields[k]
    res_m = loop.results[k]
    upd = defs.get(y_m)
    if upd is None or upd.name not in MAXES or _other(upd, a_m) is None:
        raise f.fail(upd, f"the loop yields for the running max '%{a_m}' other than max('%{a_m}', x)")
    x = _other(upd, a_m)
    # in the loop: m is read by its update and by the rescale's exponent m - m_new alone
    readers = [u for u in inner.get(a_m, []) if u is not upd]
    if len(readers) != 1 or readers[0].name != "arith.subf" or [n for n, _ in readers[0].operands()] != [a_m, y_m]:
        bad = next((u for u in readers if u.name != "arith.subf" or [n for n, _ in u.operands()] != [a_m, y_m]), upd)
        raise f.fail(bad, f"the running max '%{a_m}' is read in the loop other than by its update and the rescale's "
                          f"exponent '%{a_m} - %{y_m}'")
    sub_a = readers[0]
    exp_a = f.only(inner, sub_a.results[0], "the rescale's exponent", sub_a)
    if exp_a.name not in EXPS:
        raise f.fail(exp_a, f"the rescale's exponent is read by '{exp_a.name}', not exp or exp2")
    scale = f.only(inner, exp_a.results[0], "the rescale", exp_a)
    a_d = _other(scale, exp_a.results[0]) if scale.name == "arith.mulf" else None
    if a_d not in args or a_d == a_m:
        raise f.fail(scale, "the rescale exp(m - m_new) multiplies no other carry of the loop")
    kd = args.index(a_d)
    res_d, y_d, init_d = loop.results[kd], yields[kd], pairs[kd][1]
    f.only(inner, a_d, "the rescaled carry", scale)
    add = f.only(inner, scale.results[0], "the rescaled sum", scale)
    if add.name != "arith.addf" or add.results != (y_d,) or [u.name for u in inner.get(y_d, [])] != ["scf.yield"]:
        raise f.fail(add, "the rescaled sum is not the carry's update d = d * exp(m - m_new) + exp(x - m_new)")
    exp_b = defs.get(_other(add, scale.results[0]))
    if exp_b is None or exp_b.name not in EXPS:
        raise f.fail(add, "the rescaled sum adds other than an exponential of x - m_new")
    if exp_b.name != exp_a.name:
        raise f.fail(exp_b, f"'{exp_b.name}' of x - m_new with '{exp_a.name}' of the rescale: the two exponentials "
                            "must be of one base")
    sub_b = defs.get(next(n for n, _ in exp_b.operands()))
    if sub_b is None or sub_b.name != "arith.subf" or [n for n, _ in sub_b.operands()] != [x, y_m]:
        raise f.fail(sub_b or exp_b, f"the exponential added is not of '%{x} - %{y_m}' (x - m_new: the element the max "
                                     "takes in, less the new max)")
    for o in (sub_b, exp_b):
        f.only(inner, o.results[0], "a term of the sum", o)
    extra = [u for u in inner.get(y_m, []) if u not in (sub_a, sub_b) and u.name != "scf.yield"]
    if extra:
        raise f.fail(extra[0], f"the new running max '%{y_m}' is read in the loop other than by the rescale and the "
                               "sum's exponent (its value is the max of the column so far, not of the row)")
    # where the pair starts: (-inf, 0), the combine's identity
    for a, init, ident in ((a_m, init_m, COMBINERS["arith.maxnumf"][1]), (a_d, init_d, COMBINERS["arith.addf"][1])):
        if rw.consts.get(rw.rename.get(init, init)) != ident:
            raise f.fail(red_m, f"the carry '%{a}' starts at other than {ident} (the pair starts at (-inf, 0))")
    # after the loop: D = sum(d * exp(m - M)), M = max(m)
    skip = _combine(rw, f, red_m, res_m, res_d, exp_a.name)
    rw.reduced[a_m] = ("arith.maxnumf", COMBINERS["arith.maxnumf"][1])
    rw.reduced[a_d] = ("arith.addf", COMBINERS["arith.addf"][1])
    rw.updates[id(upd)] = (upd.name, COMBINERS["arith.maxnumf"][1], a_m)
    rw.updates[id(add)] = ("arith.addf", COMBINERS["arith.addf"][1], scale.results[0])
    rw.skip |= skip
    rw.result_name[a_m] = red_m.results[0]
    rw.result_name[a_d] = _folded_name(rw, res_d)
    return {a_m, a_d}


def _combine(rw: Rewrite, f: _Form, red_m: MOp, res_m: str, res_d: str, exp: str) -> set[int]:
    """The ops after the loop that fold the pairs of the columns into the row's (their ids, not emitted: the
    carries are the row's pair); the reduction of D renamed to the sum carry."""
    big_m = red_m.results[0]
    others = [u for u in rw.uses.get(res_m, []) if u is not red_m]
    sub = others[0] if len(others) == 1 else None
    if sub is None or sub.name != "arith.subf" or [n for n, _ in sub.operands()][0] != res_m:
        raise f.fail(others[0] if others else red_m, f"the running max '%{res_m}' is read after the loop other than "
                                                     "by max(m) and the combine's exponent m - max(m)")
    splat = None
    mm = [n for n, _ in sub.operands()][1]
    for o in rw.uses.get(big_m, []):
        if o.name == "tt.splat" and o.results[0] == mm:
            splat = o
    if splat is None:
        raise f.fail(sub, "the combine's exponent is not m - max(m)")
    exp_c = f.only(rw.uses, sub.results[0], "the combine's exponent", sub)
    if exp_c.name != exp:
        raise f.fail(exp_c, f"'{exp_c.name}' in the combine after the loop, '{exp}' in the loop: one base")
    mul = f.only(rw.uses, exp_c.results[0], "the combine's scale", exp_c)
    if mul.name != "arith.mulf" or _other(mul, exp_c.results[0]) != res_d:
        raise f.fail(mul, f"the combine's scale exp(m - max(m)) multiplies other than the sum carry '%{res_d}'")
    if len(rw.uses.get(res_d, [])) != 1:
        raise f.fail(next(u for u in rw.uses[res_d] if u is not mul), f"the sum carry '%{res_d}' is read after the "
                                                                        "loop other than by the combine")
    red = f.only(rw.uses, mul.results[0], "the combine's terms", mul)
    comb = next(iter(walk_ops(red.body())), None) if red.name == "tt.reduce" else None
    if comb is None or comb.name != "arith.addf":
        raise f.fail(red, "the combine's terms d * exp(m - max(m)) are not summed")
    rw.folded[id(red)] = res_d
    skip = {id(sub), id(exp_c), id(mul)}
    if [u for u in rw.uses.get(mm, []) if u is not sub] == []:
        skip.add(id(splat))
    return skip


def _folded_name(rw: Rewrite, res_d: str) -> str:
    """The name of the reduction after the loop that the sum carry `res_d` is (the row's D)."""
    return next(o.results[0] for o in walk_ops(rw.func.body()) if rw.folded.get(id(o)) == res_d)
