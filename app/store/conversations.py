"""Conversation store: one JSON file per conversation, written atomically.

Files live under platformdirs' ``user_data_dir("specdeck")/conversations``; the environment
variable ``SPECDECK_DATA_DIR`` overrides the data directory. Each save writes a temporary
file in the same directory, fsyncs it and ``os.replace``-s it over the old one, so a crash or
kill leaves either the previous or the new version, never a torn file. The UI saves after
every acknowledged message. A stored conversation never holds a number that is not finite:
such a figure is left out when it is saved and when it is read (``NaN``/``Infinity`` are
not JSON, and a speed of "inf tok/s" is no figure). No Qt here.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from app.files.fileio import (
    StoredFileError,
    atomic_write_text,
    clean_stale_temps,
    error_text,
    json_text,
    read_json_object,
)
from app.files.paths import data_dir
from app.store.migrations import MigrationError, Schema, upgrade

CONVERSATION_LIMIT = 64 << 20  # bytes; a very long chat is a few MB
# Format versions of a conversation file, under the key "format" it has always carried; a file
# without it is version 1. A change of format bumps ``current`` and appends the step.
CONVERSATION_SCHEMA = Schema("conversation", current=1, steps=(), key="format")
ID_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
ID_LIMIT = 64
# The target-only answer kept beside an assistant message (stats["baseline"]): its text is
# bounded like an answer's (Max tokens is at most 131,072 tokens), its figures are numbers.
BASELINE_TEXT_LIMIT = 1 << 20  # characters
BASELINE_FIGURES = ("tokens", "tok_s", "ttft_ms", "diverged_at")
STOP_REASON_LIMIT = 40
# stats flag of an answer whose speculative and target-only runs did not get the same machine
# (exactness.uneven_machine): its two speeds are kept, but they are no speedup
UNEVEN_MACHINE = "uneven_machine"


def is_conversation_id(text: str) -> bool:
    """Only letters, digits, - and _ (ASCII), so an id is always a safe file name."""
    return 0 < len(text) <= ID_LIMIT and all(c in ID_CHARACTERS for c in text)


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
        return {CONVERSATION_SCHEMA.key: CONVERSATION_SCHEMA.current, **asdict(self)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Conversation:
        """A conversation from a decoded file; raises ``ValueError`` naming what is wrong."""
        conversation, _ = conversation_from_json(data, expected_id=None)
        return conversation


ROLES = ("system", "user", "assistant")
TITLE_LIMIT = 200
_LATEST_TIME = 32503680000.0  # the year 3000: later stamps are damage (localtime overflows)


def _stamp(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    stamp = float(value)
    return stamp if 0.0 <= stamp <= _LATEST_TIME else None


def finite_only(value: Any) -> tuple[Any, list[str]]:
    """``value`` (decoded JSON) without the numbers that are not finite, at any depth, and
    where each one was ("baseline.tok_s"). Iterative, so no nesting the JSON reader allows
    can exhaust the stack; None for a lone number that is not finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, ["the value"]
    if not isinstance(value, dict | list | tuple):
        return value, []
    dropped: list[str] = []
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, str]] = [(value, root, "")]
    while stack:
        source, copy, where = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, float) and not math.isfinite(item):
                dropped.append(_place(where, key, isinstance(source, dict)))
                continue
            if isinstance(item, dict | list | tuple):
                inner: dict[Any, Any] | list[Any] = {} if isinstance(item, dict) else []
                stack.append((item, inner, _place(where, key, isinstance(source, dict))))
                item = inner
            if isinstance(copy, dict):
                copy[key] = item
            else:
                copy.append(item)
    return root, dropped


def _place(where: str, key: object, named: bool) -> str:
    if not named:
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


def stored_json(conversation: Conversation) -> dict[str, Any]:
    """What is written for ``conversation``: its JSON without numbers that are not finite."""
    return finite_only(conversation.to_json())[0]


def baseline_from_json(raw: object) -> dict[str, Any] | None:
    """A stored baseline (the target-only answer beside a message), or None when it is not
    one: text within ``BASELINE_TEXT_LIMIT``, counts and figures as numbers."""
    if not isinstance(raw, dict):
        return None
    text = raw.get("text")
    if not isinstance(text, str) or len(text) > BASELINE_TEXT_LIMIT:
        return None
    baseline: dict[str, Any] = {"text": text}
    for key in BASELINE_FIGURES:
        value = raw.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            baseline[key] = value
    stop = raw.get("stop_reason")
    if isinstance(stop, str) and len(stop) <= STOP_REASON_LIMIT:
        baseline["stop_reason"] = stop
    return baseline


