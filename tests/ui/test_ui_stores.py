"""Settings and conversation stores (no Qt)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.store.conversations import (
    ChatMessage,
    Conversation,
    ConversationStore,
    export,
    to_markdown,
)
from app.store.settings import Invalid, Settings, SettingsStore, cross_check, with_field

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("temperature", "abc", "not a number"),
        ("temperature", "-1", "must be in [0, 5]"),
        ("top_p", "0", "must be in (0, 1]"),
        ("min_p", "1", "must be in [0, 1)"),
        ("top_k", "2.5", "not a whole number"),
        ("seed", "-3", "leave empty for a random seed"),
        ("n_ctx", "12", "between 256"),
        ("max_tokens", "5000", "smaller than the context size"),
        ("draft_max", "0", "between 1 and 64"),
        ("rule", "maybe", "must be one of"),
    ],
)
def test_invalid_values_are_refused_with_a_reason(name: str, text: str, reason: str) -> None:
    with pytest.raises(Invalid, match=re.escape(reason)):
        with_field(Settings(), name, text)


def test_valid_values_parse() -> None:
    s = with_field(Settings(), "temperature", " 0.7 ")
    s = with_field(s, "seed", "")
    s = with_field(s, "draft_adaptive", "false")
    assert (s.temperature, s.seed, s.draft_adaptive) == (0.7, None, False)
    assert cross_check(s) == {}
    assert s.sampler().temperature == 0.7 and not s.spec().adaptive


def test_settings_round_trip_and_bad_file(isolated: Path) -> None:
    store = SettingsStore()
    assert store.path.parent == isolated / "config"
    store.save(Settings(temperature=0.3, top_k=7, target_path="/m/t.gguf"))
    assert SettingsStore().load() == Settings(temperature=0.3, top_k=7, target_path="/m/t.gguf")
    raw = json.loads(store.path.read_text())
    raw.update(temperature=99, unknown_key=1)
    store.path.write_text(json.dumps(raw))
    loaded = SettingsStore().load()
    assert loaded.temperature == Settings().temperature and loaded.top_k == 7
    store.path.write_text("{not json")
    assert SettingsStore().load() == Settings()


def test_conversation_store(isolated: Path) -> None:
    store = ConversationStore()
    assert store.directory == isolated / "data" / "conversations"
    conv = Conversation.new().with_message(ChatMessage("user", "Explain  KV caches\nplease"))
    conv = conv.with_message(ChatMessage("assistant", "```py\nx = 1\n```", stats={"verdict": "v"}))
    store.save(conv)
    assert [info.title for info in store.list()] == ["Explain KV caches please"]
    assert store.load(conv.id) == conv
    assert not list(store.directory.glob("*.tmp")), "atomic write leaves no temp files"
    markdown = to_markdown(conv)
    assert "## You" in markdown and "```py" in markdown and "> v" in markdown
    export(conv, isolated / "c.json")
    assert json.loads((isolated / "c.json").read_text())["messages"][1]["role"] == "assistant"
    assert conv.without_last_answer().messages == conv.messages[:1]
    (store.directory / "broken.json").write_text("{")
    assert len(store.list()) == 1
    store.delete(conv.id)
    assert store.list() == []
    with pytest.raises(ValueError):
        store.load("../etc")
