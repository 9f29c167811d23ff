"""The verdict of the answer on screen (judged by ``exactness.judge``) and the guard
banner's words."""

from __future__ import annotations

from html import escape

from app.engine.config import AcceptRule, SpecConfig
from app.engine.events import GuardEvent
from app.engine.exactness import Comparison, Judgement, judge, percent_pair
from app.store.settings import Settings
from app.ui.stats_export import AnswerStats


def judge_answer(
    stats: AnswerStats, comparison: Comparison | None, settings: Settings
) -> Judgement | None:
    spec = stats.summaries.get("speculative")
    if spec is None:
        return None
    return judge(
        spec,
        stats.summaries.get("baseline"),
        comparison,
        temperature=settings.temperature,
        rule=AcceptRule(settings.rule),
        position_keyed=spec.position_keyed,
        steps=stats.steps,
    )


def guard_text(event: GuardEvent, spec: SpecConfig) -> str:
    """What the collapse guard did and why, with figures precise enough to tell apart."""
    if not event.paused:
        return f"<b>Drafting resumed</b> at step {event.step}: probing the draft again."
    probe = event.probe_in or spec.probe_every
    then = f"The target answers alone; the draft is probed again in {probe} tokens."
    if event.reason == "cost":
        cost = (
            f"a draft pass costs {event.draft_cost_fraction * 100:.0f} % of a target pass"
            if event.draft_cost_fraction is not None
            else "drafting costs more than it saves"
        )
        speed = (
            f" and drafting steps ran at {event.speed_ratio:.2f}× the target-only speed"
            if event.speed_ratio is not None
            else ""
        )
        return (
            f"<b>Drafting paused</b> at step {event.step}: {cost}{speed}, so it cannot pay "
            f"at this agreement ({event.acceptance * 100:.1f} %). {then} {escape(event.advice)}"
        )
    agreement, break_even = percent_pair(event.acceptance, event.break_even)
    return (
        f"<b>Drafting paused</b> at step {event.step}: the draft's recent agreement "
        f"{agreement} (accepted ÷ judged draft tokens over the last "
        f"{spec.guard_window} steps) is below the break-even {break_even}. {then} "
        f"{escape(event.advice)}"
    )