def _message_from_json(raw: object, index: int, repairs: list[str]) -> ChatMessage:
    if not isinstance(raw, dict):
        raise ValueError(f"message {index + 1} is not an object")
    role, content = raw.get("role"), raw.get("content")
    if role not in ROLES:
        raise ValueError(
            f"message {index + 1} has the role {str(role)[:30]!r}, not one of {', '.join(ROLES)}"
        )
    if not isinstance(content, str):
        raise ValueError(f"message {index + 1} has no text content")
    stats = dict(raw["stats"]) if isinstance(raw.get("stats"), dict) else {}
    stats, dropped = finite_only(stats)
    if dropped:
        repairs.append(
            f"message {index + 1} had figures that are not finite numbers "
            f"({', '.join(dropped)[:120]}); they are left out"
        )
    # the flag is kept as True whatever its stored value: a damaged flag never turns a figure
    # from uneven machines into a plain speedup
    if UNEVEN_MACHINE in stats:
        stats[UNEVEN_MACHINE] = True
    if "baseline" in stats:  # shown as text: checked, not passed on as it came
        baseline = baseline_from_json(stats["baseline"])
        if baseline is None:
            del stats["baseline"]
            repairs.append(
                f"the target-only answer stored with message {index + 1} was not usable "
                f"(text of at most {BASELINE_TEXT_LIMIT:,} characters); it is left out"
            )
        else:
            stats["baseline"] = baseline
    return ChatMessage(
        role=role,
        content=content,
        created=_stamp(raw.get("created")) or 0.0,
        stats=stats,  # derived figures: safe to drop
    )


def conversation_from_json(
    data: dict[str, Any], *, expected_id: str | None
) -> tuple[Conversation, list[str]]:
    """A conversation and the repairs made to it. The messages must be intact (``ValueError``
    otherwise, so the file is skipped and kept as it is); the id, title and timestamps are
    repaired: with ``expected_id`` (the file name) the id is always the file's."""
    repairs: list[str] = []
    messages_raw = data.get("messages", [])
    if not isinstance(messages_raw, list):
        raise ValueError("its messages are not a list")
    messages = tuple(_message_from_json(m, i, repairs) for i, m in enumerate(messages_raw))
    inner_id = data.get("id")
    if expected_id is not None:
        conversation_id = expected_id
        if inner_id != expected_id:
            repairs.append(
                f"its inner id {str(inner_id)[:40]!r} did not match the file name; "
                "the file name is used"
            )
    elif isinstance(inner_id, str) and is_conversation_id(inner_id):
        conversation_id = inner_id
    else:
        raise ValueError(f"its id {str(inner_id)[:40]!r} is not a conversation id")
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        if title not in (None, ""):
            repairs.append("its title was not text")
        title = "Untitled"
    elif len(title) > TITLE_LIMIT or any(c in title for c in "\x00\r\n"):
        title = _title_from(title.replace("\x00", " "), TITLE_LIMIT)
    created, updated = _stamp(data.get("created")), _stamp(data.get("updated"))
    if created is None or updated is None:
        repairs.append("its dates were not valid times")
    conversation = Conversation(
        id=conversation_id,
        title=title,
        created=created if created is not None else 0.0,
        updated=updated if updated is not None else (created or 0.0),
        messages=messages,
    )
    return conversation, repairs


def _title_from(text: str, limit: int = 48) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    title: str
    updated: float
    messages: int


@dataclass(frozen=True)
class ConversationScan:
    conversations: list[ConversationInfo]  # most recently updated first
    notes: list[str]  # files skipped or repaired, one sentence each


@dataclass(frozen=True)
class _Listed:
    info: ConversationInfo | None  # None: skipped
    notes: tuple[str, ...]
    signature: tuple[int, int, int] | None  # (mtime_ns, size, inode) it was read at


def _signature(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_mtime_ns, info.st_size, info.st_ino)


class ConversationStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or data_dir() / "conversations"
        # The list is refreshed after every message: unchanged files are not read again.
        self._listing: dict[str, _Listed] = {}
        # The newest conversation the last scan read, for the load that opens it next (a
        # 60 MB file is not parsed twice at start): (file name, signature, conversation).
        self._newest: tuple[str, tuple[int, int, int], Conversation] | None = None
        # A read-only data folder: reading still works, and saving says why it cannot.
        with contextlib.suppress(OSError):
            self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, conversation_id: str) -> Path:
        if not isinstance(conversation_id, str) or not is_conversation_id(conversation_id):
            raise ValueError(f"not a conversation id: {str(conversation_id)[:80]!r}")
        return self.directory / f"{conversation_id}.json"

    def path_of(self, conversation_id: str) -> Path:
        return self._path(conversation_id)

    def save(self, conversation: Conversation) -> None:
        """Raises ``OSError`` when the folder is read-only or full; the caller says so."""
        path = self._path(conversation.id)
        atomic_write_text(path, json_text(stored_json(conversation), indent=1, allow_nan=False))

    def load(self, conversation_id: str) -> Conversation:
        """Raises ``ValueError`` (with the file and the reason) or ``OSError``."""
        path = self._path(conversation_id)
        newest, self._newest = self._newest, None
        if newest is not None and newest[0] == path.name:
            with contextlib.suppress(OSError):
                if _signature(path.stat()) == newest[1]:
                    return newest[2]
        return self._read(path)[0]

    def _read(self, path: Path) -> tuple[Conversation, list[str]]:
        data = read_json_object(path, CONVERSATION_LIMIT, what="conversation")
        try:
            upgraded = upgrade(data, CONVERSATION_SCHEMA)
            conversation, repairs = conversation_from_json(upgraded.data, expected_id=path.stem)
        except (ValueError, MigrationError) as exc:
            raise StoredFileError(f"the conversation {path} cannot be used: {exc}") from None
        if upgraded.newer:
            repairs.append(
                f"it was written by a newer SpecDeck (format {upgraded.found}); "
                "it is shown as far as this version understands it"
            )
        return conversation, repairs

    def delete(self, conversation_id: str) -> None:
        self._path(conversation_id).unlink(missing_ok=True)

    def list(self) -> list[ConversationInfo]:
        """Saved conversations, most recently updated first; unusable files are skipped."""
        return self.scan().conversations

    def _listed(self, path: Path) -> tuple[_Listed, Conversation | None] | None:
        """One file's entry in the list, re-read only when its size or time changed (with
        the conversation when it was read)."""
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            skipped = f"skipped the conversation {path}: {error_text(exc)}"
            return _Listed(None, (skipped,), None), None
        signature = _signature(info)
        cached = self._listing.get(path.name)
        if cached is not None and cached.signature == signature:
            return cached, None
        if not is_conversation_id(path.stem):
            named = (
                f"skipped {path}: its name is not a conversation id (letters, digits, - and _ only)"
            )
            return _Listed(None, (named,), signature), None
        try:
            conv, repairs = self._read(path)
        except FileNotFoundError:
            return None
        except StoredFileError as exc:
            return _Listed(None, (f"skipped {exc}",), signature), None
        except OSError as exc:
            skipped = f"skipped the conversation {path}: {error_text(exc)}"
            return _Listed(None, (skipped,), None), None
        notes = tuple(f"conversation {path.name}: {repair}" for repair in repairs)
        entry = ConversationInfo(conv.id, conv.title, conv.updated, len(conv.messages))
        return _Listed(entry, notes, signature), conv

    def scan(self) -> ConversationScan:
        """Every usable conversation, with a note for each file skipped or repaired; files
        are never changed here, so a skipped one stays on disk as it was."""
        clean_stale_temps(self.directory)
        found: list[ConversationInfo] = []
        notes: list[str] = []
        try:
            paths = sorted(self.directory.glob("*.json"))
        except OSError as exc:
            return ConversationScan(
                [], [f"cannot list the conversations in {self.directory}: {error_text(exc)}"]
            )
        seen: dict[str, _Listed] = {}
        fresh: Conversation | None = None  # the newest of those read now (only it is kept)
        for path in paths:
            listed = self._listed(path)
            if listed is None:
                continue  # deleted while listing
            entry, conversation = listed
            seen[path.name] = entry
            notes += entry.notes
            if entry.info is not None:
                found.append(entry.info)
            if conversation is not None and (fresh is None or conversation.updated > fresh.updated):
                fresh = conversation
        self._listing = seen
        found.sort(key=lambda info: info.updated, reverse=True)
        self._keep_newest(found, fresh)
        return ConversationScan(found, notes)

    def _keep_newest(self, found: Sequence[ConversationInfo], fresh: Conversation | None) -> None:
        """Keep the newest conversation for the load that opens it: the one just read, or
        the one kept before when its file has not changed since."""
        name = f"{found[0].id}.json" if found else ""
        listed = self._listing.get(name)
        signature = listed.signature if listed is not None else None
        if fresh is not None and fresh.id == found[0].id and signature is not None:
            self._newest = (name, signature, fresh)
        elif self._newest is None or self._newest[:2] != (name, signature):
            self._newest = None


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
    text = json.dumps(stored_json(conversation), ensure_ascii=False, indent=2, allow_nan=False)
    return text + "\n"


def export(conversation: Conversation, path: Path) -> None:
    """Write Markdown for ``.md``/``.markdown`` paths, JSON otherwise."""
    markdown = path.suffix.lower() in (".md", ".markdown")
    text = to_markdown(conversation) if markdown else to_json_text(conversation)
    path.write_text(text, encoding="utf-8")
