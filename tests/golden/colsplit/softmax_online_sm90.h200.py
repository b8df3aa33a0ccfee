"""PyTorch binding of kernel softmax_online_kernel: its 2 loops in sequence (L0, L1), written by `twill emit-cuda
--binding torch`. Do not edit: emit it again.

    softmax_online_kernel(X) -> Y

Each loop is its own kernel (K.LOOP.cu) with its own binding (K.LOOP.py, beside this file); they run
one after the other on one stream. A tensor one loop hands to a later one is allocated by the
earlier loop's binding (its output) and passed to the later one as an input; it is not returned.
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
# (loop, its binding, {its tensor: ('user', parameter) or ('handed', earlier loop, its output)},
#  (its binding's number parameter, this function's): its launch scalars and what its knobs read)
LOOPS = [
    ('L0', 'softmax_online_sm90.h200.L0.py', {'X': ('user', 'X')}, ()),
    ('L1', 'softmax_online_sm90.h200.L1.py', {'row_max': ('handed', 'L0', 'm'), 'denom': ('handed', 'L0', 'd'), 'X': ('user', 'X')}, ()),
]
OUTPUTS = [('Y', 'L1', 'Y')]  # (returned name, loop, its output)
# the loops split over the grid by columns (twill/emit/colsplit.py): loop -> (its split's parameter,
#  its pipeline's stages, ((fold, its carries' outputs), ...), its exp2_scale: (constant, ((parameter, power), ...)))
SPLITS = {
    'L0': ('twill_split_cols', 3, (('online', ('m', 'd')),), (1.4426950408889634, ())),
    'L1': ('twill_split_cols', 4, (), (1.4426950408889634, ())),
}
# the combine of a fold's S partials [S, *rows] (colsplit.COMBINE): xp is torch
COMBINE = {
    'online': lambda xp, scale, m, l: (lambda mx: (mx, xp.sum(l * xp.exp2((m - mx) * scale), 0)))(xp.amax(m, 0)),
}
_MODULES = {}
_SPLITS_OF = {}  # the user's tensors' key -> each loop's split argument (plans: once per kind of call)


def _module(file):
    mod = _MODULES.get(file)
    if mod is None:
        spec = importlib.util.spec_from_file_location(file[:-3].replace('.', '_'), os.path.join(HERE, file))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODULES[file] = mod
    return mod


def plans(user):
    """Every loop's plan from `user` ({parameter: Meta}), resolved before any loop runs: a tensor some
    loop cannot take raises its ArgumentError before anything is launched (a handed-over tensor has
    the shape its loop gives it). Plain Python: each loop's cached `resolve`, as its call uses."""
    shapes, out = {}, {}
    device = next((m.device for m in user.values()), 'cuda:0')
    for loop, file, feeds, _ in LOOPS:
        mod = _module(file)
        dtype = {a['name']: a['dtype'] for a in mod.SPEC['args']}
        given = {}
        for arg, how in feeds.items():
            if how[0] == 'user':
                given[arg] = user[how[1]]
            else:  # as the earlier loop allocates it: rows of its layout's pitch (padded for TMA)
                shape, kind, pitch = shapes[(how[1], how[2])]
                strides = mod._dense(tuple(shape[:-1]) + (pitch,))
                given[arg] = mod.Meta(shape, kind, device, pitch == shape[-1], 0, strides)
        given.update({a['name']: None for a in mod.SPEC['args'] if a['output']})
        out[loop] = mod._plan(mod.SPEC, given, None)  # resolve, cached by the shapes (one split)
        folded = {o for _, outs in SPLITS.get(loop, ('', 0, ()))[2] for o in outs}  # [S, *rows] -> [*rows]
        shapes.update({(loop, a['name']): (out[loop]['shapes'][a['name']][a['name'] in folded:], dtype[a['name']],
                                           out[loop]['shapes'][a['name']][-1] if a['name'] in folded
                                           else out[loop]['layouts'][i][1])  # a fold's result is dense
                       for i, a in enumerate(mod.SPEC['args']) if a['output']})
    return out


def softmax_online_kernel(X, *, stream=None):
    """Run the loops of softmax_online_kernel in order; every tensor as the loops' bindings take it."""
    user = dict(X=X)
    numbers = dict()
    import torch
    first = _module(LOOPS[0][1])
    for p, t in user.items():
        if not isinstance(t, torch.Tensor):
            raise first.ArgumentError(f'{p}: expected a torch.Tensor, got {type(t).__name__}')
    # every loop's plan, once per kind of the user's tensors (what the checks read of them: first._key)
    key, _ = first._key({'kernel': LOOPS[0][1]}, user, (), torch.Tensor)
    splits = _SPLITS_OF.get(key)
    if splits is None:
        planned = plans({p: first.describe(t) for p, t in user.items()})
        splits = {}
        for loop, file, _, _ in LOOPS:  # S splits of the columns: each split's elements, the split's argument
            mod, p = _module(file), planned[loop]
            e = mod.split_elements(mod.SPEC, p, SPLITS[loop][1], mod._sm_count(p['device'])) if loop in SPLITS else None
            splits[loop] = {SPLITS[loop][0]: e} if e else {}  # none: one split, as alone (errors name the tensors)
        if len(_SPLITS_OF) >= 256:  # many shapes: start again rather than grow without bound
            _SPLITS_OF.clear()
        _SPLITS_OF[key] = splits
    results = {}
    for loop, file, feeds, scalars in LOOPS:
        mod = _module(file)
        tensors = {arg: (user[how[1]] if how[0] == 'user' else results[how[1]][how[2]])
                   for arg, how in feeds.items()}
        # the loop's own function: it checks its tensors, computes its knobs (exp2_scale) and allocates its outputs
        out = mod.run(**tensors, **{p: numbers[x] for p, x in scalars}, **splits[loop], stream=stream)
        names = [a['name'] for a in mod.SPEC['args'] if a['output']]
        results[loop] = dict(zip(names, out if len(names) > 1 else (out,)))
        if loop in SPLITS:  # each folded carry: its S partials combined into the row's value
            _, _, folds, (coef, powers) = SPLITS[loop]
            scale = coef
            for name, power in powers:
                scale *= float(numbers[name]) ** power
            for kind, outs in folds:
                results[loop].update(zip(outs, COMBINE[kind](torch, scale, *(results[loop][o] for o in outs))))
    found = [results[loop][name] for _, loop, name in OUTPUTS]
    return found[0] if len(found) == 1 else tuple(found)


def build_library(directory=None):
    """Build every loop's shared library now: their paths."""
    return [_module(file).build_library(directory) for _, file, _, _ in LOOPS]


run = softmax_online_kernel
