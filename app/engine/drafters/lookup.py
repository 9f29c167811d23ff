"""Prompt-lookup drafting: propose the continuation of an earlier occurrence of the suffix.

No draft model is needed. It shines when the answer repeats the prompt (code edits,
summaries with quotes, structured output) and costs nothing when it finds no match. With
adaptive lengths and a cost model, a match is verified only as far as it pays for its
verification at this depth, or held back (``LookupGate``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from app.engine.config import SpecConfig
from app.engine.drafters.base import DraftBlock, Drafter, DraftLimits
from app.engine.policy.costs import CostModel
from app.engine.policy.lookup_gate import LookupGate


def propose(tokens: Sequence[int], *, max_n: int, k: int, min_n: int = 1) -> list[int]:
    """Up to ``k`` tokens that followed the most recent earlier match of the longest suffix."""
    if k <= 0:
        return []
    length = len(tokens)
    for n in range(min(max_n, length - 1), min_n - 1, -1):
        suffix = list(tokens[length - n :])
        # scan backwards so the most recent occurrence wins
        for start in range(length - n - 1, -1, -1):
            if tokens[start] == suffix[0] and list(tokens[start : start + n]) == suffix:
                return continuation(tokens, start + n, k)
    return []


def continuation(tokens: Sequence[int], at: int, k: int) -> list[int]:
    """``k`` tokens copied from ``at`` on; past the end the copy goes on over what it has
    copied (a repeating run: after "x x x" the most recent match of "x x" is one token from
    the end, and its continuation is "x x x …", not the one "x" left in the sequence)."""
    length = len(tokens)
    follow = list(tokens[at : at + k])
    while len(follow) < k and at < length:
        follow.append(follow[len(follow) - (length - at)])
    return follow


class NgramIndex:
    """``propose`` in constant time per step: the last two starts of every n-gram, kept up to
    date as the sequence grows. A scan of a 4,000-token conversation per step costs about a
    millisecond of Python, more than a GPU target's whole decode.

    ``follow`` adds a cursor for copies: a text with repeated lines (a command list, code
    with the same call on many lines) has its three-token suffixes at many places, and the
    most recent one is often not the one being copied (the README's command list copied
    with lookups refused one step in four that way). While every token written since the
    last proposal continued the run it came from, the next proposal continues that run.
    """

    def __init__(self, max_n: int) -> None:
        self.max_n = max_n
        self._tokens: list[int] = []
        self._starts: dict[tuple[int, ...], tuple[int, int]] = {}  # n-gram -> (previous, last)
        # (where the followed run continues, the sequence length it continues at)
        self._cursor: tuple[int, int] | None = None

    def sync(self, tokens: Sequence[int]) -> None:
        """Index ``tokens`` (a sequence that grew from the last one, or a new one)."""
        known = self._tokens
        n_known = len(known)
        if (
            len(tokens) < n_known
            or (n_known and tokens[n_known - 1] != known[-1])
            or (n_known and tokens[0] != known[0])
        ):
            self._tokens, self._starts, self._cursor, n_known = [], {}, None, 0
            known = self._tokens
        starts, max_n = self._starts, self.max_n
        for index in range(n_known, len(tokens)):
            known.append(tokens[index])
            # the n-grams ending here are the tails of one tuple: slicing a tuple makes the
            # key at once, where a list slice is made and then copied into one
            tail = tuple(known[max(index - max_n + 1, 0) :])
            for n in range(1, len(tail) + 1):
                key = tail[-n:]
                previous = starts.get(key)
                starts[key] = (previous[1] if previous else -1, index - n + 1)

    def propose(self, tokens: Sequence[int], *, k: int, min_n: int = 1) -> list[int]:
        """The same proposal as ``propose(tokens, max_n=self.max_n, k=k, min_n=min_n)``."""
        if k <= 0:
            return []
        self.sync(tokens)
        at = self._locate(tokens, min_n)
        return [] if at is None else continuation(tokens, at, k)

    def follow(self, tokens: Sequence[int], *, k: int, min_n: int = 1) -> list[int]:
        """``propose``, except that while the sequence keeps copying the run the last
        proposal came from, it proposes that run's continuation."""
        if k <= 0:
            return []
        self.sync(tokens)
        length = len(tokens)
        cursor = self._cursor
        at: int | None = None
        if cursor is not None:
            source, since = cursor
            written = length - since
            if written >= 0 and tokens[source : source + written] == tokens[since:length]:
                at = source + written
        if at is None:
            at = self._locate(tokens, min_n)
        self._cursor = None if at is None else (at, length)
        return [] if at is None else continuation(tokens, at, k)

    def _locate(self, tokens: Sequence[int], min_n: int) -> int | None:
        """Where the continuation of the longest suffix's most recent earlier match starts."""
        length = len(tokens)
        for n in range(min(self.max_n, length - 1), min_n - 1, -1):
            found = self._starts.get(tuple(tokens[length - n :]))
            if found is None:
                continue
            previous, last = found
            start = previous if last == length - n else last
            if start >= 0:
                return start + n
        return None


