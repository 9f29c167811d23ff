"""From result records to evidence: distributions, confidence intervals, failures, verdicts.

Pure functions over the records of a result file, so the CLI, the window and the report
all read the same numbers, and a finished or half-finished file can be analysed again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.engine.exactness import near_tie_words
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


@dataclass(frozen=True)
class Interval:
    median: float
    low: float
    high: float
    n: int


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


@dataclass(frozen=True)
class Failure:
    phase: str
    prompt: str
    category: str
    config: str
    kind: str  # "slowdown" | "divergence" | "guard"
    detail: str


@dataclass(frozen=True)
class Verdict:
    claim: str
    config: str | None
    category: str
    threshold: float
    status: str  # "confirmed" | "falsified" | "not run"
    tuning: Interval | None
    confirmation: Interval | None

    def describe(self) -> str:
        if self.confirmation is None:
            return f"NOT RUN: {self.claim} (no confirmation results yet)"
        c = self.confirmation
        return (
            f"{self.status.upper()}: {self.claim}. On the held-out confirmation part "
            f"{self.config} ran at a median {c.median:.2f}× (95% CI {c.low:.2f}–{c.high:.2f}, "
            f"{c.n} runs) against the claimed {self.threshold:g}×"
        )


@dataclass(frozen=True)
class Recommendation:
    category: str
    config: str | None  # None: the target alone is the better choice
    tuning_speedup: float | None
    confirmed_speedup: Interval | None
    reason: str


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def rows_from(records: Iterable[dict[str, Any]]) -> list[Row]:
    rows = []
    for record in records:
        if record.get("kind") != "prompt":
            continue
        baselines = record.get("baselines") or {}
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
                )
            )
    return rows


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
                )
            )
    return cells


def failures(rows: Sequence[Row]) -> list[Failure]:
    found = []
    for r in rows:
        if r.speedup < 1.0:
            rates = f"{r.tok_s:.1f} vs {r.baseline_tok_s:.1f} tok/s"
            found.append(
                Failure(
                    r.phase,
                    r.prompt,
                    r.category,
                    r.config,
                    "slowdown",
                    f"{r.speedup:.2f}× ({rates})",
                )
            )
        if r.identical is False:
            tie = near_tie_words(r.margin)
            margin = "?" if r.margin is None else f"{r.margin:.4f}"
            found.append(
                Failure(
                    r.phase,
                    r.prompt,
                    r.category,
                    r.config,
                    "divergence",
                    f"at token {r.first_divergence}, margin {margin} ({tie})",
                )
            )
        if r.guard_pauses:
            found.append(
                Failure(
                    r.phase,
                    r.prompt,
                    r.category,
                    r.config,
                    "guard",
                    f"{r.guard_pauses} collapse-guard pause(s), acceptance {r.acceptance:.0%}",
                )
            )
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

    def interval(phase: str) -> Interval | None:
        if claim_config is None:
            return None
        chosen = _select(rows, phase, category, claim_config)
        return bootstrap_median([r.speedup for r in chosen], seed=seed) if chosen else None

    tuning, confirmation = interval("tuning"), interval("confirmation")
    if confirmation is None:
        status = "not run"
    else:
        status = "confirmed" if confirmation.median >= claim.threshold else "falsified"
    return Verdict(text, claim_config, category, claim.threshold, status, tuning, confirmation)


def recommend(
    rows: Sequence[Row], choice: dict[str, Any] | None, *, seed: int = 0
) -> list[Recommendation]:
    found = []
    for category, config in ((choice or {}).get("per_category") or {}).items():
        tuning = median_speedup(rows, "tuning", category, config) if config else None
        chosen = _select(rows, "confirmation", category, config) if config else []
        confirmed = bootstrap_median([r.speedup for r in chosen], seed=seed) if chosen else None
        if config is None:
            found.append(Recommendation(category, None, None, None, "nothing ran"))
        elif confirmed is None:
            found.append(
                Recommendation(
                    category, config, tuning, None, "not confirmed yet (no held-out prompts ran)"
                )
            )
        elif confirmed.median >= 1.0:
            found.append(
                Recommendation(
                    category,
                    config,
                    tuning,
                    confirmed,
                    f"confirmed {confirmed.median:.2f}× on held-out prompts",
                )
            )
        else:
            found.append(
                Recommendation(
                    category,
                    None,
                    tuning,
                    confirmed,
                    f"best was {config}, but it ran at "
                    f"{confirmed.median:.2f}× on held-out prompts: "
                    "use the target alone",
                )
            )
    return found


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
    return Analysis(
        rows=rows,
        cells=summarise(rows, seed=seed),
        failures=failures(rows),
        verdict=verdict(rows, claim, claim_config, seed=seed),
        recommendations=recommend(rows, choice, seed=seed),
        configs=[c for c in configs if c != BASELINE],
    )
