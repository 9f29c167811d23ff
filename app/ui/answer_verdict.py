"""The verdict of the answer on screen, judged by ``exactness.judge`` from what was streamed."""

from __future__ import annotations

from app.core.config import AcceptRule, SpecConfig
from app.core.events import GuardEvent, RunSummary
from app.core.exactness import Comparison, Judgement, judge, percent_pair
from app.core.settings import Settings
from app.ui.stats_export import AnswerStats


def position_keyed(summary: RunSummary) -> bool:
    # RunSummary gains this flag with position-keyed sampling; absent means it was not used
    return bool(getattr(summary, "position_keyed", False))


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
        position_keyed=position_keyed(spec),
        steps=stats.steps,
    )


def guard_text(event: GuardEvent, spec: SpecConfig) -> str:
    """What the collapse guard did, with figures precise enough to tell them apart."""
    agreement, break_even = percent_pair(event.acceptance, event.break_even)
    if event.paused:
        return (
            f"<b>Drafting paused</b> at step {event.step}: the draft's recent agreement "
            f"{agreement} (accepted ÷ judged draft tokens over the last "
            f"{spec.guard_window} steps) is below the break-even "
            f"{break_even}. The target answers alone; the draft is probed again in "
            f"{spec.probe_every} tokens."
        )
    return (
        f"<b>Drafting resumed</b> at step {event.step}: probing the draft again after "
        f"{spec.probe_every} target-only tokens."
    )
