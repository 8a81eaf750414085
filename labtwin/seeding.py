"""Experiment generators, many at a time: ``numpy.random.default_rng(seed)`` without making one.

Every experiment gets its own generator, seeded by the campaign's draw for that step; a
lab's ``simulate`` reads ``rngs[i]`` exactly as ``numpy.random.default_rng(seeds[i])``.
Building that generator costs a ``SeedSequence`` hash, a ``PCG64`` and a ``Generator`` per
experiment (about 10 µs, most of a vector env's step on a cheap lab). Here the hash runs
for all seeds at once in numpy (:func:`pcg64_states`, numpy's ``SeedSequence`` algorithm
on ``uint32`` words), and generators are taken from a pool and given the state that
``PCG64(SeedSequence(seed))`` would start in, so the streams are the same draw for draw
(tests compare them with numpy's own). ``rng.spawn`` and ``rng.bit_generator.seed_seq``
give what they give on ``default_rng(seed)``: the ``SeedSequence`` is made when first asked.

A pooled generator belongs to its experiment for the duration of one ``simulate`` call
(:func:`experiment_generators`); a lab must not keep it past the call.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
from numpy.random.bit_generator import ISeedSequence

# numpy's SeedSequence constants (numpy/random/bit_generator.pyx)
_INIT_A = 0x43B0D7E5
_MULT_A = 0x931E8875
_INIT_B = 0x8B51F9DD
_MULT_B = 0x58F38DED
_MIX_MULT_L = 0xCA01F9DD
_MIX_MULT_R = 0x4973F715
_MASK32 = 0xFFFFFFFF
_POOL = 4  # SeedSequence's default pool size, in 32-bit words
# PCG64's 128-bit LCG multiplier (PCG_DEFAULT_MULTIPLIER_128)
_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341
_MASK128 = (1 << 128) - 1


def _hash_constants(init: int, mult: int, n: int) -> list[np.uint32]:
    """The running hash constant before each of ``n`` hashes (it does not depend on data)."""
    out, h = [], init
    for _ in range(n):
        out.append(np.uint32(h))
        h = (h * mult) & _MASK32
    return out


# mix_entropy hashes 4 words, then 4 * 3 pool words; generate_state hashes 8 words
_HASH_A = _hash_constants(_INIT_A, _MULT_A, _POOL + _POOL * (_POOL - 1))
_HASH_B = _hash_constants(_INIT_B, _MULT_B, 2 * _POOL)
_SHIFT = np.uint32(16)


def _hashmix(value: np.ndarray, k: int) -> np.ndarray:
    value = value ^ _HASH_A[k]
    value = value * np.uint32((int(_HASH_A[k]) * _MULT_A) & _MASK32)
    return value ^ (value >> _SHIFT)


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
    return result ^ (result >> _SHIFT)


def seed_words(seeds: Sequence[int]) -> np.ndarray:
    """``SeedSequence(seed).generate_state(4, np.uint64)`` for every seed, as ``(n, 4)`` uint64.

    For integer seeds in ``[0, 2**64)`` (one or two 32-bit words of entropy, which the
    pool of four holds, so no word is mixed in after the pool is full).
    """
    s = np.asarray(seeds, dtype=np.uint64).reshape(-1)
    with np.errstate(over="ignore"):
        words = [
            (s & np.uint64(_MASK32)).astype(np.uint32),
            (s >> np.uint64(32)).astype(np.uint32),
            np.zeros(s.shape, np.uint32),
            np.zeros(s.shape, np.uint32),
        ]
        pool = [_hashmix(words[i], i) for i in range(_POOL)]
        k = _POOL
        for i_src in range(_POOL):
            for i_dst in range(_POOL):
                if i_src != i_dst:
                    pool[i_dst] = _mix(pool[i_dst], _hashmix(pool[i_src], k))
                    k += 1
        state = []
        for i in range(2 * _POOL):
            h = _HASH_B[i]
            value = pool[i % _POOL] ^ h
            value = value * np.uint32((int(h) * _MULT_B) & _MASK32)
            state.append(value ^ (value >> _SHIFT))
    lo = np.stack(state[0::2], axis=1).astype(np.uint64)
    hi = np.stack(state[1::2], axis=1).astype(np.uint64)
    return lo | (hi << np.uint64(32))


_M32 = np.uint64(_MASK32)
_U32, _U63, _U1 = np.uint64(32), np.uint64(63), np.uint64(1)
_MULT_HI, _MULT_LO = np.uint64(_PCG_MULT >> 64), np.uint64(_PCG_MULT & ((1 << 64) - 1))


def _mul_wide(a: np.ndarray, b: np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """The 128-bit products ``a * b`` of uint64 words, as (high, low) words."""
    a0, a1, b0, b1 = a & _M32, a >> _U32, b & _M32, b >> _U32
    p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
    mid = (p00 >> _U32) + (p01 & _M32) + (p10 & _M32)
    return a1 * b1 + (p01 >> _U32) + (p10 >> _U32) + (mid >> _U32), (mid << _U32) | (p00 & _M32)


def pcg64_words(seeds: Sequence[int]) -> np.ndarray:
    """``(state, inc)`` that ``PCG64(seed)`` starts in, for every seed (pcg64_set_seed:
    ``inc = (w2:w3) << 1 | 1``, ``state = (inc + w0:w1) * MULT + inc`` mod 2**128), worked
    out in 64-bit words for all seeds at once: ``(n, 4)`` uint64, the columns the low and
    high words of the state, then of the increment."""
    w0, w1, w2, w3 = seed_words(seeds).T
    with np.errstate(over="ignore"):
        inc_hi, inc_lo = (w2 << _U1) | (w3 >> _U63), (w3 << _U1) | _U1
        s_lo = inc_lo + w1
        s_hi = inc_hi + w0 + (s_lo < inc_lo)
        hi, lo = _mul_wide(s_lo, _MULT_LO)
        hi = hi + s_lo * _MULT_HI + s_hi * _MULT_LO
        state_lo = lo + inc_lo
        state_hi = hi + inc_hi + (state_lo < lo)
    return np.stack([state_lo, state_hi, inc_lo, inc_hi], axis=1)


def pcg64_states(seeds: Sequence[int]) -> list[tuple[int, int]]:
    """:func:`pcg64_words` as the ``(state, inc)`` integers of numpy's ``state`` dict."""
    return [((sh << 64) | sl, (ih << 64) | il) for sl, sh, il, ih in pcg64_words(seeds).tolist()]


