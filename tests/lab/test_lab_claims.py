"""Configurations, statistics and the claim logic on planted numbers."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.config import AcceptRule, DraftSource
from app.lab.configs import ConfigError, LabConfig, parse_config
from app.lab.plan import Claim
from app.lab.stats import (
    MIN_HELD_OUT_RUNS,
    MIN_INTERVAL_RUNS,
    TOO_FEW,
    UNDECIDED,
    Row,
    bootstrap_median,
    choose,
    failures,
    recommend,
    repeats_for,
    verdict,
)

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_config_strings_map_onto_the_engine_settings() -> None:
    fixed = parse_config("f8:draft=/m/d.gguf,n=8,rule=match,temp=0.7,guard=off")
    assert fixed.source is DraftSource.MODEL and fixed.draft == "/m/d.gguf"
    spec = fixed.spec()
    assert (spec.draft_max, spec.adaptive, spec.rule, spec.collapse_guard) == (
        8,
        False,
        AcceptRule.MATCH,
        False,
    )
    assert fixed.sampler(3).temperature == 0.7 and fixed.sampler(3).seed == 3
    ngram = parse_config("ng:ngram=4,adaptive=12")
    assert ngram.source is DraftSource.NGRAM and ngram.spec().ngram_n == 4
    assert ngram.spec().adaptive and ngram.spec().draft_max == 12
    assert LabConfig.from_json(fixed.to_json()) == fixed
    assert fixed.spec().ngram_first  # n-gram + model: free lookup drafts go first by default
    model_only = parse_config("m:draft=/m/d.gguf,lookup=off")
    assert not model_only.spec().ngram_first
    assert LabConfig.from_json(model_only.to_json()) == model_only


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nocolon", "NAME:key=value"),
        ("x:draft=a.gguf,n=zero", "is not a number"),
        ("x:draft=a.gguf,n=999", "n must be"),
        ("x:n=4", "needs draft=FILE"),
        ("bad name:ngram", "configuration name"),
        ("x:ngram,colour=red", "cannot use 'colour=red'"),
    ],
)
def test_bad_config_strings_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(text)


def _row(
    config: str,
    speedup: float,
    *,
    phase: str = "tuning",
    category: str = "code",
    prompt: str = "p",
    identical: bool | None = True,
    margin: float | None = None,
) -> Row:
    return Row(
        phase,
        prompt,
        category,
        0,
        config,
        speedup,
        0.5,
        1.5,
        10.0,
        1.0,
        2.0,
        3.0,
        0.1,
        speedup * 10,
        10.0,
        32,
        100.0,
        0,
        identical,
        None if identical else 4,
        margin,
    )


def test_bootstrap_interval_is_seeded_and_brackets_the_median() -> None:
    values = list(np.random.default_rng(1).lognormal(0.2, 0.3, 40))
    first = bootstrap_median(values, seed=5)
    assert first == bootstrap_median(values, seed=5)
    assert first != bootstrap_median(values, seed=6)  # the seed is used
    assert first.low <= first.median <= first.high and first.low < first.high
    assert first.median == pytest.approx(float(np.median(values)))
    assert bootstrap_median([2.0]).low == 2.0 and bootstrap_median([]).n == 0


def test_a_planted_slow_configuration_is_falsified_and_a_fast_one_confirmed() -> None:
    rows = [_row("slow", s) for s in (0.6, 0.7, 0.8)] + [_row("fast", s) for s in (1.5, 1.6, 1.7)]
    held = MIN_HELD_OUT_RUNS
    rows += [_row("slow", 0.7, phase="confirmation", prompt=f"h{i}") for i in range(held)]
    rows += [_row("fast", 1.4, phase="confirmation", prompt=f"h{i}") for i in range(held)]
    assert choose(rows, Claim(), ["code"], ["slow", "fast"])["claim_config"] == "fast"
    confirmed = verdict(rows, Claim(1.3), "fast")
    assert confirmed.status == "confirmed" and confirmed.confirmation.median == 1.4
    falsified = verdict(rows, Claim(1.3, config="slow"), "slow")
    assert falsified.status == "falsified"
    assert "FALSIFIED" in falsified.describe() and "0.70×" in falsified.describe()
    assert f"95% CI 0.70–0.70, {held} runs" in falsified.describe()
    # the claim is judged on the held-out part only: strong tuning numbers do not rescue it
    assert verdict(rows, Claim(1.45), "fast").status == "falsified"
    assert verdict(rows[:6], Claim(1.3), "fast").status == "not run"


def test_one_held_out_run_gives_no_interval_and_no_verdict() -> None:
    """As found: "FALSIFIED … median 1.18× (95 % CI 1.18–1.18, 1 runs)"."""
    rows = [_row("demo", s) for s in (1.1, 1.2, 1.3, 1.25)]
    rows.append(_row("demo", 1.18, phase="confirmation", prompt="held"))
    judged = verdict(rows, Claim(1.3), "demo")
    assert judged.status == TOO_FEW
    text = judged.describe()
    assert text.startswith("TOO FEW RUNS to judge: demo is at least 1.3×"), text
    assert "median 1.18× (one run: no interval)" in text and "CI" not in text
    assert "FALSIFIED" not in text and "CONFIRMED" not in text
    assert f"needs at least {MIN_INTERVAL_RUNS} held-out runs (raise repeats to 5" in text
    assert bootstrap_median([1.0, 1.1, 1.2]).spread() == "3 runs: too few for an interval"
    assert bootstrap_median([1.0] * MIN_INTERVAL_RUNS).spread() == "95% CI 1.00–1.00"
    assert repeats_for(2) == 3 and repeats_for(1) == MIN_HELD_OUT_RUNS and repeats_for(9) == 1


def test_recommendation_prefers_the_target_alone_when_confirmation_is_slower() -> None:
    rows = [_row("a", 1.5, category="math")]
    rows += [
        _row("a", s, phase="confirmation", category="math", prompt=f"m{i}")
        for i, s in enumerate((0.8, 0.85, 0.9, 0.9, 0.95))
    ]
    rows += [_row("a", 1.2, category="code")]
    rows += [
        _row("a", s, phase="confirmation", prompt=f"c{i}")
        for i, s in enumerate((1.1, 1.12, 1.15, 1.2, 1.25))
    ]
    recs = {r.category: r for r in recommend(rows, {"per_category": {"math": "a", "code": "a"}})}
    assert recs["math"].config is None and recs["math"].use == "target alone"
    assert recs["code"].config == "a" and recs["code"].confirmed_speedup.median == 1.15


def test_failures_list_slowdowns_and_divergences_with_margins() -> None:
    rows = [
        _row("a", 0.8),
        _row("b", 1.2, identical=False, margin=0.01),
        _row("c", 1.3, identical=False, margin=3.0),
    ]
    found = {(f.config, f.kind): f.detail for f in failures(rows)}
    assert set(found) == {("a", "slowdown"), ("b", "divergence"), ("c", "divergence")}
    assert "(near-tie)" in found[("b", "divergence")]
    assert "NOT a near-tie" in found[("c", "divergence")]


def test_an_interval_on_both_sides_of_the_claim_decides_nothing() -> None:
    rows = [_row("demo", s) for s in (1.1, 1.2, 1.3, 1.25)]
    rows += [
        _row("demo", s, phase="confirmation", prompt=f"h{i}")
        for i, s in enumerate((1.05, 1.15, 1.3, 1.45, 1.55, 1.6))
    ]
    judged = verdict(rows, Claim(1.3), "demo")
    assert judged.confirmation.low < 1.3 < judged.confirmation.high
    assert judged.status == UNDECIDED
    assert judged.describe().startswith("UNDECIDED: demo is at least 1.3×")
    assert "neither confirm nor falsify" in judged.describe()
