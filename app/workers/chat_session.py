"""The conversation on screen and the answer being written for it, without Qt.

``ChatSession`` turns the conversation and the settings into the worker's ``ChatJob``, and a
finished job (its summaries, the judgement, the streamed tokens, the loaded pair) into the
assistant ``ChatMessage`` that is stored with its figures. The window only shows and saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.engine.events import RunSummary, TextTail, TokenEvent, TokenKind
from app.engine.exactness import Judgement
from app.store.conversations import ChatMessage, Conversation
from app.store.settings import Settings
from app.workers.messages import ChatJob, JobDone, PairLoaded

KIND_CODES = {
    TokenKind.ACCEPTED: "a",
    TokenKind.RESAMPLED: "r",
    TokenKind.BONUS: "b",
    TokenKind.TARGET: "t",
}
CODE_KINDS = {code: kind for kind, code in KIND_CODES.items()}

Stream = Sequence[TokenEvent | TextTail]


def kinds_of(events: Stream) -> list[list[object]]:
    """Run-length token kinds over the characters of an answer: [[code, characters], ...]."""
    runs: list[list[object]] = []
    for event in events:
        code = KIND_CODES[event.kind] if isinstance(event, TokenEvent) else "t"
        text = event.piece if isinstance(event, TokenEvent) else event.text
        if not text:
            continue
        if runs and runs[-1][0] == code:
            runs[-1][1] = int(runs[-1][1]) + len(text)  # type: ignore[call-overload]
        else:
            runs.append([code, len(text)])
    return runs


def answer_details(
    spec: RunSummary,
    stream: Stream,
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


class ChatSession:
    """One conversation and the answer in progress.

    ``start`` builds the job for the conversation as it is; ``judge`` keeps the verdict of the
    answer; ``finish`` stores the answer with its figures. Nothing here is shown or saved.
    """

    def __init__(self, conversation: Conversation | None = None) -> None:
        self.conversation = conversation or Conversation.new()
        self.judgement: Judgement | None = None
        self.answer_settings: Settings | None = None  # the settings the answer runs with
        self.baseline_asked = False  # the answer's job also runs the target alone

    # --- the conversation ----------------------------------------------------------------

    def add_user(self, text: str) -> None:
        self.conversation = self.conversation.with_message(ChatMessage("user", text))

    def drop_last_answer(self) -> bool:
        """Before Regenerate: the conversation without its final answer; True when a question
        is left to answer."""
        if not self.conversation.messages:
            return False
        self.conversation = self.conversation.without_last_answer()
        return bool(self.conversation.messages)

    @property
    def last_answer(self) -> str:
        answers = [m.content for m in self.conversation.messages if m.role == "assistant"]
        return answers[-1] if answers else ""

    # --- one answer ----------------------------------------------------------------------

    def prompt(self, settings: Settings) -> tuple[dict[str, str], ...]:
        """The system prompt from the settings, then the conversation (stored system
        messages are not sent: the settings' prompt is the one in force)."""
        messages = []
        if settings.system_prompt.strip():
            messages.append({"role": "system", "content": settings.system_prompt})
        messages += [m.as_prompt() for m in self.conversation.messages if m.role != "system"]
        return tuple(messages)

    def start(self, settings: Settings) -> ChatJob:
        """The job answering the conversation as it is now."""
        self.judgement = None
        self.answer_settings = settings
        self.baseline_asked = settings.baseline
        return ChatJob(self.prompt(settings), settings, baseline=settings.baseline)

    def judge(self, judgement: Judgement) -> None:
        self.judgement = judgement

    def finish(self, done: JobDone, stream: Stream, pair: PairLoaded | None) -> ChatMessage | None:
        """Store the answer (the speculative run's text, with its figures and token kinds);
        a job that wrote nothing stores nothing."""
        spec, base = done.speculative, done.baseline
        settings = self.answer_settings
        if spec is None or not (spec.tokens or spec.text) or settings is None:
            return None
        stats: dict[str, object] = {
            "spec_tok_s": round(spec.tok_s, 2),
            "acceptance": round(spec.acceptance_rate, 4),
            "tokens": spec.tokens,
            "stop_reason": spec.stop_reason.value,
        }
        if base is not None:
            stats["base_tok_s"] = round(base.tok_s, 2)
        if self.judgement is not None:
            stats["verdict"] = self.judgement.text
        if done.cancelled:
            stats["stopped"] = True
        stats.update(answer_details(spec, stream, settings, pair))
        message = ChatMessage("assistant", spec.text, stats=stats)
        self.conversation = self.conversation.with_message(message)
        return message