class SeedWords(ISeedSequence):
    """A seed sequence that hands ``PCG64`` the words ``SeedSequence(seed)`` would give it
    (:func:`seed_words`, worked out for many seeds at once), through numpy's documented
    ``ISeedSequence`` interface: a ``PCG64`` made from it starts where ``PCG64(seed)``
    starts, without hashing the seed again (about 2 µs a generator against 11 for
    ``default_rng(seed)``). Any other request is answered by ``SeedSequence(seed)`` itself."""

    __slots__ = ("seed", "words")

    def __init__(self, seed: int, words: np.ndarray) -> None:
        self.seed, self.words = seed, words

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words == 4 and np.dtype(dtype) == np.uint64:
            return self.words.copy()
        return np.random.SeedSequence(self.seed).generate_state(n_words, dtype)


#: from this many seeds on, :func:`campaign_generators` hashes them together (numpy's fixed
#: cost of about a hundred array operations is then below default_rng's per seed)
_MANY = 16


def campaign_generators(seeds: Sequence[int]) -> list[np.random.Generator]:
    """New generators that draw as ``[numpy.random.default_rng(s) for s in seeds]``, kept by
    their owners (a campaign keeps its generator for life). ``seed_seq``, ``spawn`` and
    pickling answer as for ``default_rng(s)``."""
    seeds = [int(s) for s in seeds]
    if len(seeds) < _MANY or min(seeds) < 0 or max(seeds) >= 2**64:
        return [np.random.default_rng(s) for s in seeds]
    out = []
    for seed, words in zip(seeds, seed_words(seeds)):
        bit_generator = PCG64(SeedWords(seed, words))
        bit_generator._seed = seed
        out.append(np.random.Generator(bit_generator))
    return out


