"""Prompt suites: built-in JSONL files by category, user JSONL files, the user's own chats.

Every read is bounded (file size, line length, prompt count) and every value type-checked,
so a hostile or broken file ends in a message naming the file and line, never a crash.
The split into tuning and confirmation parts is a pure function of the prompt ids and a
salt, so the same suite always splits the same way and the two parts never overlap.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.files.fileio import StoredFileError, read_text_bounded
from app.files.values import BadValue, label, loads, unicode
from app.store.conversations import ConversationStore

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "resources" / "lab"
BUILTIN_CATEGORIES = (
    "code",
    "edit",
    "chat",
    "math",
    "structured",
    "translation",
    "longform",
    "scripts",
    "adversarial",
)
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_PROMPT_CHARS = 16_000
MAX_PROMPTS = 2_000
MAX_ID_CHARS = 80
ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class SuiteError(ValueError):
    """A suite file that cannot be used; the message says which file, line and why."""


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "category": self.category, "prompt": self.text}


@dataclass(frozen=True)
class Split:
    tuning: tuple[Prompt, ...]
    confirmation: tuple[Prompt, ...]
    salt: str
    confirm_fraction: float


def _check_id(value: object, where: str) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise SuiteError(f"{where}: 'id' must be a string or a number")
    text = str(value)
    if not text or len(text) > MAX_ID_CHARS or not set(text) <= ID_CHARS:
        raise SuiteError(
            f"{where}: 'id' must be 1-{MAX_ID_CHARS} characters of letters, digits, - _ ."
        )
    return text


def _check_category(value: object, where: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise SuiteError(f"{where}: 'category' must be a short non-empty string")
    try:
        label(value, "'category'", MAX_ID_CHARS)
    except BadValue as exc:
        raise SuiteError(f"{where}: {exc}") from None
    return value.strip()


def _check_unicode(value: str, what: str, where: str) -> None:
    try:
        unicode(value, what)
    except BadValue as exc:
        raise SuiteError(f"{where}: {exc}") from None


def check_prompt(
    item: object,
    where: str,
    *,
    default_category: str = "custom",
    max_prompt_chars: int = MAX_PROMPT_CHARS,
) -> Prompt:
    """One prompt from a decoded JSON object (a suite line, or a result file's plan)."""
    if not isinstance(item, dict):
        raise SuiteError(f"{where}: a prompt must be a JSON object")
    if "id" not in item or "prompt" not in item:
        raise SuiteError(f"{where}: a prompt needs 'id' and 'prompt'")
    prompt_id = _check_id(item["id"], where)
    text_value = item["prompt"]
    if not isinstance(text_value, str) or not text_value.strip():
        raise SuiteError(f"{where}: 'prompt' must be a non-empty string")
    if len(text_value) > max_prompt_chars:
        raise SuiteError(f"{where}: the prompt is longer than {max_prompt_chars:,} characters")
    _check_unicode(text_value, "the prompt", where)
    category = _check_category(item.get("category"), where, default_category)
    return Prompt(prompt_id, category, text_value)


def parse_jsonl(
    text: str,
    *,
    source: str,
    default_category: str = "custom",
    max_prompt_chars: int = MAX_PROMPT_CHARS,
) -> list[Prompt]:
    """Prompts from JSONL text: one object a line with ``id``, ``prompt`` and ``category``;
    each prompt at most ``max_prompt_chars`` long."""
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        if len(line) > max_prompt_chars + 1000:
            raise SuiteError(f"{where}: the line is longer than {max_prompt_chars:,} characters")
        try:
            item = loads(line)
        except ValueError as exc:  # bad syntax, NaN, nesting too deep, a 5,000-digit number
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise SuiteError(f"{where}: not valid JSON ({why})") from None
        if not isinstance(item, dict):
            raise SuiteError(f"{where}: each line must be a JSON object")
        if "id" not in item or "prompt" not in item:
            raise SuiteError(f"{where}: each line needs 'id' and 'prompt'")
        prompt = check_prompt(
            item, where, default_category=default_category, max_prompt_chars=max_prompt_chars
        )
        if prompt.id in seen:
            raise SuiteError(f"{where}: the id {prompt.id!r} appears twice")
        seen.add(prompt.id)
        prompts.append(prompt)
        if len(prompts) > MAX_PROMPTS:
            raise SuiteError(f"{source}: more than {MAX_PROMPTS} prompts")
    if not prompts:
        raise SuiteError(f"{source} holds no prompts")
    return prompts


def load_jsonl(
    path: Path, *, default_category: str | None = None, max_prompt_chars: int = MAX_PROMPT_CHARS
) -> list[Prompt]:
    """A user's suite file: a regular file (a FIFO or a device is refused before it is
    read), at most ``MAX_FILE_BYTES`` of UTF-8."""
    try:
        text = read_text_bounded(path, MAX_FILE_BYTES, what="suite")
    except FileNotFoundError:
        raise SuiteError(f"the suite {path} does not exist") from None
    except StoredFileError as exc:
        raise SuiteError(str(exc)) from None
    category = default_category or path.stem
    return parse_jsonl(
        text, source=str(path), default_category=category, max_prompt_chars=max_prompt_chars
    )


def builtin(categories: Iterable[str] | None = None) -> list[Prompt]:
    wanted = tuple(categories) if categories is not None else BUILTIN_CATEGORIES
    unknown = [c for c in wanted if c not in BUILTIN_CATEGORIES]
    if unknown:
        raise SuiteError(
            f"no built-in suite {', '.join(unknown)}; there are {', '.join(BUILTIN_CATEGORIES)}"
        )
    prompts: list[Prompt] = []
    for category in wanted:
        prompts += load_jsonl(BUILTIN_DIR / f"{category}.jsonl", default_category=category)
    return prompts


def from_conversations(
    store: ConversationStore, *, limit: int = 40, category: str = "my-chats"
) -> list[Prompt]:
    """The user's recent prompts; ids are hashes, so a result file names no conversation."""
    prompts: list[Prompt] = []
    for info in store.list():
        try:
            conversation = store.load(info.id)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for index, message in enumerate(conversation.messages):
            text = message.content.strip()
            if message.role != "user" or not text or len(text) > MAX_PROMPT_CHARS:
                continue
            try:
                _check_unicode(text, "the prompt", info.id)
            except SuiteError:
                continue
            digest = hashlib.sha256(f"{info.id}/{index}".encode()).hexdigest()[:10]
            prompts.append(Prompt(f"chat-{digest}", category, text))
            if len(prompts) >= limit:
                return prompts
    if not prompts:
        raise SuiteError("there are no saved conversations with prompts to make a suite from")
    return prompts


def suite_hash(prompts: Sequence[Prompt]) -> str:
    canonical = json.dumps([p.to_json() for p in prompts], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _rank(prompt_id: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}\0{prompt_id}".encode()).hexdigest()


def split(
    prompts: Sequence[Prompt], *, salt: str = "specdeck-lab", confirm_fraction: float = 1 / 3
) -> Split:
    """Per category, the prompts whose salted id hashes lowest go to confirmation.

    A category of two or more prompts keeps at least one in each part; a lone prompt tunes.
    """
    if not 0.0 < confirm_fraction < 1.0:
        raise ValueError("the confirmation fraction must be between 0 and 1")
    by_category: dict[str, list[Prompt]] = {}
    for prompt in prompts:
        by_category.setdefault(prompt.category, []).append(prompt)
    held: set[str] = set()
    for members in by_category.values():
        if len(members) < 2:
            continue
        count = min(max(1, math.floor(len(members) * confirm_fraction)), len(members) - 1)
        ranked = sorted(members, key=lambda p: _rank(p.id, salt))
        held.update(p.id for p in ranked[:count])
    return Split(
        tuning=tuple(p for p in prompts if p.id not in held),
        confirmation=tuple(p for p in prompts if p.id in held),
        salt=salt,
        confirm_fraction=confirm_fraction,
    )