COPY_RUN = 8  # tokens in a row that make a stretch of the answer a copy, not a coincidence


def copied_fraction(source: Sequence[int], answer: Sequence[int], run: int = COPY_RUN) -> float:
    """The share of ``answer``'s tokens that lie in a stretch of at least ``run`` tokens
    found verbatim in ``source``: how much of an answer copies its prompt (what lookups can
    draft for free), measured on what the model wrote rather than on what was asked."""
    if len(answer) < run:
        return 0.0
    windows = {tuple(source[i : i + run]) for i in range(len(source) - run + 1)}
    copied = [False] * len(answer)
    for start in range(len(answer) - run + 1):
        if tuple(answer[start : start + run]) in windows:
            copied[start : start + run] = [True] * run
    return sum(copied) / len(answer)


def _through_end(tokens: list[int], ends_answer: Callable[[int], bool]) -> list[int]:
    """``tokens`` up to and including the first one that ends the answer."""
    for index, token in enumerate(tokens):
        if ends_answer(token):
            return tokens[: index + 1]
    return tokens


class NgramDrafter(Drafter):
    """Prompt lookup over the whole conversation: no model, no draft pass, no confidence."""

    name = "n-gram"

    def __init__(
        self, spec: SpecConfig, *, min_match: int = 1, costs: CostModel | None = None
    ) -> None:
        self.index = NgramIndex(spec.ngram_n)
        self.min_match = min_match
        self.gate = LookupGate(costs) if costs is not None and spec.adaptive else None

    @property
    def confidence_driven(self) -> bool:
        return self.gate is not None  # the gate sizes each block; the controller the ceiling

    def prefill(self, prompt: list[int]) -> None:
        """Index the prompt with the prompt's processing: the steps then index only what
        they add, and the first is no slower than the rest. Indexed even while paused:
        gated lookups go on while the guard has the model paused."""
        self.index.sync(prompt)

    def match(self, committed: list[int], limits: DraftLimits) -> list[int]:
        """The lookup's match after ``committed``, ungated (empty: none)."""
        tokens = self.index.follow(committed, k=limits.k, min_n=self.min_match)
        if limits.ends_answer is not None:
            tokens = _through_end(tokens, limits.ends_answer)
        return tokens

    def judge_held(self, committed: list[int]) -> None:
        if self.gate is not None:
            self.gate.judge_held(committed)

    def propose(self, committed: list[int], limits: DraftLimits) -> DraftBlock:
        began = time.perf_counter()
        tokens = self.match(committed, limits)
        if self.gate is not None:
            self.gate.judge_held(committed)
            keep = self.gate.length(len(tokens), limits.k, len(committed))
            if not keep:
                self.gate.hold(len(committed), tokens, priced=True)
            tokens = tokens[:keep]
        block = DraftBlock(
            tokens=tokens, probs=[None] * len(tokens), source=self.name, depth=len(committed)
        )
        block.confidences = [None] * len(tokens)
        block.ms = (time.perf_counter() - began) * 1000.0
        return block

    def hold_back(self, committed: list[int], block: DraftBlock) -> None:
        """A proposed block that will not be verified: judge it by what the target writes."""
        if self.gate is not None:
            self.gate.hold(len(committed), block.tokens)

    def observe(self, block: DraftBlock, accepted: int) -> None:
        if self.gate is not None:
            self.gate.observe(len(block.tokens), accepted)