def _rebuilt_pcg64(state: dict[str, Any], seed: int) -> PCG64:
    bit_generator = PCG64(SeedWords(seed, np.zeros(4, np.uint64)))
    bit_generator.state = state
    bit_generator._seed = seed
    return bit_generator


class PCG64(np.random.PCG64):
    """A reusable ``PCG64`` set to the state ``PCG64(seed)`` starts in (:meth:`reseed_many`).

    ``seed_seq`` and ``spawn`` answer as ``PCG64(seed)`` would; the ``SeedSequence`` is
    made on first use. The class keeps numpy's name, so that its ``state`` dict is the
    one numpy's ``PCG64`` reads and writes.
    """

    _seed: int | None = None
    _seq: np.random.SeedSequence | None = None

    @staticmethod
    def reseed_many(bits: Sequence[PCG64], seeds: Sequence[int]) -> None:
        """Set each of ``bits`` to the state ``PCG64(seed)`` starts in, for its seed (integers
        in ``[0, 2**64)``). numpy's ``state`` setter reads the dict it is given and keeps
        none of it, so one dict serves every generator."""
        inner = {"state": 0, "inc": 0}
        state = {"bit_generator": "PCG64", "state": inner, "has_uint32": 0, "uinteger": 0}
        for bit_generator, seed, (inner["state"], inner["inc"]) in zip(
            bits, seeds, pcg64_states(seeds)
        ):
            bit_generator.state = state
            bit_generator._seed, bit_generator._seq = seed, None

    @property
    def seed_seq(self) -> np.random.SeedSequence:
        if self._seed is None:  # not reseeded here (e.g. unpickled in a worker)
            return super().seed_seq
        if self._seq is None:
            self._seq = np.random.SeedSequence(self._seed)
        return self._seq

    def spawn(self, n_children: int) -> list[np.random.PCG64]:
        return [np.random.PCG64(seed=s) for s in self.seed_seq.spawn(n_children)]

    def __reduce__(self) -> Any:
        if self._seed is None:
            return super().__reduce__()
        return _rebuilt_pcg64, (self.state, self._seed)


_MASK64 = (1 << 64) - 1


def integer_below(rng: np.random.Generator, high: int) -> int:
    """``int(rng.integers(0, high))`` for ``2**32 < high <= 2**64``, drawn the same way
    (numpy's Lemire rejection on one ``next_uint64`` per try) without the call's argument
    handling: about a quarter of its time. Campaigns draw every experiment seed with it."""
    bits = rng.bit_generator
    m = bits.random_raw() * high
    if (m & _MASK64) < high:  # numpy's rejection test (rare; never for 2**63 - 1)
        threshold = ((1 << 64) - high) % high
        while (m & _MASK64) < threshold:
            m = bits.random_raw() * high
    return m >> 64


class _StateLayout(NamedTuple):
    """Where numpy's ``PCG64`` keeps its state, as 64-bit words from ``state_address + 8``
    (the ``has_uint32``/``uinteger`` word first, the 128-bit state and increment after)."""

    words: int  # words written per generator
    state_at: int  # the word where the state begins
    order: list[int]  # pcg64_words columns in memory order


def _raw_words(bit_generator: np.random.PCG64, words: int) -> memoryview:
    """The bytes of ``bit_generator``'s state (:class:`_StateLayout`), writable."""
    address = bit_generator.ctypes.state_address
    return memoryview((ctypes.c_uint64 * words).from_address(address + 8)).cast("B")


