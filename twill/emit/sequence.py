"""emit-cuda for loops in sequence (docs/emit-cuda.md, "Loops in sequence").

Each loop's schedule is emitted as it would be alone: its own kernel (K.LOOP.cu), its own roles,
rings, register budgets and launch. A later loop reads an earlier loop's final carry as an input,
from global memory: the earlier kernel writes it (its out_CARRY, in the dtype the hand-over names)
and the later one loads it as it loads any loop-invariant input (a TMA box at the tile's rows). The
launcher is the binding K.py: it runs the loops' bindings (K.LOOP.py) one after the other on one
stream, each handed-over tensor allocated by the earlier loop's binding and passed to the later
one, the tensors of the kernel's own arguments passed to every loop that reads them. Stream order
is the barrier between the loops: a kernel starts after the previous one has written everything.
A handed-over tensor whose rows TMA cannot read contiguously (781 f32) is allocated with rows
padded to 16 bytes, and the later loop reads it with that pitch (binding_runtime._layout): no copy.
"""
from __future__ import annotations

from pathlib import Path

from .colsplit import COMBINE, fixed_up, is_column, plan as fold_plan
from .model import EmitError


def loop_path(kernel_path: str, loop: str) -> str:
    """K.cu -> K.LOOP.cu, where loop LOOP's kernel is written."""
    path = Path(kernel_path)
    stem = path.name[:-3] if path.name.endswith(".cu") else path.name
    return str(path.with_name(f"{stem}.{loop}.cu"))


def loop_kernel(schedule, machine, **options):
    """(model, its CUDA text) of one loop of a sequence: the loop split over the grid by columns where its
    carries are folds (colsplit.py; the sequence's binding picks the splits at the call and combines the
    partials), else as alone (emit.emitted)."""
    from . import emitted
    return emitted(schedule, machine, **options)


