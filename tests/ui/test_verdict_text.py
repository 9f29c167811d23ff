"""The verdict text (``exactness.judge``) and the guard banner: only what the runs measured."""

from __future__ import annotations

import re
from dataclasses import replace

from app.engine.config import AcceptRule
from app.engine.events import GuardEvent, GuardReason, RunSummary, StepEvent, StopReason
from app.engine.exactness import Comparison, judge
from app.engine.figures import rate, speed_text
from app.models.guard_words import GuardHistory, explanation, headline, message, percent_pair
from app.store.conversations import ConversationStore
from app.store.settings import Settings
from app.ui.answer_verdict import guard_text
from app.ui.transcript import stats_line
from app.workers.messages import EventBatch, JobDone, Verdict
from tests.ui.conftest import ask, load


def summary(mode: str, tokens: int, tok_s: float, drafted: int = 0, accepted: int = 0, **kw):  # noqa: ANN003, ANN201
    return RunSummary(
        mode=mode, tokens=tokens, elapsed_s=1.0, tok_s=tok_s, ttft_ms=10.0,
        acceptance_rate=accepted / drafted if drafted else 0.0, mean_accepted_length=0.0,
        target_passes_per_token=0.5, p50_itl_ms=1.0, p95_itl_ms=1.0,
        stop_reason=StopReason.MAX_TOKENS, decode_s=0.5, steps=0, drafted=drafted,
        accepted=accepted, **kw,
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


def test_the_verdict_and_the_stats_line_write_a_slow_speed_with_the_same_digits() -> None:
    """The verdict wrote 4.75 tok/s and the stats line under the answer 4.8 (":.1f")."""
    spec, base = summary("speculative", 96, 4.75, 60, 60), summary("baseline", 96, 3.125)
    verdict = judge(spec, base, Comparison(True, None, None, 96), **GREEDY).text
    line = stats_line({"tokens": 96, "spec_tok_s": 4.75})
    assert "(4.75 vs 3.12 tok/s target-only)" in verdict, verdict
    assert speed_text(4.75) == "4.75 tok/s" and "4.75 tok/s" in line, line
    assert speed_text(41.64) == "41.6 tok/s"


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
    # the per-token costs add up to the ratio: 34 ms a token against 24, split into the
    # drafting steps (18 ms a token) and the rest of the answer's time (275 ms a token)
    assert "34 ms a token against 24 ms target-only" in slower
    assert "90 tokens came from 30 drafting steps at 18 ms a token" in slower
    assert "12 ms drafting + 40 ms verifying + 3.0 ms other for 3.00 tokens" in slower
    assert "the other 6 tokens and the time between steps took 1,649 ms (275 ms a token)" in slower

    faster = judge(summary("speculative", 96, 50.0, 60, 50), BASE, same, **GREEDY).text
    assert faster.startswith("1.20× faster")

    idle = judge(summary("speculative", 96, 5.2), summary("baseline", 96, 4.5), same, **GREEDY)
    assert "×" not in idle.text and "noise" in idle.text

    short = summary("baseline", 6, 41.6)
    uneven = judge(summary("speculative", 64, 20.0, 40, 30), short, same, **GREEDY).text
    # a rate needs no equal lengths: compared, with both lengths beside it
    assert uneven.startswith("0.48× — 52 % slower (20.0 vs 41.6 tok/s target-only; 64 vs 6")

    alone = judge(SPEC, None, None, **GREEDY)
    assert alone.text == "baseline not run — speculative 29.1 tok/s"


def test_guard_banner_tells_its_figures_apart() -> None:
    assert percent_pair(0.9812, 0.9849) == ("98.1 %", "98.5 %")
    assert percent_pair(0.5, 0.75) == ("50 %", "75 %")
    text = guard_text(_history(GuardEvent(True, 0.98012, 0.98046, 40, probe_in=16, window=8)), None)
    assert "98.01 %" in text and "98.05 %" in text
    assert "probed again in 16 tokens" in text and "last 8 steps" in text


def test_guard_banner_says_a_cost_pause_is_about_cost_and_what_to_do() -> None:
    event = GuardEvent(
        True, 0.86, 0.99, 12, reason=GuardReason.COST, speed_ratio=0.61, draft_cost_fraction=0.74,
        probe_in=64,
    )  # fmt: skip
    text = guard_text(_history(event), None)
    assert "a draft pass costs 74 % of a target pass" in text
    assert "0.61× the target-only speed" in text
    assert "probed again in 64 tokens" in text  # the doubled interval, not the setting
    assert "below the break-even" not in text
    assert "smaller draft" in text and "prompt lookup" in text


def _history(*events: GuardEvent) -> GuardHistory:
    history = GuardHistory()
    history.add(events)
    return history


def test_window_shows_the_engines_comparison(make_window) -> None:
    window = make_window()
    window.charts.ingest(EventBatch(1, "speculative", (SPEC,), 1.0, 96))
    window.charts.ingest(EventBatch(1, "baseline", (BASE,), 1.0, 96))
    window._on_verdict(Verdict(1, Comparison(False, 5, 1.17, 96)))
    assert "NOT a near-tie, margin 1.1700" in window.chat.verdict.text()
    assert window.charts.stats.verdict == window.chat.verdict.text()


# --- issue 20: the guard's words, pauses, uneven machines, one tok/s ---------------------------


def _banner(window, event: GuardEvent) -> str:  # noqa: ANN001
    window.chat.begin_answer(False)  # one answer, one event
    window.chat.ingest(EventBatch(1, "speculative", (event,), 1.0, 0))
    return window.chat.guard_banner.label.text()


def test_the_guard_banner_never_cites_a_speed_of_1x_or_more_and_bounds_its_figures(
    make_window,  # noqa: ANN001
) -> None:
    """Seen on the SmolLM2 pair: "ran at 1.14× the target-only speed, so it cannot pay"; and
    on the demo pair "a draft pass costs 2693993 % of a target pass"."""
    window = make_window()
    faster = GuardEvent(
        True, 0.944, 0.97, 1, reason=GuardReason.COST, speed_ratio=1.14, draft_cost_fraction=0.57,
        probe_in=16, never_pays=True,
    )  # fmt: skip
    text = _banner(window, faster)
    assert "1.14" not in text and "ran at" not in text
    assert "a draft pass costs 57 % of a target pass" in text
    assert "no draft length can beat the target alone" in text
    # one text for the guard: the banner is the CLI's message, its headline in bold
    words = headline(faster), explanation(faster, None)
    assert text == f"<b>{words[0]}</b>: {words[1]}"
    assert message(faster, None) == f"{words[0]}: {words[1]}"
    assert message(faster, None).startswith("Drafting paused at step 1: ")

    absurd = replace(faster, speed_ratio=0.31, draft_cost_fraction=26939.93)
    text = _banner(window, absurd)
    assert "2693993" not in text and "over 10 times the cost of a target pass" in text
    assert "0.31× the target-only speed" in text  # a measured loss supports the claim
    at_par = replace(faster, speed_ratio=1.0, never_pays=False, break_even=0.97)
    text = _banner(window, at_par)
    assert "1.00×" not in text and "needs 97 % or more" in text


def test_the_verdict_summarises_the_guards_pauses(make_window) -> None:  # noqa: ANN001
    window = make_window()
    spec = summary("speculative", 256, 18.4, drafted=200, accepted=190, paused_tokens=16)
    window.charts.ingest(EventBatch(1, "speculative", (spec,), 1.0, 256))
    window.charts.ingest(EventBatch(1, "baseline", (summary("baseline", 256, 11.2),), 1.0, 256))
    window._on_verdict(Verdict(1, Comparison(True, None, None, 256)))
    assert window.chat.verdict.text() == (
        "1.64× faster (18.4 vs 11.2 tok/s target-only) — drafting paused for 16 of 256 tokens"
        " — identical to target-only"
    )


def test_speeds_measured_on_uneven_machines_are_no_speedup(make_window, qtbot) -> None:  # noqa: ANN001
    """Another process on a core while the speculative run ran: "0.05× — 95 % slower" (2.1 vs
    41.8 tok/s) was shown and stored as if it were the pair's speed."""
    window = make_window()
    assert window.chat.remeasure.isHidden()
    window.session.add_user("Write a palindrome check")
    window.session.start(Settings(temperature=0.0))
    spec = summary("speculative", 96, 2.1, 60, 55, cpu_share=0.34, outside_cores=1.3)
    base = summary("baseline", 96, 41.8, cpu_share=0.97, outside_cores=0.05)
    window.charts.ingest(EventBatch(1, "speculative", (spec,), 1.0, 96))
    window.charts.ingest(EventBatch(1, "baseline", (base,), 1.0, 96))
    window._on_verdict(Verdict(1, Comparison(True, None, None, 96)))
    text = window.chat.verdict.text()
    assert text.startswith("speeds not comparable (2.10 vs 41.8 tok/s target-only)")
    assert "×" not in text and "slower" not in text and "faster" not in text
    assert "the speculative run got less of the CPU" in text and "34 %" in text
    assert "1.3 cores busy during the speculative run" in text
    # stored with a flag, and the flag survives the file
    message = window.session.finish(JobDone(1, False, spec, base, 12), [], None)
    assert message is not None and message.stats["uneven_machine"] is True
    store = ConversationStore()
    store.save(window.session.conversation)
    reopened = store.load(window.session.conversation.id).messages[-1]
    assert reopened.stats["uneven_machine"] is True
    assert reopened.stats["verdict"] == text
    assert not window.chat.remeasure.isHidden()
    # no pair is loaded here: measuring again is refused as Regenerate is, saying why
    assert not window.chat.remeasure.isEnabled()
    assert window.chat.remeasure.toolTip() == window.chat.send.toolTip()
    window.chat.set_no_pair("")  # as once a pair has loaded
    assert window.chat.remeasure.isEnabled()
    with qtbot.waitSignal(window.chat.regenerate_requested, timeout=1000):
        window.chat.remeasure.click()  # Regenerate: both runs timed again

    # the same machine for both: a plain comparison, no button
    even = replace(spec, tok_s=50.0, cpu_share=0.9)
    window.charts.ingest(EventBatch(2, "speculative", (even,), 1.0, 96))
    window.charts.ingest(EventBatch(2, "baseline", (base,), 1.0, 96))
    window._on_verdict(Verdict(2, Comparison(True, None, None, 96)))
    assert window.chat.verdict.text().startswith("1.20× faster")
    assert window.chat.remeasure.isHidden()


def test_a_sampled_answer_still_gets_its_speed_compared(make_window) -> None:  # noqa: ANN001
    """T = 0.8 once said "lengths too different to compare" while the status bar showed both
    speeds: a rate is compared whatever the lengths, and exactness is stated on its own."""
    window = make_window(Settings(temperature=0.8))
    sampled = summary("speculative", 96, 30.0, 60, 40)
    window.charts.ingest(EventBatch(1, "speculative", (sampled,), 1.0, 96))
    window.charts.ingest(EventBatch(1, "baseline", (summary("baseline", 31, 20.0),), 1.0, 31))
    window._on_verdict(Verdict(1, Comparison(False, 3, 1.2, 31)))
    text = window.chat.verdict.text()
    assert text.startswith("1.50× faster (30.0 vs 20.0 tok/s target-only; 96 vs 31 tokens) — ")
    assert "texts differ by design" in text and "too different" not in text


def test_after_continue_the_verdict_and_the_stats_line_give_one_speed(
    make_window, qtbot, tiny_pair
) -> None:  # noqa: ANN001
    """After Continue the verdict said 2.62 tok/s (the continuation alone) and the stats line
    4.0 (the whole message)."""
    settings = Settings(max_tokens=8, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)
    window = make_window(settings)
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    first = window.conversation.messages[-1].stats["verdict"]
    with qtbot.waitSignal(window.answer_finished, timeout=60_000):
        window.chat.continue_button.click()
    stats = window.conversation.messages[-1].stats
    verdict = window.chat.verdict.text()
    whole = re.search(r"speculative ([\d.]+) tok/s over the whole answer \((\d+) tokens\)", verdict)
    assert whole is not None, verdict
    assert whole.group(1) == rate(stats["spec_tok_s"]) and int(whole.group(2)) == stats["tokens"]
    assert f"{whole.group(1)} tok/s" in window.chat.transcript.toPlainText()
    assert verdict.endswith(f"before Continue: {first}")
    assert stats["verdict"] == verdict and stats["compared_verdict"] == first
