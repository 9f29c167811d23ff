"""Suites: built-ins, hostile user files, the user's own chats, and the split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.lab.suites import (
    BUILTIN_CATEGORIES,
    MAX_FILE_BYTES,
    Prompt,
    SuiteError,
    builtin,
    from_conversations,
    load_jsonl,
    split,
    suite_hash,
)
from app.store.conversations import ChatMessage, Conversation, ConversationStore

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_builtin_suites_cover_every_category_with_unique_ids() -> None:
    prompts = builtin()
    assert {p.category for p in prompts} == set(BUILTIN_CATEGORIES)
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(sum(p.category == c for p in prompts) >= 5 for c in BUILTIN_CATEGORIES)
    assert any(ord(ch) > 0x3000 for p in prompts if p.category == "scripts" for ch in p.text)
    with pytest.raises(SuiteError, match="no built-in suite poetry"):
        builtin(["poetry"])


def test_split_is_deterministic_disjoint_and_complete() -> None:
    prompts = builtin()
    first, again = split(prompts), split(list(prompts))
    assert first == again
    tuning = {p.id for p in first.tuning}
    held = {p.id for p in first.confirmation}
    assert not tuning & held
    assert tuning | held == {p.id for p in prompts}
    for category in BUILTIN_CATEGORIES:
        assert any(p.category == category for p in first.tuning)
        assert any(p.category == category for p in first.confirmation)
    # a prompt's part depends on its own id, not on which other prompts are in the suite
    fewer = split([p for p in prompts if p.category in ("code", "math")])
    assert {p.id for p in fewer.confirmation} == {
        p.id for p in first.confirmation if p.category in ("code", "math")
    }
    other = split(prompts, salt="another")
    assert {p.id for p in other.confirmation} != held
    assert split([Prompt("only", "solo", "x")]).confirmation == ()


def test_suite_hash_follows_the_content() -> None:
    prompts = builtin(["math"])
    changed = [
        Prompt(p.id, p.category, p.text + "!") if i == 0 else p for i, p in enumerate(prompts)
    ]
    assert suite_hash(prompts) == suite_hash(list(prompts))
    assert suite_hash(prompts) != suite_hash(changed)


def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "mine.jsonl"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "prompt": "x"}\n{broken\n', r"mine.jsonl:2: not valid JSON"),
        ('["a", "b"]\n', r":1: each line must be a JSON object"),
        ('{"prompt": "x"}\n', r":1: each line needs 'id' and 'prompt'"),
        ('{"id": "a", "prompt": 3}\n', r"'prompt' must be a non-empty string"),
        ('{"id": "../../etc", "prompt": "x"}\n', r"'id' must be"),
        ('{"id": true, "prompt": "x"}\n', r"'id' must be a string or a number"),
        ('{"id": "a", "prompt": "x", "category": 5}\n', r"'category' must be"),
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', r"appears twice"),
        ("\n\n", r"holds no prompts"),
        (b"\xff\xfe{}", r"is not UTF-8"),
    ],
)
def test_user_suites_are_type_checked(tmp_path: Path, content: str | bytes, message: str) -> None:
    with pytest.raises(SuiteError, match=message):
        load_jsonl(_write(tmp_path, content))


def test_user_suite_reads_are_bounded(tmp_path: Path) -> None:
    path = _write(tmp_path, "")
    with path.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 10)
    with pytest.raises(SuiteError, match="more than the 4,194,304 bytes"):
        load_jsonl(path)
    good = _write(tmp_path, json.dumps({"id": 7, "prompt": "hi"}) + "\n")
    assert load_jsonl(good) == [Prompt("7", "mine", "hi")]


def test_suite_from_conversations_uses_anonymised_ids(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "conversations")
    conversation = Conversation.new()
    for role, text in (
        ("user", "explain rust lifetimes"),
        ("assistant", "sure"),
        ("user", "and borrowing?"),
    ):
        conversation = conversation.with_message(ChatMessage(role, text))
    store.save(conversation)
    prompts = from_conversations(store)
    assert [p.text for p in prompts] == ["explain rust lifetimes", "and borrowing?"]
    assert all(conversation.id not in p.id and p.id.startswith("chat-") for p in prompts)
    assert from_conversations(store) == prompts
    with pytest.raises(SuiteError, match="no saved conversations"):
        from_conversations(ConversationStore(tmp_path / "empty"))
