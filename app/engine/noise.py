"""Can a bench row's timings be trusted? The spread of its own step times says.

Every decoding step pays one target pass whose batch size is known. On a machine nobody else
is using, passes of one size cost the same within a few per cent from step to step and from
round to round. Another program taking cores for part of a run shows as a stretch of slow
passes: the run's *spread*. One busy through a whole run shows as a round slower than the
others: the *drift* across rounds. Each pass is measured against the median of the passes of
its size over every round of its mode, so blocks of different lengths can be judged together.

One busy through one mode's run and not the other's, in every round, moves neither: it shows
as the *gap* between the modes, where both paid the same work. A step that drafted nothing
and paid no draft pass costs one single target pass in either mode; the speculative run's
median such pass over the target-only run's, in one round, should be one. A speedup read
where it is not is off by about that much.
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
GAP_LIMIT = 1.1  # one mode's median lone single pass over the other's, in one round
# cores other programs kept busy during one mode's run beyond the other's, in one round: a quiet
# machine's modes differ by under 0.1; under the bench's bursts a third of the rounds by more
LOAD_GAP_LIMIT = 0.25


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


def pass_gap(baseline: Sequence[float], speculative: Sequence[float]) -> float | None:
    """The speculative run's median lone single pass over the target-only run's (one round;
    each argument: the ms of those passes); None under ``MIN_PASSES`` of them either side."""
    ms = [[m for m in run if m > 0.0 and math.isfinite(m)] for run in (baseline, speculative)]
    if min(len(run) for run in ms) < MIN_PASSES:
        return None
    return statistics.median(ms[1]) / statistics.median(ms[0])


def gap_reasons(gaps: Sequence[float | None]) -> list[str]:
    """What the per-round gaps past ``GAP_LIMIT`` (either way) say, in words."""
    return [
        f"single target passes cost {gap:.2f}× in the speculative run what they cost "
        f"target-only in round {number}"
        for number, gap in enumerate(gaps, start=1)
        if gap is not None and max(gap, 1.0 / gap) > GAP_LIMIT
    ]


def loads_apart(baseline: float | None, speculative: float | None) -> bool:
    """Whether other programs kept ``LOAD_GAP_LIMIT`` cores or more busier during one mode's
    run than the other's (each: the cores they kept busy; None, not measured: not apart)."""
    if baseline is None or speculative is None:
        return False
    return abs(speculative - baseline) >= LOAD_GAP_LIMIT


def at_equal_passes(
    speedup: float, gap: float | None, loads: tuple[float | None, float | None]
) -> float | None:
    """A round's speedup had the single target passes both modes pay alike cost the same in
    both runs: the speedup times the pass gap. None without a gap, and where other programs
    loaded one mode's run more than the other's (``loads_apart``): the lone passes then need
    not have met the load at all. A 24-token answer under bursts read 0.61x "at equal passes"
    from a round with a gap of 1.05 whose speculative run had 0.59 cores of other programs
    against 0.01 target-only: the burst fell on its draft passes, which no gap sees."""
    if gap is None or loads_apart(*loads):
        return None
    return speedup * gap


def load_gap_reasons(loads: Sequence[tuple[float | None, float | None]]) -> list[str]:
    """What the other programs' load says where it fell on one mode's run more than on the
    other's (``loads``: per round, the cores they kept busy target-only and speculative). A
    gap between the modes' passes shows it too, but a draft accepted whole leaves no lone
    target pass to compare: an edit prompt at acceptance 1.00 read 0.87x with 0.95 cores busy
    in its speculative runs against 0.46 target-only, and was not flagged."""
    return [
        f"other programs kept {spec:.2f} cores busy in the speculative run and {base:.2f} "
        f"target-only in round {number}"
        for number, (base, spec) in enumerate(loads, start=1)
        if loads_apart(base, spec)
    ]


def noise_flag(
    *judged: Steadiness,
    gaps: Sequence[float | None] = (),
    loads: Sequence[tuple[float | None, float | None]] = (),
) -> str | None:
    """``"noisy: …"`` with the figures that exceeded their limits, or None for a steady row."""
    reasons = [reason for one in judged for reason in one.reasons()]
    reasons += gap_reasons(gaps) + load_gap_reasons(loads)
    return "noisy: " + "; ".join(reasons) if reasons else None
