"""Triton's random numbers (`triton/language/random.py`: tl.randint, tl.rand) in numpy, bit for bit.

The one statement in Python of the stream a `rand` op computes (twill/vocab.py): the import checks a kernel's
inlined Philox rounds against it before it collapses them into one op (ttgir/rand.py), and the tests check
the emitted C++ (emit/cuda_runtime/philox.cuh) against it. Triton's algorithm, for a seed and an offset:

- the seed as an unsigned 64-bit integer (`seed.to(tl.uint64)`: an i32 argument sign-extended), its low word
  the key k0 and its high word k1;
- the counter (c0, c1, c2, c3) = (the 32-bit offset, 0, 0, 0). (Triton draws at 64-bit offsets with Philox-4x64:
  64-bit words and other constants, which this module does not compute; `counter`'s `bits=64` puts the high word in
  c1, a stream no Triton draw makes, so the import's check by value refuses such a draw: ttgir/rand.py);
- `n_rounds` rounds (10 by default) of Philox-4x32: c0' = umulhi(B, c2) ^ c1 ^ k0, c2' = umulhi(A, c0) ^ c3 ^
  k1, c1' = B * c2, c3' = A * c0 (mod 2^32), then k0 += KEY_A, k1 += KEY_B;
- tl.randint is c0 (an i32 tensor of the uint32 bits); tl.rand is `uint_to_uniform_float(c0)`: the bits as an
  int32 x, ~x where x < 0, converted to f32 (round to nearest) and multiplied in f32 by 4.6566127342e-10 (the
  f32 nearest it), a float in [0, 1).
"""
from __future__ import annotations

import numpy as np

KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85  # the key's increments per round
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57  # the round multipliers
ROUNDS = 10  # tl.rand's n_rounds default (N_ROUNDS_DEFAULT)
SCALE = np.float32(4.6566127342e-10)  # uint_to_uniform_float's scale for 32-bit values, as f32
MASK32 = 0xFFFFFFFF


def seed_words(seed: int) -> tuple[int, int]:
    """(k0, k1): the low and high 32 bits of the seed as an unsigned 64-bit integer (a negative seed is its two's
    complement, as Triton's `seed.to(tl.uint64)` of a sign-extended i32 or i64 argument)."""
    s = int(seed) % (1 << 64)
    return s & MASK32, s >> 32


def _umulhi(a: int, b: np.ndarray) -> np.ndarray:
    return ((np.uint64(a) * b.astype(np.uint64)) >> np.uint64(32)).astype(np.uint32)


def philox(seed: int, c0, c1=0, c2=0, c3=0, rounds: int = ROUNDS) -> tuple[np.ndarray, ...]:
    """Triton's `philox(seed, c0, c1, c2, c3, n_rounds)` on uint32 counters (arrays or ints): the four words."""
    c = [np.asarray(x, dtype=np.uint64).astype(np.uint32) & np.uint32(MASK32) for x in (c0, c1, c2, c3)]
    shape = np.broadcast_shapes(*(x.shape for x in c))
    c0, c1, c2, c3 = (np.broadcast_to(x, shape).astype(np.uint32) for x in c)
    k0, k1 = seed_words(seed)
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            a, b = c0, c2
            c0 = _umulhi(ROUND_B, b) ^ c1 ^ np.uint32(k0)
            c2 = _umulhi(ROUND_A, a) ^ c3 ^ np.uint32(k1)
            c1 = (np.uint64(ROUND_B) * b.astype(np.uint64) & np.uint64(MASK32)).astype(np.uint32)
            c3 = (np.uint64(ROUND_A) * a.astype(np.uint64) & np.uint64(MASK32)).astype(np.uint32)
            k0, k1 = (k0 + KEY_A) & MASK32, (k1 + KEY_B) & MASK32
    return c0, c1, c2, c3


def counter(offsets, bits: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """(c0, c1) of Triton's randint4x for integer offsets (Python or numpy integers, any sign) of a `bits`-bit
    tensor: the low word, and the high word for 64-bit offsets (0 for 32-bit ones)."""
    a = np.asarray(offsets)
    if a.dtype.kind in "iu":  # numpy integers (two's complement): the words of their bits, at numpy's speed
        a = a.astype(np.int64).view(np.uint64) if a.dtype.kind == "i" else a.astype(np.uint64)
        lo = (a & np.uint64(MASK32)).astype(np.uint32)
        hi = (a >> np.uint64(32)).astype(np.uint32) if bits > 32 else np.zeros(lo.shape, np.uint32)
        return lo, hi
    o = np.vectorize(lambda v: int(v) % (1 << bits), otypes=[object])(a.astype(object))
    lo = np.vectorize(lambda v: v & MASK32, otypes=[np.uint32])(o)
    hi = np.vectorize(lambda v: v >> 32, otypes=[np.uint32])(o) if bits > 32 else np.zeros(lo.shape, np.uint32)
    return lo, hi


def randint(seed: int, offsets, rounds: int = ROUNDS, bits: int = 32) -> np.ndarray:
    """tl.randint(seed, offsets, n_rounds): the uint32 words (numpy uint32; Triton's i32 tensor holds the same
    bits). `bits`: the offsets' width (32 or 64)."""
    lo, hi = counter(offsets, bits)
    return philox(seed, lo, hi, 0, 0, rounds)[0]


def uniform(words) -> np.ndarray:
    """uint_to_uniform_float of uint32 words: float32 in [0, 1)."""
    x = np.asarray(words, dtype=np.uint32).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * SCALE


def rand(seed: int, offsets, rounds: int = ROUNDS, bits: int = 32) -> np.ndarray:
    """tl.rand(seed, offsets, n_rounds): float32 uniform in [0, 1), bit for bit Triton's."""
    return uniform(randint(seed, offsets, rounds, bits))
