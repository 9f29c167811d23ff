"""Prompt-lookup drafting: propose the continuation of an earlier occurrence of the suffix.

No draft model is needed. It shines when the answer repeats the prompt (code edits,
summaries with quotes, structured output) and costs nothing when it finds no match.
"""

from __future__ import annotations

from collections.abc import Sequence


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
                follow = list(tokens[start + n : start + n + k])
                if follow:
                    return follow
    return []


class NgramIndex:
    """``propose`` in constant time per step: the last two starts of every n-gram, kept up to
    date as the sequence grows. A scan of a 4,000-token conversation per step costs about a
    millisecond of Python, more than a GPU target's whole decode."""

    def __init__(self, max_n: int) -> None:
        self.max_n = max_n
        self._tokens: list[int] = []
        self._starts: dict[tuple[int, ...], tuple[int, int]] = {}  # n-gram -> (previous, last)

    def sync(self, tokens: Sequence[int]) -> None:
        """Index ``tokens`` (a sequence that grew from the last one, or a new one)."""
        known = self._tokens
        n_known = len(known)
        if (
            len(tokens) < n_known
            or (n_known and tokens[n_known - 1] != known[-1])
            or (n_known and tokens[0] != known[0])
        ):
            self._tokens, self._starts, n_known = [], {}, 0
            known = self._tokens
        starts = self._starts
        for index in range(n_known, len(tokens)):
            known.append(tokens[index])
            for n in range(1, self.max_n + 1):
                start = index - n + 1
                if start < 0:
                    break
                key = tuple(known[start : index + 1])
                previous = starts.get(key)
                starts[key] = (previous[1] if previous else -1, start)

    def propose(self, tokens: Sequence[int], *, k: int, min_n: int = 1) -> list[int]:
        """The same proposal as ``propose(tokens, max_n=self.max_n, k=k, min_n=min_n)``."""
        if k <= 0:
            return []
        self.sync(tokens)
        length = len(tokens)
        for n in range(min(self.max_n, length - 1), min_n - 1, -1):
            found = self._starts.get(tuple(tokens[length - n :]))
            if found is None:
                continue
            previous, last = found
            start = previous if last == length - n else last
            if start >= 0:
                return list(tokens[start + n : start + n + k])
        return []
