"""From result records to evidence: distributions, confidence intervals, failures, verdicts.

Pure functions over the records of a result file, so the CLI, the window and the report
all read the same numbers, and a finished or half-finished file can be analysed again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.engine.exactness import near_tie_words
from app.engine.figures import rate, speed_text
from app.lab import interference
from app.lab.plan import BASELINE, Claim

ALL = "all"
METRICS = (
    "speedup",
    "acceptance",
    "tokens_per_pass",
    "ttft_ms",
    "itl_p50_ms",
    "itl_p95_ms",
    "itl_p99_ms",
    "host_ms_per_token",
    "tok_s",
)
# A recommendation rests on at least this many held-out runs of its configuration in its
# category (prompts × repeats); fewer, and one lucky prompt decides it.
MIN_HELD_OUT_RUNS = 5
# A 95 % interval of a median is shown from this many runs on, and a claim is judged from
# this many held-out runs on: from one run the bootstrap gives a zero-width "interval"
# (1.18–1.18), from two to four little more than their range.
MIN_INTERVAL_RUNS = MIN_HELD_OUT_RUNS
TOO_FEW = "too few runs"  # a verdict's status when the held-out runs cannot decide the claim
UNDECIDED = "undecided"  # the interval reaches both sides of the claimed speedup


@dataclass(frozen=True)
class Row:
    """One configuration's run of one prompt, paired with its baseline."""

    phase: str
    prompt: str
    category: str
    repeat: int
    config: str
    speedup: float
    acceptance: float
    tokens_per_pass: float
    ttft_ms: float
    itl_p50_ms: float
    itl_p95_ms: float
    itl_p99_ms: float
    host_ms_per_token: float
    tok_s: float
    baseline_tok_s: float
    tokens: int
    peak_rss_mb: float | None
    guard_pauses: int
    identical: bool | None
    first_divergence: int | None
    margin: float | None
    load: str | None = None  # why the machine was not the run's alone (``interference.judge``)


@dataclass(frozen=True)
class Interval:
    median: float
    low: float
    high: float
    n: int

    @property
    def shown(self) -> bool:
        """Whether there are runs enough for the interval to mean anything."""
        return self.n >= MIN_INTERVAL_RUNS

    def spread(self) -> str:
        """The interval in words: "95% CI 1.10–1.30", or why there is none."""
        if self.shown:
            return f"95% CI {self.low:.2f}–{self.high:.2f}"
        if self.n == 1:
            return "one run: no interval"
        return f"{self.n} runs: too few for an interval"


@dataclass(frozen=True)
class CellSummary:
    phase: str
    category: str
    config: str
    medians: dict[str, Interval]
    slowdowns: int
    divergences: int
    guard_pauses: int
    peak_rss_mb: float | None
    disturbed: int = 0  # runs measured under outside load


@dataclass(frozen=True)
class Failure:
    phase: str
    prompt: str
    category: str
    config: str
    kind: str  # "slowdown" | "divergence" | "guard" | "load"
    detail: str


@dataclass(frozen=True)
class Verdict:
    claim: str
    config: str | None
    category: str
    threshold: float
    status: str  # "confirmed" | "falsified" | "not run" | TOO_FEW | UNDECIDED
    tuning: Interval | None
    confirmation: Interval | None
    disturbed: int = 0  # held-out runs of the claim measured under outside load
    held_out_prompts: int = 0  # the distinct prompts of those runs

    @property
    def raise_to(self) -> str:
        """What to raise for enough held-out runs (" (raise repeats to 5)"), or ""."""
        if not self.held_out_prompts:
            return ""
        return f" (raise repeats to {repeats_for(self.held_out_prompts)}, or add prompts)"

    def describe(self) -> str:
        if self.confirmation is None:
            return f"NOT RUN: {self.claim} (no confirmation results yet)"
        c = self.confirmation
        runs = "run" if c.n == 1 else "runs"
        spread = f"95% CI {c.low:.2f}–{c.high:.2f}, {c.n} {runs}" if c.shown else c.spread()
        measured = (
            f"On the held-out confirmation part {self.config} ran at a median {c.median:.2f}× "
            f"({spread}) against the claimed {self.threshold:g}×"
        )
        if self.status == TOO_FEW:
            text = (
                f"{TOO_FEW.upper()} to judge: {self.claim}. {measured}. Neither confirmed nor "
                f"falsified: a verdict needs at least {MIN_INTERVAL_RUNS} held-out runs"
                f"{self.raise_to}"
            )
        elif self.status == UNDECIDED:
            text = (
                f"{UNDECIDED.upper()}: {self.claim}. {measured}: the interval reaches both sides "
                f"of {self.threshold:g}×, so these runs neither confirm nor falsify it; more "
                "held-out runs would"
            )
        else:
            text = f"{self.status.upper()}: {self.claim}. {measured}"
        if self.disturbed:
            return (
                f"{interference.RERUN.upper()} ({self.disturbed} of {c.n} held-out runs shared the "
                f"machine). {text}"
            )
        return text


