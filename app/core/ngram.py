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
