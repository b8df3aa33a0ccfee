"""`Program`'s ping-pong: consumer warpgroups that take turns on the tensor core (FA3's inter-
warpgroup overlap), with the named-barrier turns each role's program begins and ends."""
from __future__ import annotations


class PingPong:
    """`Program`'s ping-pong (see the module docstring)."""

    # -- ping-pong between consumer warpgroups ---------------------------------------------------
    def _pingpong(self) -> tuple[str, ...]:
        """Roles that take turns on the tensor core, in turn order (empty: no ping-pong).

        A turn is a maximal run of one role's mmas in program order, across windows. Emitted only
        when two or more warpgroup roles issue wgmma, exchange no data, and their turns alternate
        cyclically with equal counts in every program (n from S to S+2), so the named-barrier
        protocol cannot deadlock. A turn still open at the end of a window that the next window
        may not continue (the steady state before the epilogue) is closed at that window's start.
        """
        m = self.model
        tensor = {o for o in self.order if m.ops[o].opcode == "mma"}
        roles = self._turn_takers(tensor) if m.target.pingpong else []
        programs = self._turn_programs(roles, tensor) if roles else None
        turns = _turns(m, roles, programs) if programs else None
        if turns is None:
            return ()
        begins, deferred, closes = turns
        for prog in self.programs.values():
            if prog.role not in roles:
                continue
            for key, ops in prog.windows.items():
                for pos, o in enumerate(ops):
                    if o in tensor:
                        prog.turns[(key, pos)] = (True in begins[(key, o)], (key, o) not in deferred)
                if closes.get((key, prog.role)) == {True}:
                    prog.turn_close.add(key)
        return tuple(roles)

    def _turn_takers(self, tensor: set[str]) -> list[str]:
        """The roles that issue mmas, in order of their first: two or more warpgroup roles that
        exchange no data, else none."""
        m = self.model
        roles: list[str] = []
        for key in [("prologue", p) for p in range(self.S - 1)] + [("steady", 0)]:
            for o in self.window_ops(None, key):
                if o in tensor and m.op_role[o] not in roles:
                    roles.append(m.op_role[o])
        if len(roles) < 2 or any(not m.role[r].is_warpgroup for r in roles):
            return []
        for chan in self.channels.values():
            if chan.producer in roles and any(c in roles for c in chan.consumers):
                return []
        return roles

    def _turn_programs(self, roles: list[str], tensor: set[str]):
        """Per program (n from S to S+2): its window keys and its mmas in order, as (window,
        key, op); None where the roles' runs do not alternate cyclically with equal counts."""
        m = self.model
        programs = []
        for k in range(1, self.S + 3):
            keys = ([("prologue", p) for p in range(self.S - 1)] + [("steady", 0)] * k +
                    [("epilogue", e) for e in range(self.S - 1)])
            seq = [(w, key, o) for w, key in enumerate(keys) for o in self.window_ops(None, key) if o in tensor]
            runs = [m.op_role[o] for i, (_, _, o) in enumerate(seq)
                    if i == 0 or m.op_role[seq[i - 1][2]] != m.op_role[o]]
            if not runs or len(runs) % len(roles) or any(r != roles[i % len(roles)] for i, r in enumerate(runs)):
                return None
            programs.append((keys, seq))
        return programs


def _goes_on(m, seq, i: int) -> str:
    """How the run of seq[i] goes on after it: the next mma is the same role's
    ("continues"), or another role's, in this window ("ends") or a later one ("crosses")."""
    w, _, o = seq[i]
    nxt = seq[i + 1] if i + 1 < len(seq) else None
    if nxt is not None and m.op_role[nxt[2]] == m.op_role[o]:
        return "continues"
    return "crosses" if nxt is not None and nxt[0] != w else "ends"


def _turns(m, roles: list[str], programs):
    """(where a turn begins, the (window, mma) whose turn is closed at the next window's start
    where it crosses, the (window, role) closes) agreed by every program, or None where they
    disagree."""
    begins: dict = {}
    ends: dict = {}  # over the programs
    for keys, seq in programs:
        for i, (w, key, o) in enumerate(seq):
            begins.setdefault((key, o), set()).add(i == 0 or m.op_role[seq[i - 1][2]] != m.op_role[o])
            ends.setdefault((key, o), set()).add(_goes_on(m, seq, i))
    if any(len(v) > 1 for v in begins.values()):
        return None
    # A run that ends hands the tensor core over right after its last mma, also where the next
    # run starts in a later window: handing over at the next window's start kept the other
    # warpgroup waiting through all of this window's softmax (FA3's intra-warpgroup overlap at
    # D = 64 ran the two softmaxes one after the other). Only where another program continues
    # the run across that boundary (the steady state before the epilogue) is the turn closed at
    # the next window's start instead, in the programs where it ends there.
    if any("continues" in v and "ends" in v for v in ends.values()):
        return None
    deferred = {ko for ko, v in ends.items() if "continues" in v}
    closes: dict = {}
    for keys, seq in programs:
        need = {(key, r): False for key in keys for r in roles}
        for i, (w, key, o) in enumerate(seq):
            if (key, o) in deferred and _goes_on(m, seq, i) == "crosses":
                need[(keys[w + 1], m.op_role[o])] = True
        for kr, flag in need.items():
            closes.setdefault(kr, set()).add(flag)
    if any(len(v) > 1 for v in closes.values()):
        return None
    return begins, deferred, closes
