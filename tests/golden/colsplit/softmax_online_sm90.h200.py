"""PyTorch binding of kernel softmax_online_kernel: its 2 loops in sequence (L0, L1), written by `twill emit-cuda
--binding torch`. Do not edit: emit it again.

    softmax_online_kernel(X) -> Y

Each loop is its own kernel (K.LOOP.cu) with its own binding (K.LOOP.py, beside this file); they run
one after the other on one stream. A tensor one loop hands to a later one is allocated by the
earlier loop's binding (its output) and passed to the later one as an input; it is not returned.
Where no loop is split by columns (fused=None), or fused=True, the
loops run as one kernel (FUSED: a CTA runs each loop's roles on its row tile in turn, twill/emit/seqfuse.py),
each loop's binding checking its tensors and packing its launch as for its own kernel (one split each);
fused=False: one kernel per loop. Where the one kernel fails to build or launch, fused=None warns
(RuntimeWarning) and runs one kernel per loop, then and for later calls of that kind; fused=True raises.
"""
import importlib.util
import os
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# the loops' one kernel and its entry (twill/emit/seqfuse.py), or None
FUSED = ('softmax_online_sm90.h200.fused.cu', 'softmax_online_sm90.h200.fused_entry.cu')
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
_FUSED_LIB = []  # the one kernel's library, once loaded
_SPLITS_OF = {}  # the user's tensors' key -> each loop's split argument
_FUSED_FAILED = {}  # the user's tensors' key -> why the one kernel failed for that kind (fused=None: not tried again)
# The one kernel by default (fused=None) only where no loop splits its columns: it runs each loop as one split,
# and where a loop would split, its own kernel's wider grid was faster (H200, bench/seq/fused_check.py, session
# 37: LayerNorm 1000 x 1000 14.4 us one kernel per loop against 18.4 us as one kernel).


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


def _fused_spec(first):
    return {'kernel': 'softmax_online_kernel_fused', 'kernel_file': FUSED[0], 'entry': FUSED[1], 'arch': first.SPEC['arch']}


def _fused_library(first):
    """The one kernel's library (ctypes), built by the first loop's runtime (cached by content)."""
    if not _FUSED_LIB:
        import ctypes
        import struct
        lib = ctypes.CDLL(first.build(_fused_spec(first), HERE))
        lib.twill_args_bytes.restype = ctypes.c_int
        lib.twill_args_bytes.argtypes = [ctypes.c_int]
        for i, (loop, file, _, _) in enumerate(LOOPS):
            mod = _module(file)
            if lib.twill_args_bytes(i) != struct.calcsize(mod.args_format(mod.SPEC)):
                raise RuntimeError(f'{FUSED[1]} reads {lib.twill_args_bytes(i)} bytes for loop {loop}, its binding '
                                   f'packs {struct.calcsize(mod.args_format(mod.SPEC))}: emit them again')
        lib.twill_launch.restype = ctypes.c_int
        lib.twill_error_string.restype = ctypes.c_char_p
        lib.twill_error_string.argtypes = [ctypes.c_int]
        _FUSED_LIB.append(lib)
    return _FUSED_LIB[0]


class FusedFailed(RuntimeError):
    """The one kernel could not be built or launched (nothing of it ran): fused=None runs one kernel per loop."""


def _run_fused(user, numbers, stream):
    """The loops as one kernel: each loop's own function checks its tensors, allocates its outputs and packs
    its launch without launching (its runtime's DEFERRED); the one kernel's entry takes every loop's block.
    None, with nothing launched, where a loop cannot be deferred (NotDeferred); FusedFailed where the one
    kernel's library cannot be built or loaded, or its entry returns an error (its checks, or the launch's)."""
    results, blocks = {}, []
    for loop, file, feeds, scalars in LOOPS:
        mod = _module(file)
        tensors = {arg: (user[how[1]] if how[0] == 'user' else results[how[1]][how[2]])
                   for arg, how in feeds.items()}
        token = mod.DEFERRED.set(blocks)
        try:
            out = mod.run(**tensors, **{p: numbers[x] for p, x in scalars}, stream=stream)
        except mod.NotDeferred:
            return None
        finally:
            mod.DEFERRED.reset(token)
        names = [a['name'] for a in mod.SPEC['args'] if a['output']]
        results[loop] = dict(zip(names, out if len(names) > 1 else (out,)))
        if loop in SPLITS:  # one split: each fold's partials [1, *rows] are its values (views the kernel writes)
            for _, outs in SPLITS[loop][2]:
                results[loop].update({o: results[loop][o][0] for o in outs})
    try:
        lib = _fused_library(_module(LOOPS[0][1]))
    except (OSError, RuntimeError) as exc:  # nvcc's error, a library that does not load or match the bindings
        raise FusedFailed(f'softmax_online_kernel: the one kernel\'s library: {exc}') from exc
    err = lib.twill_launch(*blocks)
    if err != 0:
        raise FusedFailed(f'softmax_online_kernel: the one kernel\'s launch failed: {lib.twill_error_string(err).decode()} '
                          f'(cudaError {err})')
    return results


def softmax_online_kernel(X, *, fused=None, stream=None):
    """Run the loops of softmax_online_kernel in order; every tensor as the loops' bindings take it. fused: None, the one
    kernel (FUSED) where no loop is split by columns; True, the one kernel (each loop one
    split); False, one kernel per loop."""
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
    if FUSED is not None and fused is not False and (fused or (key not in _FUSED_FAILED and
                                                             not any(splits.values()))):
        try:
            results = _run_fused(user, numbers, stream)
        except FusedFailed as exc:
            if fused:  # asked for: its error
                raise
            if len(_FUSED_FAILED) >= 256:
                _FUSED_FAILED.clear()
            _FUSED_FAILED[key] = str(exc)
            warnings.warn(f'{exc}; running one kernel per loop (fused=False) for this kind of call', RuntimeWarning,
                          stacklevel=2)
            results = None
        if results is not None:
            found = [results[loop][name] for _, loop, name in OUTPUTS]
            return found[0] if len(found) == 1 else tuple(found)
    if fused and FUSED is None:
        raise ValueError('fused=True: the loops of softmax_online_kernel have no one kernel (FUSED is None)')
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
    """Build every loop's shared library now, and the one kernel's where the loops have one: their paths."""
    first = _module(LOOPS[0][1])
    return [_module(file).build_library(directory) for _, file, _, _ in LOOPS] + (
        [first.build(_fused_spec(first), HERE, directory)] if FUSED else [])


run = softmax_online_kernel
