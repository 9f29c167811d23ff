"""Sampler transforms and the speculative acceptance rules.

The transforms follow llama.cpp's default chain order: top-k, top-p and min-p filter the
temperature-1 distribution, then temperature reshapes what survives. The draft distribution
q and the target distribution p go through the same transforms, which the exactness proof of
speculative sampling requires.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from app.engine.config import SamplerConfig


def greedy(logits: np.ndarray) -> int:
    return int(logits.argmax())


_scratch = threading.local()

_SAFE_EXP = 60.0  # |peak| below this: exp() of a whole row cannot overflow float32's sum


def _scratch_row(name: str, n: int, dtype: type) -> np.ndarray:
    """A scratch row reused per thread: a 151,936-entry temporary per call would cost an
    allocation and page faults on every token."""
    buf = getattr(_scratch, name, None)
    if buf is None or buf.shape[0] < n:
        buf = np.full(n, 1, dtype=dtype)
        setattr(_scratch, name, buf)
    return buf[:n]


def top_probability(logits: np.ndarray, best: int | None = None) -> float:
    """Softmax probability of the argmax token (``best``, when the caller knows it).

    Two passes over the row: exp in float32 into a reused buffer, then a BLAS dot with ones
    for the sum (SIMD, about 2x faster than ``ndarray.sum``). With the peak within +-60 the
    exp needs no shift by the peak (sum <= 151,936 * e^60 fits float32). Relative error
    ~1e-5 at most on real rows, far below what a person reads or the calibration bins.
    """
    n = logits.shape[0]
    peak = float(logits[best]) if best is not None else float(logits.max())
    buf = _scratch_row("row", n, np.float32)
    ones = _scratch_row("ones", n, np.float32)
    if -_SAFE_EXP <= peak <= _SAFE_EXP:
        np.exp(logits, out=buf)
        return math.exp(peak) / float(np.dot(buf, ones))
    np.subtract(logits, np.float32(peak), out=buf)
    np.exp(buf, out=buf)
    return 1.0 / float(np.dot(buf, ones))


def top_two_margin(logits: np.ndarray) -> tuple[int, int, float]:
    """(best id, second id, logit margin between them)."""
    two = np.argpartition(logits, -2)[-2:]
    first, second = (two[1], two[0]) if logits[two[1]] >= logits[two[0]] else (two[0], two[1])
    return int(first), int(second), float(logits[first] - logits[second])


@dataclass(frozen=True)
class Distribution:
    """A sparse probability distribution over token ids (probabilities sum to 1)."""

    ids: np.ndarray  # int64, or int32 as llama.cpp returns candidates
    probs: np.ndarray  # float64, or float32 as llama.cpp's softmax gives them

    def prob(self, token: int) -> float:
        hit = np.flatnonzero(self.ids == token)
        return float(self.probs[hit[0]]) if hit.size else 0.0

    def sample(self, uniform: float) -> int:
        """The token whose cumulative probability interval holds ``uniform`` (in [0, 1))."""
        return int(self.ids[_draw(self.probs, uniform)])

    def draw(self, uniform: float) -> tuple[int, float]:
        """``sample`` and that token's probability, without looking it up again."""
        index = _draw(self.probs, uniform)
        return int(self.ids[index]), float(self.probs[index])

    def dense(self, n_vocab: int) -> np.ndarray:
        out = np.zeros(n_vocab, dtype=np.float64)
        out[self.ids] = self.probs
        return out


def _draw(probs: np.ndarray, uniform: float) -> int:
    cumulative = np.cumsum(probs)
    index = int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))
    return min(index, probs.size - 1)


_SAMPLE_STRIDE = 16  # every 16th logit estimates where the row's top k begin
_EXPECTED_ABOVE = 4  # the threshold is set so that about 4k entries pass it
_MOST_ABOVE = 64  # more than 64k entries passing (a flat row, ties): partition everything