USE, TARGET_ALONE, NONE = "use", "target alone", "none"


@dataclass(frozen=True)
class Recommendation:
    category: str
    config: str | None  # what to use: None is the target alone, or no recommendation at all
    tuning_speedup: float | None
    confirmed_speedup: Interval | None
    reason: str
    candidate: str | None = None  # the best configuration on the tuning part
    status: str = NONE  # USE | TARGET_ALONE | NONE (withheld: the reason says why)

    @property
    def use(self) -> str:
        if self.status == USE and self.config:
            return self.config
        return "target alone" if self.status == TARGET_ALONE else "no recommendation"

    def describe(self) -> str:
        return f"{self.category}: {self.use} — {self.reason}"


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def rows_from(records: Iterable[dict[str, Any]]) -> list[Row]:
    rows = []
    for record in records:
        if record.get("kind") != "prompt":
            continue
        baselines = record.get("baselines") or {}
        disturbed = _disturbed(record)
        for name, run in (record.get("runs") or {}).items():
            base = baselines.get(str(run.get("temperature", 0.0)))
            if not base:
                continue
            # a remote configuration brings its own baseline: the same server, no drafts
            base_tok_s = _float(run.get("baseline_tok_s", base.get("tok_s")))
            tok_s = _float(run.get("tok_s"))
            rows.append(
                Row(
                    phase=str(record["phase"]),
                    prompt=str(record["prompt"]),
                    category=str(record["category"]),
                    repeat=int(record["repeat"]),
                    config=str(name),
                    speedup=tok_s / base_tok_s if base_tok_s > 0 else 0.0,
                    acceptance=_float(run.get("acceptance")),
                    tokens_per_pass=_float(run.get("tokens_per_pass")),
                    ttft_ms=_float(run.get("ttft_ms")),
                    itl_p50_ms=_float(run.get("itl_p50_ms")),
                    itl_p95_ms=_float(run.get("itl_p95_ms")),
                    itl_p99_ms=_float(run.get("itl_p99_ms")),
                    host_ms_per_token=_float(run.get("host_ms_per_token")),
                    tok_s=tok_s,
                    baseline_tok_s=base_tok_s,
                    tokens=int(run.get("tokens", 0)),
                    peak_rss_mb=run.get("peak_rss_mb"),
                    guard_pauses=int(run.get("guard_pauses", 0)),
                    identical=run.get("identical"),
                    first_divergence=run.get("first_divergence"),
                    margin=run.get("margin"),
                    load=disturbed,
                )
            )
    return rows


def _disturbed(record: dict[str, Any]) -> str | None:
    """Whether a prompt's runs shared the machine (its configurations and its baseline ran
    back to back, so one disturbed run spoils every speedup of the prompt)."""
    steps = [
        (_float(base.get("itl_p50_ms")), _float(base.get("itl_p95_ms")))
        for base in (record.get("baselines") or {}).values()
    ]
    times = record.get("load")
    if not isinstance(times, dict):  # a file from before the CPU times were recorded
        times = {}
    return interference.judge(
        wall_s=_float(times.get("wall_s")),
        own_cpu_s=_float(times.get("own_cpu_s")),
        busy_cpu_s=_float(times.get("busy_cpu_s")),
        cpus=int(times.get("cpus", 1)),
        threads=int(times.get("threads", 0)),
        steps=steps,
    )


