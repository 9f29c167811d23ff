"""A stored conversation never holds a number that is not finite: such a figure is left out
when the conversation is saved and when a file that has one (an older SpecDeck wrote
``"spec_tok_s": Infinity``) is read, and the file written is strict JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.engine.events import RunSummary, StopReason
from app.files.values import loads
from app.store.conversations import ChatMessage, Conversation, ConversationStore, to_json_text
from app.store.settings import Settings
from app.workers.chat_session import ChatSession
from app.workers.messages import JobDone

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def _strict(text: str) -> object:
    """The JSON, refusing NaN and Infinity as SpecDeck's readers of outside data do."""
    return loads(text)


def _run(tok_s: float, base_tok_s: float | None = None) -> tuple[RunSummary, RunSummary | None]:
    def one(mode: str, speed: float) -> RunSummary:
        return RunSummary(
            mode=mode,
            tokens=3,
            elapsed_s=0.1,
            tok_s=speed,
            ttft_ms=5.0,
            acceptance_rate=0.0,
            mean_accepted_length=0.0,
            target_passes_per_token=1.0,
            p50_itl_ms=0.0,
            p95_itl_ms=0.0,
            stop_reason=StopReason.EOG,
            decode_s=0.0,
            steps=0,
            drafted=0,
            accepted=0,
            text="Hi you",
        )

    return one("speculative", tok_s), None if base_tok_s is None else one("baseline", base_tok_s)


def test_an_answer_with_an_infinite_speed_is_saved_without_it(tmp_path: Path) -> None:
    session = ChatSession()
    session.add_user("hi")
    session.start(Settings(baseline=True))
    spec, base = _run(math.inf, math.nan)
    message = session.finish(JobDone(1, False, spec, base, 0), [], None)
    assert message is not None and message.stats["spec_tok_s"] == math.inf  # in memory
    store = ConversationStore(tmp_path)
    store.save(session.conversation)
    text = store.path_of(session.conversation.id).read_text(encoding="utf-8")
    assert "Infinity" not in text and "NaN" not in text
    stats = _strict(text)["messages"][-1]["stats"]  # type: ignore[index]
    assert "spec_tok_s" not in stats and "base_tok_s" not in stats
    assert "tok_s" not in stats["baseline"] and stats["baseline"]["text"] == "Hi you"
    assert stats["tokens"] == 3  # the finite figures stay
    exported = to_json_text(session.conversation)
    assert "Infinity" not in exported and "NaN" not in exported
    _strict(exported)


def test_a_file_holding_infinity_is_read_without_it_and_saved_as_strict_json(
    tmp_path: Path,
) -> None:
    conversation = Conversation.new().with_message(ChatMessage("user", "hi"))
    answer = ChatMessage(
        "assistant",
        "Hi",
        stats={
            "spec_tok_s": math.inf,
            "acceptance": math.nan,
            "tokens": 3,
            "baseline": {"text": "Hi", "tok_s": -math.inf, "tokens": 3},
            "kinds": [1.0, math.inf, 2.0],
        },
    )
    conversation = conversation.with_message(answer)
    path = tmp_path / f"{conversation.id}.json"
    # as an older SpecDeck wrote it: json.dumps's default writes Infinity and NaN
    path.write_text(json.dumps(conversation.to_json()), encoding="utf-8")
    assert "Infinity" in path.read_text() and "NaN" in path.read_text()

    store = ConversationStore(tmp_path)
    scan = store.scan()
    assert [info.id for info in scan.conversations] == [conversation.id]
    (note,) = scan.notes
    assert "message 2 had figures that are not finite numbers" in note
    for where in ("spec_tok_s", "acceptance", "baseline.tok_s", "kinds[1]"):
        assert where in note
    loaded = store.load(conversation.id)
    stats = loaded.messages[-1].stats
    assert stats == {
        "tokens": 3,
        "baseline": {"text": "Hi", "tokens": 3},
        "kinds": [1.0, 2.0],
    }
    store.save(loaded)
    _strict(path.read_text(encoding="utf-8"))
    assert store.scan().notes == []
