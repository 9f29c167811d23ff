"""The verdict of the answer on screen (judged by ``ChatSession.verdict``) and the guard
banner: the engine's own words (``GuardEvent.message``), with its headline in bold."""

from __future__ import annotations

from html import escape

from app.engine.events import GuardEvent
from app.engine.exactness import Comparison, Judgement
from app.store.settings import Settings
from app.ui.plain_text import markup
from app.ui.stats_export import AnswerStats
from app.workers.chat_session import ChatSession


def judge_answer(
    stats: AnswerStats, comparison: Comparison | None, session: ChatSession, settings: Settings
) -> Judgement | None:
    """The verdict of the answer just written (kept by the session for storing)."""
    spec = stats.summaries.get("speculative")
    if spec is None:
        return None
    return session.verdict(spec, stats.summaries.get("baseline"), comparison, stats.steps, settings)


def guard_text(event: GuardEvent) -> str:
    """The guard's message as the banner shows it: plain text, its headline in bold."""
    return f"{markup(event.headline)}: {escape(event.explanation)}"