def sequence_binding(kernel: str, kernel_path: str, loops: list[tuple[str, object]], handovers,
                     fused: tuple[str, str] | None = None, why_not: str = "") -> str:
    """The text of K.py: `loops` are (name, Renderer) in order; `handovers` the sequence's; `fused` the one
    kernel's file and entry (seqfuse.py) where the loops have one, else `why_not`."""
    from .binding import _scalar_spec, _split_param, arguments, in_place, knob_parameters, parameters, py_name
    path = Path(kernel_path)
    stem = path.name[:-3] if path.name.endswith(".cu") else path.name
    plan, params, outputs, taken, scalar_params = [], [], [], set(), []
    split_text, kinds = [], set()  # the loops split by columns (colsplit.py), the folds their carries take
    handed_out = {(h.source, h.carry) for h in handovers}
    out_name = {}  # (loop, carry) -> the loop binding's name of its output
    for name, renderer in loops:
        # the numbers a loop takes at launch (RMSNorm's N and eps in L1's prologue) and the kernel's arguments
        # its knobs are computed from (`knob exp2_scale = sm_scale * ...`, which the loop's own function
        # computes): parameters of the sequence's binding too, by name, as (the loop's parameter, the sequence's)
        by_scalar = {p.scalar: p.name for p in parameters(renderer) if p.scalar is not None}
        scalars = [(by_scalar.get(x["name"], x["name"]), x["name"])
                   for x in _scalar_spec(renderer).get("scalars", [])] + [(k, k) for k in knob_parameters(renderer)]
        for _, x in scalars:
            if x not in params:
                params.append(x)
                scalar_params.append(x)
                taken.add(x)
        args = arguments(renderer)
        over = in_place(renderer.m.graph, args)  # an output written over an input: returned by the input's name
        into = {h.input: h for h in handovers if h.loop == name}
        feeds, outs = [], []
        for a in args:
            if a.output:
                out_name[(name, a.source)] = a.name
                if (name, a.source) not in handed_out:
                    user = over[a.name] if over.get(a.name) in params and not any(o[0] == over[a.name] for o in outputs) \
                        else a.name if a.name not in taken else py_name(f"{name}_{a.name}", taken)
                    taken.add(user)
                    outputs.append((user, name, a.name))
                outs.append(a.name)
            elif a.source in into:
                h = into[a.source]
                feeds.append((a.name, ("handed", h.source, h.carry)))
            else:
                if a.name not in params:
                    params.append(a.name)
                    taken.add(a.name)
                feeds.append((a.name, ("user", a.name)))
        plan.append((name, f"{stem}.{name}.py", feeds, outs, scalars))
        column = _column_split(renderer, out_name, name, _split_param)
        if column is not None:
            split_text.append(f"    {name!r}: {column!r},")
            kinds.update(kind for kind, _ in column[2])
    for _, _, feeds, _, _ in plan:
        for _, how in feeds:
            if how[0] == "handed" and (how[1], how[2]) not in out_name:
                raise EmitError(f"loop {how[1]} writes no output '{how[2]}' to hand over")
    feeds_text = []
    for name, module, feeds, outs, scalars in plan:
        items = ", ".join(f"{arg!r}: " + (f"('user', {how[1]!r})" if how[0] == "user" else
                                         f"('handed', {how[1]!r}, {out_name[(how[1], how[2])]!r})")
                          for arg, how in feeds)
        feeds_text.append(f"    ({name!r}, {module!r}, {{{items}}}, {tuple(scalars)!r}),")
    lines = [
        f'"""PyTorch binding of kernel {kernel}: its {len(loops)} loops in sequence ({", ".join(n for n, _ in loops)}), '
        "written by `twill emit-cuda\n--binding torch`. Do not edit: emit it again.",
        "",
        f"    {kernel}({', '.join(params)}) -> {', '.join(o[0] for o in outputs)}",
        "",
        "Each loop is its own kernel (K.LOOP.cu) with its own binding (K.LOOP.py, beside this file); they run",
        "one after the other on one stream. A tensor one loop hands to a later one is allocated by the",
        "earlier loop's binding (its output) and passed to the later one as an input; it is not returned.",
        *(["Where no loop is split by columns (fused=None), or fused=True, the",
           "loops run as one kernel (FUSED: a CTA runs each loop's roles on its row tile in turn, twill/emit/seqfuse.py),",
           "each loop's binding checking its tensors and packing its launch as for its own kernel (one split each);",
           "fused=False: one kernel per loop. Where the one kernel fails to build or launch, fused=None warns",
           "(RuntimeWarning) and runs one kernel per loop, then and for later calls of that kind; fused=True raises."]
         if fused else
          [f"No one kernel: {why_not}."] if why_not else []),
        '"""',
        "import importlib.util",
        "import os",
        "import warnings",
        "",
        "HERE = os.path.dirname(os.path.abspath(__file__))",
        "# the loops' one kernel and its entry (twill/emit/seqfuse.py), or None" + (f": {why_not}" if not fused else ""),
        f"FUSED = {tuple(fused)!r}" if fused else "FUSED = None",
        "# (loop, its binding, {its tensor: ('user', parameter) or ('handed', earlier loop, its output)},",
        "#  (its binding's number parameter, this function's): its launch scalars and what its knobs read)",
        "LOOPS = [",
        *feeds_text,
        "]",
        f"OUTPUTS = {[(o[0], o[1], o[2]) for o in outputs]!r}  # (returned name, loop, its output)",
        "# the loops split over the grid by columns (twill/emit/colsplit.py): loop -> (its split's parameter,",
        "#  its pipeline's stages, ((fold, its carries' outputs), ...), its exp2_scale: (constant, ((parameter, power), ...)))",
        "SPLITS = {",
        *split_text,
        "}",
        "# the combine of a fold's S partials [S, *rows] (colsplit.COMBINE): xp is torch",
        "COMBINE = {",
        *[f"    {k!r}: {COMBINE[k]}," for k in sorted(kinds)],
        "}",
        "_MODULES = {}",
        "_FUSED_LIB = []  # the one kernel's library, once loaded",
        "_SPLITS_OF = {}  # the user's tensors' key -> each loop's split argument",
        "_FUSED_FAILED = {}  # the user's tensors' key -> why the one kernel failed for that kind (fused=None: not tried again)",
        "# The one kernel by default (fused=None) only where no loop splits its columns: it runs each loop as one split,",
        "# and where a loop would split, its own kernel's wider grid was faster (H200, bench/seq/fused_check.py, session",
        "# 37: LayerNorm 1000 x 1000 14.4 us one kernel per loop against 18.4 us as one kernel).",
        "",
        "",
        "def _module(file):",
        "    mod = _MODULES.get(file)",
        "    if mod is None:",
        "        spec = importlib.util.spec_from_file_location(file[:-3].replace('.', '_'), os.path.join(HERE, file))",
        "        mod = importlib.util.module_from_spec(spec)",
        "        spec.loader.exec_module(mod)",
        "        _MODULES[file] = mod",
        "    return mod",
        "",
        "",
        "def plans(user):",
        '    """Every loop\'s plan from `user` ({parameter: Meta}), resolved before any loop runs: a tensor some',
        "    loop cannot take raises its ArgumentError before anything is launched (a handed-over tensor has",
        "    the shape its loop gives it). Plain Python: each loop's cached `resolve`, as its call uses.\"\"\"",
        "    shapes, out = {}, {}",
        "    device = next((m.device for m in user.values()), 'cuda:0')",
        "    for loop, file, feeds, _ in LOOPS:",
        "        mod = _module(file)",
        "        dtype = {a['name']: a['dtype'] for a in mod.SPEC['args']}",
        "        given = {}",
        "        for arg, how in feeds.items():",
        "            if how[0] == 'user':",
        "                given[arg] = user[how[1]]",
        "            else:  # as the earlier loop allocates it: rows of its layout's pitch (padded for TMA)",
        "                shape, kind, pitch = shapes[(how[1], how[2])]",
        "                strides = mod._dense(tuple(shape[:-1]) + (pitch,))",
        "                given[arg] = mod.Meta(shape, kind, device, pitch == shape[-1], 0, strides)",
        "        given.update({a['name']: None for a in mod.SPEC['args'] if a['output']})",
        "        out[loop] = mod._plan(mod.SPEC, given, None)  # resolve, cached by the shapes (one split)",
        "        folded = {o for _, outs in SPLITS.get(loop, ('', 0, ()))[2] for o in outs}  # [S, *rows] -> [*rows]",
        "        shapes.update({(loop, a['name']): (out[loop]['shapes'][a['name']][a['name'] in folded:], dtype[a['name']],",
        "                                           out[loop]['shapes'][a['name']][-1] if a['name'] in folded",
        "                                           else out[loop]['layouts'][i][1])  # a fold's result is dense",
        "                       for i, a in enumerate(mod.SPEC['args']) if a['output']})",
        "    return out",
        "",
        "",
        "def _fused_spec(first):",
        "    return {'kernel': " + repr(kernel + "_fused") + ", 'kernel_file': FUSED[0], 'entry': FUSED[1], 'arch': first.SPEC['arch']}",
        "",
        "",
        "def _fused_library(first):",
        '    """The one kernel\'s library (ctypes), built by the first loop\'s runtime (cached by content)."""',
        "    if not _FUSED_LIB:",
        "        import ctypes",
        "        import struct",
        "        lib = ctypes.CDLL(first.build(_fused_spec(first), HERE))",
        "        lib.twill_args_bytes.restype = ctypes.c_int",
        "        lib.twill_args_bytes.argtypes = [ctypes.c_int]",
        "        for i, (loop, file, _, _) in enumerate(LOOPS):",
        "            mod = _module(file)",
        "            if lib.twill_args_bytes(i) != struct.calcsize(mod.args_format(mod.SPEC)):",
        "                raise RuntimeError(f'{FUSED[1]} reads {lib.twill_args_bytes(i)} bytes for loop {loop}, its binding '",
        "                                   f'packs {struct.calcsize(mod.args_format(mod.SPEC))}: emit them again')",
        "        lib.twill_launch.restype = ctypes.c_int",
        "        lib.twill_error_string.restype = ctypes.c_char_p",
        "        lib.twill_error_string.argtypes = [ctypes.c_int]",
        "        _FUSED_LIB.append(lib)",
        "    return _FUSED_LIB[0]",
        "",
        "",
        "class FusedFailed(RuntimeError):",
        '    """The one kernel could not be built or launched (nothing of it ran): fused=None runs one kernel per loop."""',
        "",
        "",
        "def _run_fused(user, numbers, stream):",
        '    """The loops as one kernel: each loop\'s own function checks its tensors, allocates its outputs and packs',
        "    its launch without launching (its runtime's DEFERRED); the one kernel's entry takes every loop's block.",
        '    None, with nothing launched, where a loop cannot be deferred (NotDeferred); FusedFailed where the one',
        '    kernel\'s library cannot be built or loaded, or its entry returns an error (its checks, or the launch\'s)."""',
        "    results, blocks = {}, []",
        "    for loop, file, feeds, scalars in LOOPS:",
        "        mod = _module(file)",
        "        tensors = {arg: (user[how[1]] if how[0] == 'user' else results[how[1]][how[2]])",
        "                   for arg, how in feeds.items()}",
        "        token = mod.DEFERRED.set(blocks)",
        "        try:",
        "            out = mod.run(**tensors, **{p: numbers[x] for p, x in scalars}, stream=stream)",
        "        except mod.NotDeferred:",
        "            return None",
        "        finally:",
        "            mod.DEFERRED.reset(token)",
        "        names = [a['name'] for a in mod.SPEC['args'] if a['output']]",
        "        results[loop] = dict(zip(names, out if len(names) > 1 else (out,)))",
        "        if loop in SPLITS:  # one split: each fold's partials [1, *rows] are its values (views the kernel writes)",
        "            for _, outs in SPLITS[loop][2]:",
        "                results[loop].update({o: results[loop][o][0] for o in outs})",
        "    try:",
        "        lib = _fused_library(_module(LOOPS[0][1]))",
        "    except (OSError, RuntimeError) as exc:  # nvcc's error, a library that does not load or match the bindings",
        f"        raise FusedFailed(f'{kernel}: the one kernel\\'s library: {{exc}}') from exc",
        "    err = lib.twill_launch(*blocks)",
        "    if err != 0:",
        f"        raise FusedFailed(f'{kernel}: the one kernel\\'s launch failed: {{lib.twill_error_string(err).decode()}} '",
        "                          f'(cudaError {err})')",
        "    return results",
        "",
        "",
        f"def {py_name(kernel, set())}({', '.join(params)}{', ' if params else ''}*, fused=None, stream=None):",
        f'    """Run the loops of {kernel} in order; every tensor as the loops\' bindings take it. fused: None, the one',
        "    kernel (FUSED) where no loop is split by columns; True, the one kernel (each loop one",
        "    split); False, one kernel per loop.\"\"\"",
        "    user = dict(" + ", ".join(f"{p}={p}" for p in params if p not in scalar_params) + ")",
        "    numbers = dict(" + ", ".join(f"{p}={p}" for p in scalar_params) + ")",
        "    import torch",
        "    first = _module(LOOPS[0][1])",
        "    for p, t in user.items():",
        "        if not isinstance(t, torch.Tensor):",
        "            raise first.ArgumentError(f'{p}: expected a torch.Tensor, got {type(t).__name__}')",
        "    # every loop's plan, once per kind of the user's tensors (what the checks read of them: first._key)",
        "    key, _ = first._key({'kernel': LOOPS[0][1]}, user, (), torch.Tensor)",
        "    splits = _SPLITS_OF.get(key)",
        "    if splits is None:",
        "        planned = plans({p: first.describe(t) for p, t in user.items()})",
        "        splits = {}",
        "        for loop, file, _, _ in LOOPS:  # S splits of the columns: each split's elements, the split's argument",
        "            mod, p = _module(file), planned[loop]",
        "            e = mod.split_elements(mod.SPEC, p, SPLITS[loop][1], mod._sm_count(p['device'])) if loop in SPLITS else None",
        "            splits[loop] = {SPLITS[loop][0]: e} if e else {}  # none: one split, as alone (errors name the tensors)",
        "        if len(_SPLITS_OF) >= 256:  # many shapes: start again rather than grow without bound",
        "            _SPLITS_OF.clear()",
        "        _SPLITS_OF[key] = splits",
        "    if FUSED is not None and fused is not False and (fused or (key not in _FUSED_FAILED and",
        "                                                             not any(splits.values()))):",
        "        try:",
        "            results = _run_fused(user, numbers, stream)",
        "        except FusedFailed as exc:",
        "            if fused:  # asked for: its error",
        "                raise",
        "            if len(_FUSED_FAILED) >= 256:",
        "                _FUSED_FAILED.clear()",
        "            _FUSED_FAILED[key] = str(exc)",
        "            warnings.warn(f'{exc}; running one kernel per loop (fused=False) for this kind of call', RuntimeWarning,",
        "                          stacklevel=2)",
        "            results = None",
        "        if results is not None:",
        "            found = [results[loop][name] for _, loop, name in OUTPUTS]",
        "            return found[0] if len(found) == 1 else tuple(found)",
        "    if fused and FUSED is None:",
        f"        raise ValueError('fused=True: the loops of {kernel} have no one kernel (FUSED is None)')",
        "    results = {}",
        "    for loop, file, feeds, scalars in LOOPS:",
        "        mod = _module(file)",
        "        tensors = {arg: (user[how[1]] if how[0] == 'user' else results[how[1]][how[2]])",
        "                   for arg, how in feeds.items()}",
        "        # the loop's own function: it checks its tensors, computes its knobs (exp2_scale) and allocates its outputs",
        "        out = mod.run(**tensors, **{p: numbers[x] for p, x in scalars}, **splits[loop], stream=stream)",
        "        names = [a['name'] for a in mod.SPEC['args'] if a['output']]",
        "        results[loop] = dict(zip(names, out if len(names) > 1 else (out,)))",
        "        if loop in SPLITS:  # each folded carry: its S partials combined into the row's value",
        "            _, _, folds, (coef, powers) = SPLITS[loop]",
        "            scale = coef",
        "            for name, power in powers:",
        "                scale *= float(numbers[name]) ** power",
        "            for kind, outs in folds:",
        "                results[loop].update(zip(outs, COMBINE[kind](torch, scale, *(results[loop][o] for o in outs))))",
        "    found = [results[loop][name] for _, loop, name in OUTPUTS]",
        "    return found[0] if len(found) == 1 else tuple(found)",
        "",
        "",
        "def build_library(directory=None):",
        '    """Build every loop\'s shared library now, and the one kernel\'s where the loops have one: their paths."""',
        "    first = _module(LOOPS[0][1])",
        "    return [_module(file).build_library(directory) for _, file, _, _ in LOOPS] + (",
        "        [first.build(_fused_spec(first), HERE, directory)] if FUSED else [])",
        "",
        "",
        f"run = {py_name(kernel, set())}",
    ]
    return "\n".join(lines) + "\n"


def _column_split(renderer, out_name, loop, split_param):
    """K.py's SPLITS entry of a loop split by columns (colsplit.py), or None: (its split's parameter, its
    stages, its folds as (kind, the loop binding's outputs of the fold's carries), its exp2_scale)."""
    g = renderer.m.graph
    if not is_column(g):
        return None
    folds = () if fixed_up(g) else tuple((f.kind, tuple(out_name[(loop, c)] for c in f.carries))
                                         for f in fold_plan(g).folds)  # (fixed up: combined in the kernel)
    knob = dict(g.knobs).get("exp2_scale")
    scale = (float(knob.coef), tuple(knob.powers)) if knob is not None else (1.0, ())
    return (split_param(renderer), renderer.m.stages, folds, scale)