def _top_k_ids(logits: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k largest logits (any order), exactly.

    A threshold from a strided sample (the sample's 4k/16-th largest value) keeps about 4k
    entries of any row, peaked or flat; when at least k pass it, the k largest are among
    them, so one comparison pass and a partition of those few replace a partition of the
    whole vocabulary (about 60 us instead of 200 us on a 151,936-entry row). When fewer
    than k pass (or far too many, or NaNs), the whole row is partitioned.
    """
    n = logits.shape[0]
    if k * _MOST_ABOVE > n:
        return np.argpartition(logits, -k)[-k:]
    sample = logits[::_SAMPLE_STRIDE]
    rank = min(sample.size, max(1, k * _EXPECTED_ABOVE // _SAMPLE_STRIDE))
    threshold = np.partition(sample, sample.size - rank)[sample.size - rank]
    near = np.flatnonzero(logits >= threshold)
    count = near.size
    if k <= count <= k * _MOST_ABOVE:
        if count == k:
            return near
        return near[np.argpartition(logits[near], -k)[-k:]]
    return np.argpartition(logits, -k)[-k:]


def distribution(logits: np.ndarray, config: SamplerConfig) -> Distribution:
    """Apply top-k, top-p, min-p then temperature; return the surviving distribution."""
    n_vocab = logits.shape[0]
    k = config.top_k if 0 < config.top_k < n_vocab else n_vocab
    ids = _top_k_ids(logits, k) if k < n_vocab else np.arange(n_vocab)
    raw = logits[ids].astype(np.float64)
    order = np.argsort(-raw, kind="stable")
    ids, raw = ids[order], raw[order]
    probs = np.exp(raw - raw[0])
    probs /= probs.sum()
    keep = ids.size
    if config.top_p < 1.0:
        # keep the smallest prefix whose mass reaches top_p (at least one token)
        keep = min(keep, int(np.searchsorted(np.cumsum(probs), config.top_p)) + 1)
    if config.min_p > 0.0:
        keep = min(keep, max(1, int(np.count_nonzero(probs >= config.min_p * probs[0]))))
    ids, raw = ids[:keep], raw[:keep]
    temperature = max(config.temperature, 1e-6)
    scaled = np.exp((raw - raw[0]) / temperature)
    return Distribution(ids=ids.astype(np.int64), probs=scaled / scaled.sum())


def residual(p: Distribution, q: Distribution, n_vocab: int) -> Distribution:
    """normalize(max(0, p - q)): where to sample after rejecting a draft token.

    Computed over the ids either distribution holds (a few dozen after top-k), in ascending
    id order as a dense pass over the vocabulary would give them, without the two
    vocabulary-sized float64 arrays (2.4 MB at 151,936 tokens) a dense difference needs.
    """
    inside = q.ids < n_vocab
    q_ids, q_probs = q.ids[inside], q.probs[inside]
    ids = np.union1d(p.ids, q_ids)
    diff = np.zeros(ids.size, dtype=np.float64)
    diff[np.searchsorted(ids, p.ids)] = p.probs
    diff[np.searchsorted(ids, q_ids)] -= q_probs
    np.maximum(diff, 0.0, out=diff)
    keep = np.flatnonzero(diff)
    if keep.size == 0:  # p == q exactly; any sample from p is then correct
        return p
    mass = diff[keep]
    return Distribution(ids=ids[keep].astype(np.int64), probs=mass / mass.sum())


def point_mass(token: int) -> Distribution:
    """The draft distribution of a deterministic proposer (n-gram lookup, greedy draft)."""
    return Distribution(ids=np.array([token], dtype=np.int64), probs=np.array([1.0]))


# --- sampling on the device ------------------------------------------------------------------

# At T = 0 the device keeps the 40 largest logits of a row: the argmax, the top-two margin and
# p(x) come from them. p(x) is then normalised over those 40, not the whole vocabulary: an
# upper bound on the full softmax, equal to it wherever the rest of the row holds no mass.
GREEDY_CANDIDATES = 40


@dataclass(frozen=True)
class DeviceChain:
    """The sampler stages llama.cpp runs on the device after the output layer, in SpecDeck's
    (and llama.cpp's default) order: top-k, top-p, min-p, then temperature. Only the top-k
    stage shrinks a row; top-p and min-p set what they cut to -inf, temperature scales. A
    final softmax (llama.cpp's ``dist`` stage, whose own draw is not used: SpecDeck draws with
    its position-keyed randomness) gives the probabilities."""

    top_k: int
    top_p: float = 1.0
    min_p: float = 0.0
    temperature: float = 0.0  # 0: no temperature stage (the greedy chain, logits at T = 1)


DEVICE = "device"
# Where the output layer runs on the CPU, llama.cpp's top-k runs in the same threads inside
# llama_decode and costs more there than the host's partition of the same row: on the fast
# pair (2 cores), whole tokens/sec fell by 15-24 % with the chain attached although the time
# outside llama_decode halved (``python -m app.devtools.sampling_placement``). A chain pays
# where a GPU computes the rows.
HOST_ON_CPU = "host (the output layer runs on the CPU, where a device chain costs more)"
HOST_ASKED = "host (as asked)"


def device_chain(config: SamplerConfig, n_vocab: int) -> tuple[DeviceChain | None, str]:
    """The chain that runs ``config`` on the device, or None and why the host samples.

    A chain is worth running only where top-k cuts the row to a few candidates: without it
    top-p and min-p still return a full-vocabulary row per output (cut entries as -inf).
    """
    if config.greedy:
        return DeviceChain(top_k=min(GREEDY_CANDIDATES, n_vocab)), DEVICE
    if not 0 < config.top_k < n_vocab:
        return None, "host (no top-k: the chain would return whole rows)"
    chain = DeviceChain(
        top_k=config.top_k,
        top_p=config.top_p,
        min_p=config.min_p,
        temperature=config.temperature,
    )
    return chain, DEVICE


class HostRow:
    """One full-vocabulary row of logits on the host: where no chain runs on the device."""

    __slots__ = ("logits",)

    def __init__(self, logits: np.ndarray) -> None:
        self.logits = logits

    def greedy(self) -> int:
        return greedy(self.logits)

    def top_probability(self, best: int) -> float:
        return top_probability(self.logits, best)

    def distribution(self, config: SamplerConfig) -> Distribution:
        return distribution(self.logits, config)

    def margin(self) -> tuple[int, int, float]:
        return top_two_margin(self.logits)


class CandidateRow:
    """What a device chain left of one row: candidate ids, their logits and their
    probabilities after the chain (llama.cpp's softmax over what survived: 0 where top-p or
    min-p cut a candidate, temperature applied), in no particular order. A few dozen entries
    instead of the whole vocabulary; nothing here is more than an index or a short sort."""

    __slots__ = ("_best", "descending", "ids", "logits", "probs")

    def __init__(
        self, ids: np.ndarray, logits: np.ndarray, probs: np.ndarray, *, descending: bool = False
    ) -> None:
        self.ids = ids
        self.logits = logits
        self.probs = probs
        # llama.cpp's top-p stage sorts the candidates by logit, largest first (what it cut
        # last); the top-k stage leaves them in no order
        self.descending = descending
        self._best = -1  # index of the largest logit, once looked for

    def _argmax(self) -> int:
        if self._best < 0:
            self._best = int(self.logits.argmax())
        return self._best

    def greedy(self) -> int:
        return int(self.ids[self._argmax()])

    def top_probability(self, best: int) -> float:
        """Probability of ``best`` over the candidates (the greedy chain's 40, at T = 1)."""
        at = self._argmax()
        if int(self.ids[at]) != best:
            at = int(np.flatnonzero(self.ids == best)[0])
        return float(self.probs[at])

    def distribution(self, config: SamplerConfig) -> Distribution:
        """The chain's distribution: its truncation and temperature were applied on the device
        (``config`` is the one the chain was built from), in descending order as the host path
        gives it."""
        probs = self.probs
        # copies, never views: llama.cpp overwrites its buffers at the next decode, and a
        # draft's q is judged after the target's
        if self.descending:  # each numpy call costs microseconds with the caches cold
            survivors = int(np.count_nonzero(probs))
            return Distribution(ids=self.ids[:survivors].copy(), probs=probs[:survivors].copy())
        order = np.argsort(-probs, kind="stable")
        kept = order[: int(np.count_nonzero(probs))]
        return Distribution(ids=self.ids[kept], probs=probs[kept])

    def margin(self) -> tuple[int, int, float]:
        return top_two_margin_of(self.ids, self.logits)


def top_two_margin_of(ids: np.ndarray, logits: np.ndarray) -> tuple[int, int, float]:
    """(best id, second id, logit margin) among candidates ``ids`` with ``logits``."""
    if logits.size < 2:
        return int(ids[0]), int(ids[0]), math.inf
    first, second, margin = top_two_margin(logits)
    return int(ids[first]), int(ids[second]), margin


Row = HostRow | CandidateRow
