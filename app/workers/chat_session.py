"""The conversation on screen and the answer being written for it, without Qt.

``ChatSession`` turns the conversation and the settings into the worker's ``ChatJob``, and a
finished job (its summaries, the judgement, the streamed tokens, the loaded pair) into the
assistant ``ChatMessage`` that is stored with its figures. The window only shows and saves.

An answer cut off at the token limit, stopped by the person or interrupted can be continued:
the job's messages end with that unfinished answer (the chat formatter renders it without an
end-of-turn, see ``app.engine.chat_template``), and what the continuation writes is appended
to the same message, its figures merged with the first part's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from app.engine.config import AcceptRule, DraftSource
from app.engine.events import RunSummary, StepEvent, StopReason, TextTail, TokenEvent, TokenKind
from app.engine.exactness import Comparison, Judgement, judge, pause_note
from app.engine.figures import rate
from app.models.drafting import pair_words
from app.store.conversations import (
    BASELINE_TEXT_LIMIT,
    UNEVEN_MACHINE,
    ChatMessage,
    Conversation,
)
from app.store.settings import Settings
from app.workers.messages import ChatJob, JobDone, PairLoaded

KIND_CODES = {
    TokenKind.ACCEPTED: "a",
    TokenKind.RESAMPLED: "r",
    TokenKind.BONUS: "b",
    TokenKind.TARGET: "t",
}
CODE_KINDS = {code: kind for kind, code in KIND_CODES.items()}
# how an answer that Continue can extend ended: the token limit, or Stop while it was written
UNFINISHED = (StopReason.MAX_TOKENS.value, StopReason.CANCELLED.value)

Stream = Sequence[TokenEvent | TextTail]


def unfinished(stats: dict[str, object]) -> bool:
    """An answer Continue can extend, from its stored figures: cut off at the token limit,
    stopped by the person while it was written, or interrupted (no run summary at all)."""
    reason = stats.get("stop_reason")
    return reason in UNFINISHED or (reason is None and bool(stats.get("interrupted")))


def _text_of(event: TokenEvent | TextTail) -> str:
    return event.piece if isinstance(event, TokenEvent) else event.text


def _add_run(runs: list[list[object]], code: object, count: int) -> None:
    """Append ``count`` characters of kind ``code``, merged into the last run when alike."""
    if runs and runs[-1][0] == code:
        runs[-1][1] = int(runs[-1][1]) + count  # type: ignore[call-overload]
    else:
        runs.append([code, count])


def kinds_of(events: Stream) -> list[list[object]]:
    """Run-length token kinds over the characters of an answer: [[code, characters], ...]."""
    runs: list[list[object]] = []
    for event in events:
        text = _text_of(event)
        if text:
            _add_run(
                runs, KIND_CODES[event.kind] if isinstance(event, TokenEvent) else "t", len(text)
            )
    return runs


def _provenance(stream: Stream, settings: Settings, pair: PairLoaded | None) -> dict[str, object]:
    """Token kinds, the settings and the pair: kept with every answer, finished or not."""
    details: dict[str, object] = {"kinds": kinds_of(stream), "settings": settings_record(settings)}
    if pair is not None:
        details["pair"] = pair_record(pair)
    return details


def answer_details(
    spec: RunSummary,
    stream: Stream,
    settings: Settings,
    pair: PairLoaded | None,
) -> dict[str, object]:
    """What a saved answer keeps beside its text: figures, token kinds, the pair, the settings."""
    return {
        "accepted": spec.accepted,
        "drafted": spec.drafted,
        "tokens_per_pass": round(spec.tokens_per_pass, 3),
    } | _provenance(stream, settings, pair)


def settings_record(settings: Settings) -> dict[str, object]:
    """The settings an answer was written with, as stored beside it."""
    return {
        "temperature": settings.temperature,
        "rule": settings.rule,
        "draft_max": settings.draft_max,
        "draft_adaptive": settings.draft_adaptive,
        "seed": settings.seed,
        "max_tokens": settings.max_tokens,
    }


def pair_record(pair: PairLoaded) -> str:
    if pair.remote is not None:
        base = f", baseline {pair.remote.baseline_url}" if pair.remote.baseline_url else ""
        return f"{pair.remote.url} ({pair.remote.server}{base})"
    info = pair.pair
    return pair_words(info.target_path, info.draft_path, DraftSource(info.draft_source))


def baseline_record(
    base: RunSummary, judgement: Judgement | None, stream: Stream
) -> dict[str, object]:
    """The target-only answer kept beside the message, for the comparison when it is
    reopened: its text and figures, and where (in characters) the two answers part when
    they were expected to be identical."""
    record: dict[str, object] = {
        "text": base.text,
        "tokens": base.tokens,
        "tok_s": round(base.tok_s, 2),
        "ttft_ms": round(base.ttft_ms, 1),
        "stop_reason": base.stop_reason.value,
    }
    index = judgement.divergence if judgement is not None else None
    tokens = [event for event in stream if isinstance(event, TokenEvent)]
    if index is not None and 0 <= index <= len(tokens):
        record["diverged_at"] = sum(len(event.piece) for event in tokens[:index])
    return record


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
        self.continuing = False  # the job writes more of the last answer

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
    def can_continue(self) -> bool:
        """The last answer is unfinished: cut off at the token limit, stopped by the person
        while it was being written, or interrupted (the engine died, the window closed)."""
        messages = self.conversation.messages
        if not messages or messages[-1].role != "assistant":
            return False
        return unfinished(messages[-1].stats)

    @property
    def last_reply(self) -> ChatMessage | None:
        """The last assistant message, whose comparison is shown under the conversation."""
        replies = [m for m in self.conversation.messages if m.role == "assistant"]
        return replies[-1] if replies else None

    @property
    def last_answer(self) -> str:
        reply = self.last_reply
        return reply.content if reply is not None else ""

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
        self.continuing = False
        return ChatJob(self.prompt(settings), settings, baseline=settings.baseline)

    def start_continue(self, settings: Settings) -> ChatJob:
        """The job writing more of the cut-off last answer: the conversation ends with it, so
        the model goes on from its last token. Only the speculative run: a baseline would
        describe the continuation alone, not the message it extends."""
        if not self.can_continue:
            raise ValueError("the last answer is finished: there is nothing to continue")
        self.judgement = None
        self.answer_settings = settings
        self.baseline_asked = False
        self.continuing = True
        return ChatJob(self.prompt(settings), settings, baseline=False)

    def judge(self, judgement: Judgement) -> None:
        self.judgement = judgement

    def verdict(
        self,
        spec: RunSummary,
        base: RunSummary | None,
        comparison: Comparison | None,
        steps: Sequence[StepEvent],
        settings: Settings,
    ) -> Judgement:
        """The verdict of the answer just written, kept for ``finish``. A continuation's
        verdict is about the whole message, with the same figures its stats line shows."""
        settings = self.answer_settings or settings
        judgement = judge(
            spec,
            base,
            comparison,
            temperature=settings.temperature,
            rule=AcceptRule(settings.rule),
            position_keyed=spec.position_keyed,
            steps=steps,
        )
        if self.continuing and self.can_continue:
            judgement = continued_judgement(self.conversation.messages[-1].stats, spec)
        self.judgement = judgement
        return judgement

    def finish(self, done: JobDone, stream: Stream, pair: PairLoaded | None) -> ChatMessage | None:
        """Store the answer (the speculative run's text, with its figures and token kinds);
        a job that wrote nothing stores nothing. A job cut off before its run could finish
        (the engine crashed, the window closed) keeps what had streamed, marked as
        interrupted; so does a continuation, appended to the message it extends."""
        spec, base = done.speculative, done.baseline
        settings = self.answer_settings
        if spec is None and done.cancelled and settings is not None:
            if self.continuing:
                return self._extend_interrupted(stream)
            return self._keep_interrupted(stream, settings, pair)
        if spec is None or not (spec.tokens or spec.text) or settings is None:
            return None
        if self.continuing:
            return self._extend(spec, stream, done.cancelled)
        stats: dict[str, object] = {
            "spec_tok_s": round(spec.tok_s, 2),
            "acceptance": round(spec.acceptance_rate, 4),
            "tokens": spec.tokens,
            "stop_reason": spec.stop_reason.value,
        }
        if base is not None:
            stats["base_tok_s"] = round(base.tok_s, 2)
            if len(base.text) <= BASELINE_TEXT_LIMIT:
                stats["baseline"] = baseline_record(base, self.judgement, stream)
        if spec.paused_tokens:
            stats["paused_tokens"] = spec.paused_tokens
        if self.judgement is not None:
            stats["verdict"] = self.judgement.text
            if self.judgement.uneven_machine:  # the two speeds are no speedup
                stats[UNEVEN_MACHINE] = True
        if done.cancelled:
            stats["stopped"] = True
        stats.update(answer_details(spec, stream, settings, pair))
        message = ChatMessage("assistant", spec.text, stats=stats)
        self.conversation = self.conversation.with_message(message)
        return message

    def interrupt(
        self, stream: Stream, pair: PairLoaded | None, speculative: RunSummary | None = None
    ) -> ChatMessage | None:
        """The window closes mid-answer: what streamed is kept as an engine crash keeps it
        (a speculative run that had ended keeps its figures; an unfinished baseline is left
        out). None when nothing is kept."""
        if self.answer_settings is None:
            return None
        return self.finish(JobDone(-1, True, speculative, None, 0), stream, pair)

    def _keep_interrupted(
        self, stream: Stream, settings: Settings, pair: PairLoaded | None
    ) -> ChatMessage | None:
        """The text that streamed before the run was cut off, with what is known of it: its
        tokens and their kinds, the pair and the settings; no speed (the run never ended)."""
        text = "".join(_text_of(e) for e in stream)
        if not text.strip():
            return None
        tokens = [e for e in stream if isinstance(e, TokenEvent)]
        drafted_kinds = (TokenKind.ACCEPTED, TokenKind.RESAMPLED)
        stats: dict[str, object] = {
            "tokens": len(tokens),
            "stopped": True,
            "interrupted": True,
            "accepted": sum(e.kind is TokenKind.ACCEPTED for e in tokens),
            "drafted": sum(e.kind in drafted_kinds for e in tokens),
        } | _provenance(stream, settings, pair)
        message = ChatMessage("assistant", text, stats=stats)
        self.conversation = self.conversation.with_message(message)
        return message

    def _extend_interrupted(self, stream: Stream) -> ChatMessage | None:
        """The last answer with what its continuation wrote before it was cut off: the text,
        its tokens and kinds; no speed (the run never ended)."""
        text = "".join(_text_of(e) for e in stream)
        messages = self.conversation.messages
        if not text or not messages or messages[-1].role != "assistant":
            return None
        last = messages[-1]
        old = last.stats
        tokens = [e for e in stream if isinstance(e, TokenEvent)]
        stats = dict(old)
        stats.update(
            tokens=_count(old, "tokens") + len(tokens),
            accepted=_count(old, "accepted") + sum(e.kind is TokenKind.ACCEPTED for e in tokens),
            drafted=_count(old, "drafted")
            + sum(e.kind in (TokenKind.ACCEPTED, TokenKind.RESAMPLED) for e in tokens),
            continued=_count(old, "continued") + 1,
            stopped=True,
            interrupted=True,
        )
        return self._replace_last(last, text, stats, stream)

    def _replace_last(
        self, last: ChatMessage, added: str, stats: dict[str, object], stream: Stream
    ) -> ChatMessage:
        """``last`` with ``added`` appended, ``stats`` and the kinds of both parts."""
        runs = last.stats.get("kinds")
        if _covers(runs, len(last.content)):
            stats["kinds"] = _joined(runs, kinds_of(stream))  # type: ignore[arg-type]
        else:  # kinds that did not fit the first part cannot colour the whole
            stats.pop("kinds", None)
        message = replace(last, content=last.content + added, stats=stats)
        self.conversation = replace(
            self.conversation,
            updated=time.time(),
            messages=(*self.conversation.messages[:-1], message),
        )
        return message

    def _extend(self, spec: RunSummary, stream: Stream, cancelled: bool) -> ChatMessage:
        """The last answer with the continuation appended and the figures of both parts."""
        last = self.conversation.messages[-1]
        old = last.stats
        stats = dict(old)
        stats.update(merged_figures(old, spec))
        stats.update(stop_reason=spec.stop_reason.value, continued=_count(old, "continued") + 1)
        stats.pop("paused_tokens", None)
        paused = _count(old, "paused_tokens") + spec.paused_tokens
        if paused:
            stats["paused_tokens"] = paused
        compared = old.get("compared_verdict", old.get("verdict"))
        if isinstance(compared, str) and compared:
            stats["compared_verdict"] = compared  # the part the target-only run was timed on
        if self.judgement is not None:
            stats["verdict"] = self.judgement.text
        if cancelled:
            stats["stopped"] = True
        else:  # the part written now says how the answer ended, not an earlier Stop
            stats.pop("stopped", None)
            stats.pop("interrupted", None)
        return self._replace_last(last, spec.text, stats, stream)


def merged_figures(old: dict[str, object], spec: RunSummary) -> dict[str, int | float]:
    """The figures of a message whose stored part ``old`` is continued by ``spec``: counts
    added, tok/s as all tokens over all generation time (prefill excluded, as in a
    ``RunSummary``), so a continued message has one speed wherever it is shown."""
    before, added = _count(old, "tokens"), spec.tokens
    tokens = before + added
    accepted = _count(old, "accepted") + spec.accepted
    drafted = _count(old, "drafted") + spec.drafted
    seconds = _seconds(before, old.get("spec_tok_s")) + _seconds(added, spec.tok_s)
    passes = _seconds(before, old.get("tokens_per_pass")) + _seconds(added, spec.tokens_per_pass)
    return {
        "tokens": tokens,
        "accepted": accepted,
        "drafted": drafted,
        "acceptance": round(accepted / drafted, 4) if drafted else 0.0,
        "spec_tok_s": round(tokens / seconds, 2) if seconds > 0 else 0.0,
        "tokens_per_pass": round(tokens / passes, 3) if passes > 0 else 0.0,
    }


def continued_judgement(old: dict[str, object], spec: RunSummary) -> Judgement:
    """The verdict of a message continued by ``spec``: the whole message's speed (the
    figure its stats line shows), the continuation's own, and the comparison made before
    Continue (a continuation runs without a target-only run)."""
    merged = merged_figures(old, spec)
    tokens = int(merged["tokens"])
    speed = (
        f"speculative {rate(merged['spec_tok_s'])} tok/s over the whole answer ({tokens} "
        f"tokens), {rate(spec.tok_s)} tok/s for the {spec.tokens} written by Continue "
        "(Continue runs without a target-only run)"
    )
    compared = old.get("compared_verdict", old.get("verdict"))
    before = f"before Continue: {compared}" if isinstance(compared, str) and compared else ""
    note = pause_note(_count(old, "paused_tokens") + spec.paused_tokens, tokens)
    return Judgement(speed, "", None, tuple(part for part in (note, before) if part))


def _count(stats: dict[str, object], key: str) -> int:
    """A stored count; stored files are hostile, so anything but a count is 0."""
    value = stats.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _seconds(tokens: int, rate: object) -> float:
    """Time (or passes) that ``tokens`` took at ``rate`` per second (or per pass)."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0:
        return 0.0
    return tokens / float(rate)


def _covers(runs: object, length: int) -> bool:
    """Stored kinds that are well formed and cover exactly ``length`` characters."""
    if not isinstance(runs, list):
        return False
    total = 0
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and run[0] in CODE_KINDS):
            return False
        count = run[1]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return False
        total += count
    return total == length


def _joined(first: list[list[object]], second: list[list[object]]) -> list[list[object]]:
    runs = [list(run) for run in first]
    for code, count in second:
        _add_run(runs, code, int(count))  # type: ignore[call-overload]
    return runs
