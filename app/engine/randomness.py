"""Uniform random numbers keyed by (seed, position, stream).

With position-keyed randomness the number used at context position i depends only on the
seed and i, not on how many numbers were drawn before. Target-only sampling draws token i
with it; speculative sampling under llama.cpp's sample-and-match rule samples the target at
position i with the very same number. So at any temperature a seeded speculative answer is
token-identical to the seeded target-only answer (up to batched-arithmetic near-ties), and
the identity check stays meaningful while sampling. The draft samples position i with the
same number too, which couples it to the target and raises acceptance.

Streams keep independent uses at one position apart: 0 draws a token, 1 is the
rejection-sampling acceptance test, 2 draws from the residual after a rejection.
"""

from __future__ import annotations

import secrets

import numpy as np

_MASK = (1 << 64) - 1
DRAW, ACCEPT, RESIDUAL = 0, 1, 2


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class Randomness:
    """The uniform number for a (position, stream); sequential or position-keyed."""

    def __init__(self, seed: int | None, *, position_keyed: bool = True) -> None:
        self.seed = seed if seed is not None else secrets.randbits(63)
        self.position_keyed = position_keyed
        self._rng = np.random.default_rng(self.seed)
        self._key = _splitmix64(self.seed & _MASK)

    def uniform(self, position: int, stream: int = DRAW) -> float:
        if not self.position_keyed:
            return float(self._rng.random())
        bits = _splitmix64(self._key ^ _splitmix64((position << 2 | stream) & _MASK))
        return (bits >> 11) * (1.0 / (1 << 53))