def _probe_layout() -> _StateLayout | None:
    """numpy's ``PCG64`` state struct as this build lays it out, or None where it is not
    the one :func:`experiment_generators` can write (then numpy's ``state`` setter is used).

    The struct is numpy's (``pcg64_state``: a pointer to the 128-bit state and increment,
    then ``has_uint32`` and ``uinteger``), reached through the documented
    ``ctypes.state_address``; its layout is not part of numpy's interface, so it is checked
    here against the setter and the getter on a probe generator, word by word, before use."""
    try:
        probe = np.random.PCG64(0)
        address = probe.ctypes.state_address
        pointer = ctypes.c_uint64.from_address(address).value
        gap = pointer - address  # the state follows the struct inside the object
        if sys.byteorder != "little" or gap % 8 or not 16 <= gap <= 64:
            return None
        words, state_at = (gap + 32 - 8) // 8, (gap - 8) // 8
        a, b, c, d = 0x1122334455667788, 0x99AABBCCDDEEFF00, 0x0F1E2D3C4B5A6978, 0x8796A5B4C3D2E1F1
        probe.state = {
            "bit_generator": "PCG64",
            "state": {"state": (a << 64) | b, "inc": (c << 64) | d},
            "has_uint32": 1,
            "uinteger": 0x76543210,
        }
        raw = np.frombuffer(_raw_words(probe, words), np.uint64)
        found = raw[state_at:].tolist()
        if raw[0] != (0x76543210 << 32) | 1:
            return None
        if found == [b, a, d, c]:  # native 128-bit integers: low word first
            order = [0, 1, 2, 3]
        elif found == [a, b, c, d]:  # numpy's two-word emulation: high word first
            order = [1, 0, 3, 2]
        else:
            return None
        layout = _StateLayout(words, state_at, order)
        seed = 2**63 + 12345  # and back: written here, read by numpy, drawn as numpy draws
        rows = np.zeros((1, words), np.uint64)
        rows[:, state_at:] = pcg64_words([seed])[:, order]
        _raw_words(probe, words)[:] = memoryview(rows).cast("B")
        expect = np.random.PCG64(seed)
        if (
            probe.state != expect.state
            or probe.random_raw(3).tolist() != expect.random_raw(3).tolist()
        ):
            return None
        return layout
    except Exception:  # anything unexpected: numpy's setter
        return None


_LAYOUT = _probe_layout()
_lock = threading.Lock()
_free: list[tuple[np.random.Generator, memoryview | None]] = []


def _lendable() -> tuple[np.random.Generator, memoryview | None]:
    rng = np.random.Generator(PCG64(0))
    raw = None if _LAYOUT is None else _raw_words(rng.bit_generator, _LAYOUT.words)
    return rng, raw


@contextmanager
def experiment_generators(seeds: Sequence[int]) -> Iterator[list[np.random.Generator]]:
    """Generators that draw as ``[numpy.random.default_rng(s) for s in seeds]``, lent for
    the ``with`` block (reentrant and thread-safe: each call takes its own from the pool).

    A lent generator is set to its seed's starting state by writing the state words of
    all seeds (:func:`pcg64_words`) straight into each generator's state (a memory copy of
    48 bytes, against numpy's ``state`` setter, which parses a dict and divides 128-bit
    integers: about a fifth of a cheap lab's step in a vector env). Where numpy lays the
    state out otherwise (:func:`_probe_layout`), the setter does it."""
    seeds = [int(s) for s in seeds]
    if seeds and (min(seeds) < 0 or max(seeds) >= 2**64):  # numpy's own path (and error)
        yield [np.random.default_rng(s) for s in seeds]
        return
    with _lock:
        taken = _free[len(_free) - len(seeds) :] if len(seeds) <= len(_free) else list(_free)
        del _free[len(_free) - len(taken) :]
    while len(taken) < len(seeds):
        taken.append(_lendable())
    rngs = [rng for rng, _ in taken]
    if seeds and _LAYOUT is None:
        PCG64.reseed_many([rng.bit_generator for rng in rngs], seeds)
    elif seeds:
        words = _LAYOUT.words
        rows = np.zeros((len(seeds), words), np.uint64)  # has_uint32 and uinteger: 0
        rows[:, _LAYOUT.state_at :] = pcg64_words(seeds)[:, _LAYOUT.order]
        src, size = memoryview(rows).cast("B"), 8 * words
        for (rng, raw), at, seed in zip(taken, range(0, len(seeds) * size, size), seeds):
            raw[:] = src[at : at + size]  # type: ignore[index]
            bit_generator = rng.bit_generator
            bit_generator._seed, bit_generator._seq = seed, None
    try:
        yield rngs
    finally:
        with _lock:
            _free.extend(taken)