def bootstrap_median(
    values: Sequence[float], *, seed: int = 0, resamples: int = 2000, level: float = 0.95
) -> Interval:
    """Median with a percentile-bootstrap confidence interval (seeded, so reports repeat)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    median = float(np.median(data))
    if data.size == 1:
        return Interval(median, median, median, 1)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[picks], axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(medians, [tail, 100.0 - tail])
    return Interval(median, float(low), float(high), int(data.size))


def _select(rows: Sequence[Row], phase: str, category: str, config: str) -> list[Row]:
    return [
        r
        for r in rows
        if r.phase == phase and r.config == config and (category == ALL or r.category == category)
    ]


def summarise(rows: Sequence[Row], *, seed: int = 0) -> list[CellSummary]:
    cells = []
    keys = dict.fromkeys((r.phase, r.config) for r in rows)
    for phase, config in keys:
        categories = [ALL, *dict.fromkeys(r.category for r in rows if r.phase == phase)]
        for category in categories:
            chosen = _select(rows, phase, category, config)
            if not chosen:
                continue
            rss = [r.peak_rss_mb for r in chosen if r.peak_rss_mb is not None]
            cells.append(
                CellSummary(
                    phase=phase,
                    category=category,
                    config=config,
                    medians={
                        m: bootstrap_median([getattr(r, m) for r in chosen], seed=seed)
                        for m in METRICS
                    },
                    slowdowns=sum(1 for r in chosen if r.speedup < 1.0),
                    divergences=sum(1 for r in chosen if r.identical is False),
                    guard_pauses=sum(r.guard_pauses for r in chosen),
                    peak_rss_mb=max(rss) if rss else None,
                    disturbed=sum(1 for r in chosen if r.load),
                )
            )
    return cells


def failures(rows: Sequence[Row]) -> list[Failure]:
    found = []
    for r in rows:
        problems: list[tuple[str, str]] = []
        if r.speedup < 1.0:
            rates = f"{rate(r.tok_s)} vs {speed_text(r.baseline_tok_s)}"
            problems.append(("slowdown", f"{r.speedup:.2f}× ({rates})"))
        if r.identical is False:
            tie = near_tie_words(r.margin)
            margin = "?" if r.margin is None else f"{r.margin:.4f}"
            problems.append(
                ("divergence", f"at token {r.first_divergence}, margin {margin} ({tie})")
            )
        if r.guard_pauses:
            pauses = f"{r.guard_pauses} collapse-guard pause(s), acceptance {r.acceptance:.0%}"
            problems.append(("guard", pauses))
        if r.load:
            problems.append(("load", f"{interference.RERUN}: {r.load}"))
        found += [
            Failure(r.phase, r.prompt, r.category, r.config, kind, detail)
            for kind, detail in problems
        ]
    return found


def median_speedup(rows: Sequence[Row], phase: str, category: str, config: str) -> float | None:
    chosen = _select(rows, phase, category, config)
    return float(np.median([r.speedup for r in chosen])) if chosen else None


def best_config(rows: Sequence[Row], category: str, configs: Sequence[str]) -> str | None:
    """Highest tuning median speedup; ties go to the configuration listed first."""
    scored = [(median_speedup(rows, "tuning", category, c), -i, c) for i, c in enumerate(configs)]
    valid = [s for s in scored if s[0] is not None]
    return max(valid)[2] if valid else None


def choose(
    rows: Sequence[Row], claim: Claim, categories: Sequence[str], configs: Sequence[str]
) -> dict[str, Any]:
    per_category = {c: best_config(rows, c, configs) for c in categories}
    claim_config = claim.config or best_config(rows, claim.category or ALL, configs)
    return {"per_category": per_category, "claim_config": claim_config}


def verdict(
    rows: Sequence[Row], claim: Claim, claim_config: str | None, *, seed: int = 0
) -> Verdict:
    category = claim.category or ALL
    text = claim.describe(claim_config)

    def chosen(phase: str) -> list[Row]:
        return _select(rows, phase, category, claim_config) if claim_config else []

    def interval(phase: str) -> Interval | None:
        found = chosen(phase)
        return bootstrap_median([r.speedup for r in found], seed=seed) if found else None

    tuning, confirmation = interval("tuning"), interval("confirmation")
    if confirmation is None:
        status = "not run"
    elif confirmation.n < MIN_INTERVAL_RUNS:  # one run is no evidence either way
        status = TOO_FEW
    elif confirmation.low >= claim.threshold:
        status = "confirmed"
    elif confirmation.high < claim.threshold:
        status = "falsified"
    else:  # the claim is inside the interval: the runs cannot tell
        status = UNDECIDED
    disturbed = sum(1 for r in chosen("confirmation") if r.load)
    prompts = len({r.prompt for r in chosen("confirmation")})
    return Verdict(
        text,
        claim_config,
        category,
        claim.threshold,
        status,
        tuning,
        confirmation,
        disturbed,
        prompts,
    )


def repeats_for(held_out_prompts: int, runs: int = MIN_HELD_OUT_RUNS) -> int:
    """The repeats that give ``held_out_prompts`` prompts ``runs`` held-out runs."""
    return max(1, math.ceil(runs / max(held_out_prompts, 1)))


def _ci(interval: Interval) -> str:
    runs = "run" if interval.n == 1 else "runs"
    if not interval.shown:
        return f"{interval.median:.2f}× on {interval.n} held-out {runs} (no interval)"
    return (
        f"{interval.median:.2f}× (95% CI {interval.low:.2f}–{interval.high:.2f}) "
        f"on {interval.n} held-out {runs}"
    )


def recommend_one(
    rows: Sequence[Row],
    category: str,
    config: str | None,
    claim: Verdict | None = None,
    *,
    seed: int = 0,
) -> Recommendation:
    """What to use for ``category``, given ``config``, the best on its tuning part.

    Only the held-out runs decide, and only when they can: none is made from fewer than
    ``MIN_HELD_OUT_RUNS`` runs, from runs measured under outside load, for a configuration
    whose claim the same runs falsified, or from an interval that includes 1×.
    """
    if config is None:
        return Recommendation(category, None, None, None, "nothing ran")
    tuning = median_speedup(rows, "tuning", category, config)
    held_out = _select(rows, "confirmation", category, config)

    def withheld(reason: str, confirmed: Interval | None = None) -> Recommendation:
        return Recommendation(category, None, tuning, confirmed, reason, config, NONE)

    if not held_out:
        return withheld(f"{config} is not confirmed yet (no held-out prompts ran)")
    confirmed = bootstrap_median([r.speedup for r in held_out], seed=seed)
    if (
        claim is not None
        and claim.status == "falsified"
        and claim.config == config
        and claim.category in (ALL, category)
    ):
        return withheld(
            f"the claim about {config} was falsified ({_ci(claim.confirmation)} against the "
            f"claimed {claim.threshold:g}×)"
            if claim.confirmation is not None
            else f"the claim about {config} was falsified",
            confirmed,
        )
    disturbed = sum(1 for r in held_out if r.load)
    if disturbed:
        return withheld(
            f"{interference.RERUN} ({disturbed} of {confirmed.n} held-out runs of {config})",
            confirmed,
        )
    if confirmed.n < MIN_HELD_OUT_RUNS:
        prompts = len({r.prompt for r in held_out})
        return withheld(
            f"{config} ran at {_ci(confirmed)}; a recommendation needs at least "
            f"{MIN_HELD_OUT_RUNS} (raise repeats to {repeats_for(prompts)}, or add prompts)",
            confirmed,
        )
    if confirmed.high < 1.0:
        return Recommendation(
            category,
            None,
            tuning,
            confirmed,
            f"{config} was best on the tuning part but ran at {_ci(confirmed)}",
            config,
            TARGET_ALONE,
        )
    if confirmed.low < 1.0:
        return withheld(
            f"{config} ran at {_ci(confirmed)}: not shown to beat the target alone", confirmed
        )
    return Recommendation(
        category, config, tuning, confirmed, f"confirmed {_ci(confirmed)}", config, USE
    )


def recommend(
    rows: Sequence[Row],
    choice: dict[str, Any] | None,
    claim: Verdict | None = None,
    *,
    seed: int = 0,
) -> list[Recommendation]:
    per_category = (choice or {}).get("per_category") or {}
    return [
        recommend_one(rows, category, config, claim, seed=seed)
        for category, config in per_category.items()
    ]


@dataclass(frozen=True)
class Analysis:
    rows: list[Row]
    cells: list[CellSummary]
    failures: list[Failure]
    verdict: Verdict
    recommendations: list[Recommendation]
    configs: list[str]


def analyse(
    records: Sequence[dict[str, Any]], claim: Claim, configs: Sequence[str], *, seed: int = 0
) -> Analysis:
    rows = rows_from(records)
    choices = [r for r in records if r.get("kind") == "choice"]
    choice = choices[-1] if choices else None
    claim_config = (choice or {}).get("claim_config") or claim.config
    judged = verdict(rows, claim, claim_config, seed=seed)
    return Analysis(
        rows=rows,
        cells=summarise(rows, seed=seed),
        failures=failures(rows),
        verdict=judged,
        recommendations=recommend(rows, choice, judged, seed=seed),
        configs=[c for c in configs if c != BASELINE],
    )
