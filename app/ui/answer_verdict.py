"""The verdict of the answer on screen (judged by ``ChatSession.verdict``) and the guard
banner: the guard's story over the answer in words for the pair's drafter
(``app.models.guard_words``), its headline in bold."""

from __future__ import annotations

from html import escape

from app.engine.exactness import Comparison, Judgement
from app.models.drafting import PairDrafting
from app.models.guard_words import GuardHistory
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


def guard_text(history: GuardHistory, drafting: PairDrafting | None) -> str:
    """The guard's story as the banner shows it: plain text, its headline in bold."""
    head, rest = history.text(drafting)
    return f"{markup(head)}: {escape(rest)}"
