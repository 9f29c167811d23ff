"""Can a bench row's timings be trusted? The spread of its own step times says.

Every decoding step pays one target pass whose batch size is known. On a machine nobody else
is using, passes of one size cost the same within a few per cent from step to step and from
round to round. Another program taking cores for part of a run shows as a stretch of slow
passes: the run's *spread*. One busy through a whole run shows as a round slower than the
others: the *drift* across rounds. Each pass is measured against the median of the passes of
its size over every round of its mode, so blocks of different lengths can be judged together.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Pass = tuple[int, float]  # (tokens in the batch, milliseconds)

SPREAD_LIMIT = 1.5  # one run's 90th over 10th percentile pass time, each against its size
DRIFT_LIMIT = 1.25  # the slowest round's median pass time over the fastest round's
# a run with fewer comparable passes is not judged; from 11 on, one slow pass (a page fault)
# never moves the 90th percentile by itself
MIN_PASSES = 11


@dataclass(frozen=True)
class Steadiness:
    """How steady one mode's (baseline or speculative) pass times were over its rounds."""

    mode: str
    spreads: tuple[float | None, ...]  # per round; None: too few comparable passes
    drift: float | None  # None: fewer than two rounds could be judged

    def reasons(self) -> list[str]:
        found = [
            f"{self.mode} step times spread {spread:.2f}× (p90/p10) in round {number}"
            for number, spread in enumerate(self.spreads, start=1)
            if spread is not None and spread > SPREAD_LIMIT
        ]
        if self.drift is not None and self.drift > DRIFT_LIMIT:
            found.append(f"{self.mode} rounds differ {self.drift:.2f}× in median step time")
        return found


def steadiness(mode: str, rounds: Sequence[Sequence[Pass]]) -> Steadiness:
    """Judge one mode's passes, one sequence per round."""
    by_size: dict[int, list[float]] = {}
    for passes in rounds:
        for size, ms in passes:
            if ms > 0.0 and math.isfinite(ms):
                by_size.setdefault(size, []).append(ms)
    # a size seen once has nothing to be compared with
    typical = {size: statistics.median(v) for size, v in by_size.items() if len(v) >= 2}
    relative = [
        [ms / typical[size] for size, ms in passes if size in typical and ms > 0.0]
        for passes in rounds
    ]
    spreads = tuple(_spread(values) for values in relative)
    centres = [statistics.median(values) for values in relative if len(values) >= MIN_PASSES]
    drift = max(centres) / min(centres) if len(centres) >= 2 else None
    return Steadiness(mode, spreads, drift)


def _spread(values: Sequence[float]) -> float | None:
    if len(values) < MIN_PASSES:
        return None
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return deciles[-1] / deciles[0] if deciles[0] > 0.0 else None


def noise_flag(*judged: Steadiness) -> str | None:
    """``"noisy: …"`` with the figures that exceeded their limits, or None for a steady row."""
    reasons = [reason for one in judged for reason in one.reasons()]
    return "noisy: " + "; ".join(reasons) if reasons else None
