"""The verdict text (``exactness.judge``) and the guard banner: only what the runs measured."""

from __future__ import annotations

from app.engine.config import AcceptRule, SpecConfig
from app.engine.events import GuardEvent, RunSummary, StepEvent, StopReason
from app.engine.exactness import Comparison, judge, percent_pair
from app.ui.answer_verdict import guard_text
from app.workers.messages import EventBatch, Verdict


def summary(mode: str, tokens: int, tok_s: float, drafted: int = 0, accepted: int = 0):  # noqa: ANN201
    return RunSummary(
        mode=mode, tokens=tokens, elapsed_s=1.0, tok_s=tok_s, ttft_ms=10.0,
        acceptance_rate=accepted / drafted if drafted else 0.0, mean_accepted_length=0.0,
        target_passes_per_token=0.5, p50_itl_ms=1.0, p95_itl_ms=1.0,
        stop_reason=StopReason.MAX_TOKENS, decode_s=0.5, steps=0, drafted=drafted,
        accepted=accepted,
    )  # fmt: skip


SPEC = summary("speculative", 96, 29.1, drafted=60, accepted=60)
BASE = summary("baseline", 96, 41.6)
GREEDY = {"temperature": 0.0, "rule": AcceptRule.REJECTION}


def test_a_large_margin_is_not_called_a_near_tie() -> None:
    for margin in (1.17, 1.03):
        verdict = judge(SPEC, BASE, Comparison(False, 12, margin, 96), **GREEDY)
        assert "NOT a near-tie" in verdict.text and f"{margin:.4f}" in verdict.text
        assert verdict.divergence == 12
    small = judge(SPEC, BASE, Comparison(False, 3, 0.2, 96), **GREEDY)
    assert "(near-tie, margin 0.2000)" in small.text


def test_sampling_verdicts() -> None:
    differ = Comparison(False, 4, 1.5, 6)
    rejection = judge(SPEC, BASE, differ, temperature=0.8, rule=AcceptRule.REJECTION)
    assert "differ by design" in rejection.text and "near-tie" not in rejection.text
    assert rejection.divergence is None
    keyed = judge(
        SPEC, BASE, Comparison(True, None, None, 96), temperature=0.8, rule=AcceptRule.MATCH,
        position_keyed=True,
    )  # fmt: skip
    assert keyed.text.endswith("identical to target-only (position-keyed sampling, same seed)")
    broken = judge(SPEC, BASE, differ, temperature=0.8, rule=AcceptRule.MATCH, position_keyed=True)
    assert "diverged at token 4" in broken.text and broken.divergence == 4
    unkeyed = judge(SPEC, BASE, differ, temperature=0.8, rule=AcceptRule.MATCH)
    assert "differ by design" in unkeyed.text and unkeyed.divergence is None


def test_speed_claims() -> None:
    same = Comparison(True, None, None, 96)
    steps = [StepEvent(i, 2, 2, 12.0, 40.0, 3.0, 2, 1.0, 0.9) for i in range(30)]
    slower = judge(SPEC, BASE, same, steps=steps, **GREEDY).text
    assert slower.startswith("0.70× — 30 % slower (29.1 vs 41.6 tok/s target-only)")
    assert "12 ms drafting + 40 ms verifying for 3.00 tokens" in slower
    assert "(18 ms a token) vs 24 ms target-only" in slower

    faster = judge(summary("speculative", 96, 50.0, 60, 50), BASE, same, **GREEDY).text
    assert faster.startswith("1.20× faster")

    idle = judge(summary("speculative", 96, 5.2), summary("baseline", 96, 4.5), same, **GREEDY)
    assert "×" not in idle.text and "noise" in idle.text

    short = summary("baseline", 6, 41.6)
    uneven = judge(summary("speculative", 64, 20.0, 40, 30), short, same, **GREEDY).text
    assert "×" not in uneven and "(64 tokens)" in uneven and "(6 tokens)" in uneven

    alone = judge(SPEC, None, None, **GREEDY)
    assert alone.text == "baseline not run — speculative 29.1 tok/s"


def test_guard_banner_tells_its_figures_apart() -> None:
    assert percent_pair(0.9812, 0.9849) == ("98.1 %", "98.5 %")
    assert percent_pair(0.5, 0.75) == ("50 %", "75 %")
    text = guard_text(GuardEvent(True, 0.98012, 0.98046, 40), SpecConfig())
    assert "98.01 %" in text and "98.05 %" in text
    assert "probed again in 16 tokens" in text and "last 8 steps" in text


def test_guard_banner_says_a_cost_pause_is_about_cost_and_what_to_do() -> None:
    event = GuardEvent(
        True, 0.86, 0.99, 12, reason="cost", speed_ratio=0.61, draft_cost_fraction=0.74, probe_in=64
    )
    text = guard_text(event, SpecConfig())
    assert "a draft pass costs 74 % of a target pass" in text
    assert "0.61× the target-only speed" in text
    assert "probed again in 64 tokens" in text  # the doubled interval, not the setting
    assert "below the break-even" not in text
    assert "smaller draft" in text and "n-gram" in text


def test_window_shows_the_engines_comparison(make_window) -> None:
    window = make_window()
    window.charts.ingest(EventBatch(1, "speculative", (SPEC,), 1.0, 96))
    window.charts.ingest(EventBatch(1, "baseline", (BASE,), 1.0, 96))
    window._on_verdict(Verdict(1, Comparison(False, 5, 1.17, 96)))
    assert "NOT a near-tie, margin 1.1700" in window.chat.verdict.text()
    assert window.charts.stats.verdict == window.chat.verdict.text()
