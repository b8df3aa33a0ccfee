"""Experiment (session 40, spill40): import a dump with a given row tile / column tile on sm_100, solve on b200,
emit through the ptxas loop; print I, roles, budgets and ptxas's spill lines. Env: ROWS, COLS, TILE (1: the
register model's TILE_ROWS on, 0: off)."""
import os, re, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "tests"))
import twill.ttgir.rowprog as rp, twill.ttgir.rowops as ro, twill.ttgir.flatmap as fm, twill.ttgir.rowwhole as rw
import twill.registers as regs
if "ROWS" in os.environ:
    rp.ROWS = ro.ROWS = int(os.environ["ROWS"])
if "COLS" in os.environ:
    rp.COLUMNS = fm.COLUMNS = rw.COLUMNS = int(os.environ["COLS"])
if os.environ.get("TILE", "1") == "0":
    regs.TILE_ROWS = {}
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.sequence import Sequence
from twill.ttgir.sequence import import_sequence
from conftest import emitted_and_built

path = Path(sys.argv[1])
gpu = sys.argv[2] if len(sys.argv) > 2 else "b200"
machine = load_machine(gpu)
found, _ = import_sequence(path.read_text(), str(path))
out = Path(os.environ.get("OUT", "/tmp/spill40"))
out.mkdir(exist_ok=True, parents=True)
for i, g in enumerate(found.graphs if isinstance(found, Sequence) else (found,)):
    t = time.time()
    s = solve(g, machine, SolveOptions(time_limit=60))
    print(f"{path.stem} L{i}: I={s.ii} L={s.length} complete={s.complete} roles=" +
          ", ".join(f"{r.name}:{r.warps}w/{r.registers}" for r in s.roles) + f" solve {time.time()-t:.0f}s", flush=True)
    t = time.time()
    s2, rc, err = emitted_and_built(s, machine, out / f"{path.stem}.{i}.cu")
    spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", err)
    regsu = re.findall(r"Used (\d+) registers", err)
    print(f"  emitted I={s2.ii} rc={rc} spills={spills} regs={regsu} serial={'C7510' in err or 'C7511' in err} "
          f"emit {time.time()-t:.0f}s", flush=True)
