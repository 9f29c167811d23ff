"""Exactness check: does speculative output equal target-only output token for token?

On CPU (and GPU) a batched verification pass and a single-token pass use different
arithmetic, so a greedy run can flip a near-tie. Such a divergence is reported with the
target's top-two logit margin at that position: a small margin means a near-tie, a large
one means a bug. Nothing is hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.engine.engine import Engine

NEAR_TIE_LOGIT_MARGIN = 0.5  # below this the flip is attributed to batched arithmetic


@dataclass(frozen=True)
class Comparison:
    identical: bool
    first_divergence: int | None  # index in the generated tokens
    margin: float | None  # target's top-1 minus top-2 logit at the divergence
    compared: int  # tokens compared (the shorter of the two outputs)

    @property
    def near_tie(self) -> bool:
        return self.margin is not None and self.margin < NEAR_TIE_LOGIT_MARGIN

    def describe(self) -> str:
        if self.identical:
            return "identical"
        kind = "near-tie" if self.near_tie else "NOT a near-tie"
        return f"diverged at token {self.first_divergence} ({kind}, margin {self.margin:.4f})"


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None


def compare(
    prompt: Sequence[int], speculative: Sequence[int], baseline: Sequence[int], engine: Engine
) -> Comparison:
    """Compare two outputs of the same prompt; measure the target's margin where they split.

    Outputs of different lengths that agree on their common part (one hit max tokens or a
    stop string first) count as identical over the compared span.
    """
    compared = min(len(speculative), len(baseline))
    index = first_divergence(speculative, baseline)
    if index is None:
        return Comparison(True, None, None, compared)
    _, _, margin = engine.target_margin([*prompt, *baseline[:index]])
    return Comparison(False, index, margin, compared)
