"""The chat session without Qt: conversation -> job, finished job -> stored answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from app.engine.config import DraftSource
from app.engine.events import RunSummary, StopReason, TextTail, TokenEvent, TokenKind
from app.engine.exactness import Judgement
from app.engine.process.protocol import PairInfo
from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings
from app.workers.chat_session import ChatSession, kinds_of
from app.workers.messages import JobDone, PairLoaded

ROOT = Path(__file__).resolve().parents[2]
PAIR = PairLoaded(
    1,
    PairInfo("/m/target.gguf", "/m/draft.gguf", DraftSource.MODEL, "CPU", 10, 512, "", False),
    0.1,
)


def summary(mode: str, text: str, tokens: int, **changes: object) -> RunSummary:
    run = RunSummary(
        mode=mode,
        tokens=tokens,
        elapsed_s=1.0,
        tok_s=float(tokens),
        ttft_ms=5.0,
        acceptance_rate=0.75 if mode == "speculative" else 0.0,
        mean_accepted_length=1.5,
        target_passes_per_token=0.5,
        p50_itl_ms=1.0,
        p95_itl_ms=2.0,
        stop_reason=StopReason.EOG,
        decode_s=0.8,
        steps=2,
        drafted=4 if mode == "speculative" else 0,
        accepted=3 if mode == "speculative" else 0,
        text=text,
    )
    return replace(run, **changes)  # type: ignore[arg-type]


def stream_of(*pieces: tuple[str, TokenKind]) -> list[TokenEvent | TextTail]:
    return [TokenEvent(i, 100 + i, piece, kind, step=0) for i, (piece, kind) in enumerate(pieces)]


def test_the_session_module_imports_no_qt() -> None:
    code = (
        "import sys, app.workers.chat_session, app.workers.messages\n"
        "print([n for n in sys.modules if n.split('.')[0] in ('PySide6', 'shiboken6')])"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_job_carries_the_system_prompt_and_the_conversation_without_stored_system() -> None:
    conversation = Conversation.new().with_message(ChatMessage("system", "old system text"))
    session = ChatSession(conversation)
    session.add_user("Hello there")
    settings = Settings(system_prompt="Be brief.", baseline=False, temperature=0.3)
    job = session.start(settings)
    assert job.messages == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello there"},
    )
    assert job.settings is settings and job.baseline is False
    assert not job.cancel.is_set()
    assert session.conversation.title == "Hello there"
    blank = session.start(Settings(system_prompt="   "))
    assert blank.messages == ({"role": "user", "content": "Hello there"},) and blank.baseline


def test_a_finished_answer_is_stored_with_its_figures_kinds_pair_and_settings() -> None:
    session = ChatSession()
    session.add_user("Say hi")
    settings = Settings(temperature=0.0, max_tokens=32, seed=7)
    session.start(settings)
    session.judge(Judgement("2.00× faster", "identical to the baseline", None))
    spec = summary("speculative", "Hi you", 2)
    base = summary("baseline", "Hi you", 2, tok_s=1.0)
    stream = stream_of(("Hi", TokenKind.ACCEPTED), (" you", TokenKind.BONUS))
    message = session.finish(JobDone(1, False, spec, base, 12), stream, PAIR)
    assert message is not None and session.conversation.messages[-1] is message
    assert [m.role for m in session.conversation.messages] == ["user", "assistant"]
    assert message.content == "Hi you"
    stats = message.stats
    assert stats["tokens"] == 2 and stats["spec_tok_s"] == 2.0 and stats["base_tok_s"] == 1.0
    assert stats["acceptance"] == 0.75 and stats["accepted"] == 3 and stats["drafted"] == 4
    assert stats["tokens_per_pass"] == 2.0 and stats["stop_reason"] == "eog"
    assert stats["verdict"] == "2.00× faster — identical to the baseline"
    assert stats["kinds"] == [["a", 2], ["b", 4]]
    assert stats["pair"] == "target.gguf + draft.gguf (draft model)"
    assert stats["settings"]["seed"] == 7 and stats["settings"]["max_tokens"] == 32
    assert "stopped" not in stats


def test_stored_figures_survive_the_store(tmp_path) -> None:  # noqa: ANN001
    session = ChatSession()
    session.add_user("Say hi")
    session.start(Settings())
    stream = stream_of(("Hi", TokenKind.TARGET))
    session.finish(JobDone(1, False, summary("speculative", "Hi", 1), None, 3), stream, None)
    store = ConversationStore(tmp_path)
    store.save(session.conversation)
    again = store.load(session.conversation.id)
    assert again.messages[-1].stats == session.conversation.messages[-1].stats
    assert "pair" not in again.messages[-1].stats and "base_tok_s" not in again.messages[-1].stats


def test_a_stopped_answer_keeps_what_was_written_and_says_stopped() -> None:
    session = ChatSession()
    session.add_user("Count")
    session.start(Settings())
    spec = summary("speculative", "1 2", 2, stop_reason=StopReason.CANCELLED)
    message = session.finish(JobDone(1, True, spec, None, 3), [], PAIR)
    assert message is not None and message.stats["stopped"] is True
    assert "verdict" not in message.stats  # no judgement arrived


def test_a_job_that_wrote_nothing_stores_nothing() -> None:
    session = ChatSession()
    session.add_user("Count")
    session.start(Settings())
    assert session.finish(JobDone(1, True, None, None, 0), [], PAIR) is None
    empty = summary("speculative", "", 0)
    assert session.finish(JobDone(1, False, empty, None, 3), [], PAIR) is None
    assert [m.role for m in session.conversation.messages] == ["user"]


def test_regenerate_drops_the_last_answer_and_asks_the_same_question_again() -> None:
    session = ChatSession()
    session.add_user("First")
    session.start(Settings())
    session.finish(JobDone(1, False, summary("speculative", "A1", 1), None, 3), [], None)
    session.add_user("Second")
    session.start(Settings())
    session.finish(JobDone(2, False, summary("speculative", "A2", 1), None, 3), [], None)
    assert session.last_answer == "A2"
    assert session.drop_last_answer() is True
    assert [m.content for m in session.conversation.messages] == ["First", "A1", "Second"]
    job = session.start(Settings(system_prompt=""))
    assert [m["content"] for m in job.messages] == ["First", "A1", "Second"]
    assert session.last_answer == "A1"


def test_regenerate_with_nothing_to_answer_says_so() -> None:
    assert ChatSession().drop_last_answer() is False
    only_answer = Conversation.new().with_message(ChatMessage("assistant", "orphan"))
    session = ChatSession(only_answer)
    assert session.drop_last_answer() is False and session.conversation.messages == ()


def test_a_new_answer_forgets_the_previous_judgement() -> None:
    session = ChatSession()
    session.add_user("Q")
    session.start(Settings())
    session.judge(Judgement("fast", "", None))
    session.start(Settings())
    assert session.judgement is None
    message = session.finish(JobDone(1, False, summary("speculative", "A", 1), None, 3), [], None)
    assert message is not None and "verdict" not in message.stats


def test_kinds_run_lengths_count_characters_and_the_released_tail_is_target() -> None:
    stream = [
        *stream_of(("ab", TokenKind.ACCEPTED), ("c", TokenKind.ACCEPTED), ("", TokenKind.BONUS)),
        TextTail("xyz"),
    ]
    assert kinds_of(stream) == [["a", 3], ["t", 3]]


# --- Continue: an answer cut off at the token limit -------------------------------------------


def _cut_answer(session: ChatSession, text: str = "Once upon") -> ChatMessage:
    session.add_user("Tell a story")
    session.start(Settings(system_prompt="Be kind."))
    spec = summary("speculative", text, 2, stop_reason=StopReason.MAX_TOKENS, tok_s=4.0)
    stream = stream_of(("Once", TokenKind.ACCEPTED), (" upon", TokenKind.TARGET))
    message = session.finish(JobDone(1, False, spec, None, 5), stream, PAIR)
    assert message is not None
    return message


def test_only_a_last_answer_cut_at_the_token_limit_can_be_continued() -> None:
    session = ChatSession()
    assert not session.can_continue
    _cut_answer(session)
    assert session.can_continue
    session.add_user("and then?")
    assert not session.can_continue  # the cut answer is no longer the last message
    finished = ChatSession()
    finished.add_user("Hi")
    finished.start(Settings())
    finished.finish(JobDone(1, False, summary("speculative", "Hello", 1), None, 3), [], None)
    assert not finished.can_continue
    try:
        finished.start_continue(Settings())
    except ValueError as error:
        assert "finished" in str(error)
    else:
        raise AssertionError("a finished answer was continued")
    # issue 20: an answer stopped while it was written is unfinished too, and can be continued
    stopped = ChatSession()
    stopped.add_user("Hi")
    stopped.start(Settings())
    halted = summary("speculative", "Hel", 1, stop_reason=StopReason.CANCELLED)
    stopped.finish(JobDone(1, True, halted, None, 3), [], None)
    assert stopped.can_continue
    job = stopped.start_continue(Settings())
    assert job.messages[-1] == {"role": "assistant", "content": "Hel"}
    more = summary("speculative", "lo.", 1, stop_reason=StopReason.EOG)
    message = stopped.finish(JobDone(2, False, more, None, 3), [], None)
    assert message is not None and message.content == "Hello."
    assert "stopped" not in message.stats and not stopped.can_continue  # finished this time


def test_continue_sends_the_unfinished_answer_last_and_no_baseline() -> None:
    session = ChatSession()
    _cut_answer(session)
    job = session.start_continue(Settings(system_prompt="Be kind.", baseline=True))
    assert job.messages == (
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Tell a story"},
        {"role": "assistant", "content": "Once upon"},
    )
    assert job.baseline is False and session.baseline_asked is False and session.continuing


def test_a_continuation_extends_the_same_message_and_merges_its_figures() -> None:
    session = ChatSession()
    first = _cut_answer(session)
    session.start_continue(Settings())
    more = summary(
        "speculative",
        " a time",
        3,
        stop_reason=StopReason.EOG,
        tok_s=6.0,
        drafted=2,
        accepted=1,
        target_passes_per_token=1.0,
    )
    stream = stream_of((" a", TokenKind.TARGET), (" time", TokenKind.ACCEPTED))
    message = session.finish(JobDone(2, False, more, None, 9), stream, PAIR)
    assert message is not None
    assert [m.role for m in session.conversation.messages] == ["user", "assistant"]
    assert session.conversation.messages[-1] is message
    assert message.content == "Once upon a time" and message.created == first.created
    stats = message.stats
    assert stats["tokens"] == 5 and stats["accepted"] == 4 and stats["drafted"] == 6
    assert stats["acceptance"] == round(4 / 6, 4)
    assert stats["spec_tok_s"] == round(5 / (2 / 4.0 + 3 / 6.0), 2)  # 5 tokens in 1.0 s
    assert stats["tokens_per_pass"] == round(5 / (2 / 2.0 + 3 / 1.0), 3)  # 4 target passes
    assert stats["stop_reason"] == "eog" and stats["continued"] == 1
    assert stats["kinds"] == [["a", 4], ["t", 7], ["a", 5]]  # " upon" + " a" join up
    assert stats["pair"] == first.stats["pair"]
    assert not session.can_continue  # it finished this time


def test_a_continuation_cut_again_can_be_continued_again() -> None:
    session = ChatSession()
    _cut_answer(session)
    for count in (1, 2):
        session.start_continue(Settings())
        more = summary("speculative", " and", 1, stop_reason=StopReason.MAX_TOKENS)
        session.finish(JobDone(2, False, more, None, 9), stream_of((" and", TokenKind.BONUS)), None)
        assert session.conversation.messages[-1].stats["continued"] == count
        assert session.can_continue
    assert session.last_answer == "Once upon and and"


def test_a_continuation_that_wrote_nothing_leaves_the_answer_as_it_was() -> None:
    session = ChatSession()
    first = _cut_answer(session)
    session.start_continue(Settings())
    assert session.finish(JobDone(2, True, None, None, 9), [], PAIR) is None
    assert session.conversation.messages[-1] == first and session.can_continue


def test_stored_kinds_that_do_not_fit_are_dropped_not_misapplied() -> None:
    hostile = ChatMessage(
        "assistant",
        "Once upon",
        stats={"stop_reason": "max_tokens", "kinds": [["a", 99]], "tokens": "many"},
    )
    conversation = Conversation.new().with_message(ChatMessage("user", "Tell a story"))
    session = ChatSession(conversation.with_message(hostile))
    session.start_continue(Settings())
    more = summary("speculative", " a time", 3)
    message = session.finish(
        JobDone(2, False, more, None, 9), stream_of((" a time", TokenKind.TARGET)), None
    )
    assert message is not None and message.content == "Once upon a time"
    assert "kinds" not in message.stats and message.stats["tokens"] == 3


# --- the target-only answer kept with the message ---------------------------------------------


def test_the_baseline_text_and_figures_are_kept_with_the_answer() -> None:
    session = ChatSession()
    session.add_user("Say hi")
    session.start(Settings(baseline=True))
    spec = summary("speculative", "Hi you", 2)
    base = summary("baseline", "Hi there", 2, tok_s=3.0, stop_reason=StopReason.MAX_TOKENS)
    stream = stream_of(("Hi", TokenKind.ACCEPTED), (" you", TokenKind.RESAMPLED))
    session.judge(Judgement("1.00×", "differs at token 1", 1))
    message = session.finish(JobDone(1, False, spec, base, 12), stream, PAIR)
    assert message is not None
    assert message.stats["baseline"] == {
        "text": "Hi there",
        "tokens": 2,
        "tok_s": 3.0,
        "ttft_ms": 5.0,
        "stop_reason": "max_tokens",
        "diverged_at": 2,  # token 1 starts after "Hi"
    }
    plain = ChatSession()
    plain.add_user("Say hi")
    plain.start(Settings(baseline=False))
    answer = plain.finish(JobDone(1, False, spec, None, 12), stream, PAIR)
    assert answer is not None and "baseline" not in answer.stats


def test_a_continuation_keeps_the_first_parts_baseline() -> None:
    session = ChatSession()
    session.add_user("Tell a story")
    session.start(Settings())
    cut = summary("speculative", "Once upon", 2, stop_reason=StopReason.MAX_TOKENS)
    base = summary("baseline", "Once upon", 2, stop_reason=StopReason.MAX_TOKENS)
    session.finish(JobDone(1, False, cut, base, 5), [], None)
    session.start_continue(Settings())
    session.finish(JobDone(2, False, summary("speculative", " a time", 2), None, 9), [], None)
    stats = session.conversation.messages[-1].stats
    assert stats["baseline"]["text"] == "Once upon" and stats["continued"] == 1


def _stored_with(tmp_path: Path, baseline: object) -> tuple[Conversation, list[str]]:
    store = ConversationStore(tmp_path)
    answer = ChatMessage("assistant", "Hi", stats={"tokens": 1, "baseline": baseline})
    conversation = Conversation.new().with_message(ChatMessage("user", "Q")).with_message(answer)
    store.save(conversation)
    scan = store.scan()
    return store.load(conversation.id), scan.notes


def test_a_stored_baseline_is_type_checked_and_bounded(tmp_path: Path) -> None:
    from app.store.conversations import BASELINE_TEXT_LIMIT

    good = {"text": "Hi!", "tokens": 2, "tok_s": 1.5, "stop_reason": "eog", "diverged_at": 1}
    loaded, notes = _stored_with(tmp_path / "good", {**good, "extra": "x" * 10})
    assert loaded.messages[-1].stats["baseline"] == good and notes == []
    odd_figures = {"text": "Hi!", "tokens": "two", "tok_s": True, "diverged_at": -3}
    loaded, notes = _stored_with(tmp_path / "figures", odd_figures)
    assert loaded.messages[-1].stats["baseline"] == {"text": "Hi!"} and notes == []
    for name, hostile in {
        "list": ["Hi"],
        "number": 3,
        "textless": {"tokens": 2},
        "huge": {"text": "x" * (BASELINE_TEXT_LIMIT + 1)},
    }.items():
        loaded, notes = _stored_with(tmp_path / name, hostile)
        assert "baseline" not in loaded.messages[-1].stats, name
        assert loaded.messages[-1].content == "Hi" and loaded.messages[-1].stats["tokens"] == 1
        assert any("target-only answer stored with message 2" in note for note in notes), name


def test_an_old_conversation_without_a_baseline_still_loads(tmp_path: Path) -> None:
    old = {
        "id": "old1",
        "title": "Old",
        "created": 1.0,
        "updated": 2.0,
        "messages": [
            {"role": "user", "content": "Q", "created": 1.0},
            {"role": "assistant", "content": "A", "created": 2.0, "stats": {"tokens": 1}},
        ],
    }
    (tmp_path / "old1.json").write_text(json.dumps(old), encoding="utf-8")
    loaded = ConversationStore(tmp_path).load("old1")
    assert loaded.messages[-1].stats == {"tokens": 1}
    assert ChatSession(loaded).last_reply == loaded.messages[-1]


def test_an_answer_cut_off_by_an_engine_crash_keeps_what_streamed(tmp_path: Path) -> None:
    """The engine died mid answer: no summary came back, but the streamed text is kept as an
    interrupted answer (tokens and kinds, no speed), saved and reloaded as such."""
    session = ChatSession(Conversation.new())
    session.add_user("Tell me a story")
    session.start(Settings(baseline=True))
    stream = stream_of(
        ("Once", TokenKind.ACCEPTED),
        (" upon", TokenKind.RESAMPLED),
        (" a", TokenKind.BONUS),
        (" time", TokenKind.TARGET),
    )
    kept = session.finish(JobDone(1, True, None, None, 12), stream, PAIR)
    assert kept is not None and kept.content == "Once upon a time"
    assert kept.stats["interrupted"] is True and kept.stats["stopped"] is True
    assert kept.stats["tokens"] == 4
    assert (kept.stats["accepted"], kept.stats["drafted"]) == (1, 2)
    assert kept.stats["kinds"] == [["a", 4], ["r", 5], ["b", 2], ["t", 5]]
    assert kept.stats["pair"] == "target.gguf + draft.gguf (draft model)"
    assert "spec_tok_s" not in kept.stats  # the run never ended: no speed is claimed
    assert [m.role for m in session.conversation.messages] == ["user", "assistant"]
    store = ConversationStore(tmp_path)
    store.save(session.conversation)
    again = store.load(session.conversation.id)
    assert again.messages[-1].content == "Once upon a time"
    assert again.messages[-1].stats["interrupted"] is True

    # a crash before anything streamed stores nothing
    empty = ChatSession(Conversation.new())
    empty.add_user("Hello")
    empty.start(Settings())
    assert empty.finish(JobDone(2, True, None, None, 3), [], PAIR) is None
    assert [m.role for m in empty.conversation.messages] == ["user"]


# --- issue 20: one tok/s after Continue, pauses counted, uneven machines flagged --------------


def test_a_continued_answers_verdict_gives_the_speed_its_stats_line_gives() -> None:
    """After Continue the verdict said 2.62 tok/s (the continuation alone) and the stats line
    4.0 (the whole message): the verdict now gives the whole message's speed, the
    continuation's beside it, and the comparison made before Continue."""
    session = ChatSession()
    session.add_user("Tell a story")
    settings = Settings(temperature=0.0)
    session.start(settings)
    cut = summary("speculative", "Once upon", 40, stop_reason=StopReason.MAX_TOKENS, tok_s=8.0)
    cut = replace(cut, paused_tokens=10)
    base = summary("baseline", "Once upon", 40, stop_reason=StopReason.MAX_TOKENS, tok_s=5.0)
    first = session.verdict(cut, base, None, [], settings)
    assert (
        first.text
        == "1.60× faster (8.00 vs 5.00 tok/s target-only) — drafting paused for 10 of 40 tokens"
    )
    session.finish(JobDone(1, False, cut, base, 5), [], None)
    assert session.conversation.messages[-1].stats["paused_tokens"] == 10

    session.start_continue(settings)
    more = summary("speculative", " a time", 20, tok_s=2.62, stop_reason=StopReason.MAX_TOKENS)
    more = replace(more, paused_tokens=4)
    verdict = session.verdict(more, None, None, [], settings)
    message = session.finish(JobDone(2, False, more, None, 9), [], None)
    assert message is not None
    stats = message.stats
    # 60 tokens in 40/8 + 20/2.62 seconds
    assert stats["spec_tok_s"] == round(60 / (5.0 + 20 / 2.62), 2) == 4.75
    assert verdict.text == (
        "speculative 4.75 tok/s over the whole answer (60 tokens), 2.62 tok/s for the 20 "
        "written by Continue (Continue runs without a target-only run) — drafting paused for "
        f"14 of 60 tokens — before Continue: {first.text}"
    )
    assert stats["verdict"] == verdict.text and stats["compared_verdict"] == first.text
    assert stats["paused_tokens"] == 14

    # a second Continue compares with the same first part, not with the first continuation
    session.start_continue(settings)
    last = summary("speculative", " there", 10, tok_s=5.0)
    again = session.verdict(last, None, None, [], settings)
    assert again.text.endswith(f"before Continue: {first.text}")
    assert again.text.count("before Continue") == 1


