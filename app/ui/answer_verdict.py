"""The verdict of the answer on screen (judged by ``exactness.judge``), the guard banner's
words, and what a saved answer keeps beside its text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.engine.config import AcceptRule, SpecConfig
from app.engine.events import GuardEvent, RunSummary, TextTail, TokenEvent
from app.engine.exactness import Comparison, Judgement, judge, percent_pair
from app.store.settings import Settings
from app.ui.stats_export import AnswerStats
from app.ui.transcript import kinds_of
from app.workers.engine_worker import PairLoaded


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
            f"at this agreement ({event.acceptance * 100:.1f} %). {then} {event.advice}"
        )
    agreement, break_even = percent_pair(event.acceptance, event.break_even)
    return (
        f"<b>Drafting paused</b> at step {event.step}: the draft's recent agreement "
        f"{agreement} (accepted ÷ judged draft tokens over the last "
        f"{spec.guard_window} steps) is below the break-even {break_even}. {then} "
        f"{event.advice}"
    )


def answer_details(
    spec: RunSummary,
    stream: Sequence[TokenEvent | TextTail],
    settings: Settings,
    pair: PairLoaded | None,
) -> dict[str, object]:
    """What a saved answer keeps beside its text: figures, token kinds, the pair, the settings."""
    details: dict[str, object] = {
        "accepted": spec.accepted,
        "drafted": spec.drafted,
        "tokens_per_pass": round(spec.tokens_per_pass, 3),
        "kinds": kinds_of(stream),
        "settings": {
            "temperature": settings.temperature,
            "rule": settings.rule,
            "draft_max": settings.draft_max,
            "draft_adaptive": settings.draft_adaptive,
            "seed": settings.seed,
            "max_tokens": settings.max_tokens,
        },
    }
    if pair is not None:
        draft = Path(pair.draft_path).name if pair.draft_path else "n-gram drafting"
        details["pair"] = f"{Path(pair.target_path).name} + {draft}"
    return details
