"""Conversation store: one JSON file per conversation, written atomically.

Files live under platformdirs' ``user_data_dir("specdeck")/conversations``; the environment
variable ``SPECDECK_DATA_DIR`` overrides the data directory. Each save writes a temporary
file in the same directory, fsyncs it and ``os.replace``-s it over the old one, so a crash or
kill leaves either the previous or the new version, never a torn file. The UI saves after
every acknowledged message. No Qt here.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from app.core.fileio import atomic_write_text
from app.core.paths import data_dir

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str
    created: float = field(default_factory=time.time)
    stats: dict[str, Any] = field(default_factory=dict)  # assistant: tok/s, verdict, ...

    def as_prompt(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created: float
    updated: float
    messages: tuple[ChatMessage, ...] = ()

    @staticmethod
    def new(title: str = "New chat") -> Conversation:
        now = time.time()
        return Conversation(uuid.uuid4().hex, title, now, now)

    def with_message(self, message: ChatMessage) -> Conversation:
        title = self.title
        if title == "New chat" and message.role == "user" and message.content.strip():
            title = _title_from(message.content)
        return replace(self, title=title, updated=time.time(), messages=(*self.messages, message))

    def without_last_answer(self) -> Conversation:
        """The conversation before its final assistant message (for Regenerate)."""
        messages = list(self.messages)
        while messages and messages[-1].role == "assistant":
            messages.pop()
        return replace(self, updated=time.time(), messages=tuple(messages))

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, **asdict(self)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Conversation:
        messages = tuple(
            ChatMessage(
                role=str(m["role"]),
                content=str(m["content"]),
                created=float(m.get("created", 0.0)),
                stats=dict(m.get("stats") or {}),
            )
            for m in data.get("messages", [])
        )
        return Conversation(
            id=str(data["id"]),
            title=str(data.get("title") or "Untitled"),
            created=float(data.get("created", 0.0)),
            updated=float(data.get("updated", 0.0)),
            messages=messages,
        )


def _title_from(text: str, limit: int = 48) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    title: str
    updated: float
    messages: int


class ConversationStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or data_dir() / "conversations"
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, conversation_id: str) -> Path:
        if not conversation_id or not all(c.isalnum() or c in "-_" for c in conversation_id):
            raise ValueError(f"not a conversation id: {conversation_id!r}")
        return self.directory / f"{conversation_id}.json"

    def save(self, conversation: Conversation) -> None:
        path = self._path(conversation.id)
        atomic_write_text(path, json.dumps(conversation.to_json(), ensure_ascii=False, indent=1))

    def load(self, conversation_id: str) -> Conversation:
        data = json.loads(self._path(conversation_id).read_text(encoding="utf-8"))
        return Conversation.from_json(data)

    def delete(self, conversation_id: str) -> None:
        self._path(conversation_id).unlink(missing_ok=True)

    def list(self) -> list[ConversationInfo]:
        """Saved conversations, most recently updated first; unreadable files are skipped."""
        found = []
        for path in self.directory.glob("*.json"):
            try:
                conv = Conversation.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            found.append(ConversationInfo(conv.id, conv.title, conv.updated, len(conv.messages)))
        return sorted(found, key=lambda info: info.updated, reverse=True)


# --- export -------------------------------------------------------------------------------


def to_markdown(conversation: Conversation) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(conversation.created))
    lines = [f"# {conversation.title}", "", f"_SpecDeck conversation, started {stamp}_", ""]
    names = {"system": "System", "user": "You", "assistant": "Assistant"}
    for message in conversation.messages:
        lines += [f"## {names.get(message.role, message.role)}", "", message.content.rstrip(), ""]
        verdict = message.stats.get("verdict")
        if verdict:
            lines += [f"> {verdict}", ""]
        written_by = _written_by(message.stats)
        if written_by:
            lines += [f"> {written_by}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _written_by(stats: dict[str, Any]) -> str:
    """The pair and the settings that wrote an answer, as one line."""
    bits = [str(stats["pair"])] if isinstance(stats.get("pair"), str) else []
    settings = stats.get("settings")
    if isinstance(settings, dict):
        bits += [f"{key} {value}" for key, value in settings.items() if value is not None]
    return " · ".join(bits)


def to_json_text(conversation: Conversation) -> str:
    return json.dumps(conversation.to_json(), ensure_ascii=False, indent=2) + "\n"


def export(conversation: Conversation, path: Path) -> None:
    """Write Markdown for ``.md``/``.markdown`` paths, JSON otherwise."""
    markdown = path.suffix.lower() in (".md", ".markdown")
    text = to_markdown(conversation) if markdown else to_json_text(conversation)
    path.write_text(text, encoding="utf-8")