def test_an_uneven_machine_is_stored_as_a_flag_and_a_damaged_flag_stays_one(
    tmp_path: Path,
) -> None:
    session = ChatSession()
    session.add_user("Q")
    settings = Settings(temperature=0.0)
    session.start(settings)
    spec = summary("speculative", "A", 40, tok_s=2.1, cpu_share=0.3, outside_cores=1.2)
    base = summary("baseline", "A", 40, tok_s=41.8, cpu_share=0.95, outside_cores=0.0)
    verdict = session.verdict(spec, base, None, [], settings)
    assert verdict.uneven_machine and "×" not in verdict.text
    message = session.finish(JobDone(1, False, spec, base, 3), [], None)
    assert message is not None and message.stats["uneven_machine"] is True
    even = ChatSession()
    even.add_user("Q")
    even.start(settings)
    even.verdict(replace(spec, cpu_share=0.9), base, None, [], settings)
    plain = even.finish(JobDone(1, False, spec, base, 3), [], None)
    assert plain is not None and "uneven_machine" not in plain.stats

    store = ConversationStore(tmp_path)
    for value in ("no", 0, None, [1]):
        hostile = ChatMessage("assistant", "A", stats={"uneven_machine": value})
        conversation = Conversation.new().with_message(ChatMessage("user", "Q"))
        store.save(conversation.with_message(hostile))
        loaded = store.load(conversation.id).messages[-1]
        assert loaded.stats["uneven_machine"] is True, value  # never turned into a speedup
