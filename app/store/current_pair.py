"""Where "the current pair" lives, and how version 1's two copies of it become one.

The current pair is owned by the settings (``settings.json``): ``target_path``,
``draft_path`` and ``draft_source`` are the files the window loads, and ``pair_name`` is the
saved pair they came from ("" for files chosen directly, the demo pair, or none yet). The
library (``library.json``) only stores saved pairs; it no longer marks one of them active.

Why the settings and not the library: every way of choosing a pair ends in files — a pair of
browsed files and the demo pair are not saved pairs at all, the Lab's "apply" changes only
the drafting — and the settings already hold those files and are saved whenever a pair
loads. A saved pair adds only its name (the rest of it, context size, KV cache type and
draft length, is read from the library by that name). The name is stored rather than worked
out from matching files because two saved pairs may share their files (the same models
with another context size), and only the name says which one was chosen. A name is shown
only while the library still holds that pair and its target is the current target, so a
deleted pair, or a pair saved again under the same name with other models, is never shown
for files it does not describe.

Version 1 wrote ``"active"`` into the library as well. The library's own upgrade keeps that
value, unchanged and never read as the current pair, under ``V1_ACTIVE_KEY``, so that the
settings' upgrade finds it whichever file is upgraded first. The rule, in
``adopt_v1_active_pair``: when the settings name files, they are the current pair (version 1
loaded them at start), and the library's active pair gives them its name when its target is
the same file; when the settings name no files, the library's active pair becomes the
current pair. Either way the library's active pair stays a saved pair, in the Change pair
menu. No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.config import DraftSource
from app.files.fileio import StoredFileError, read_json_object

LIBRARY_FILE = "library.json"
LIBRARY_LIMIT = 64 << 20  # bytes; thousands of models fit in a few MB
V1_ACTIVE_KEY = "v1_active"  # the library's record of what version 1 called active
MAX_PAIR_NAME = 1000  # characters; a name typed into the wizard or a rename is far shorter


@dataclass(frozen=True)
class V1ActivePair:
    """The pair a version-1 library marked active, with its files."""

    name: str
    target_path: str
    draft_path: str | None  # None: it drafted with n-grams


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (links followed); False when either cannot be
    resolved."""
    if a == b:
        return True
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def _text(value: object) -> str | None:
    if isinstance(value, str) and value and "\x00" not in value and len(value) <= 4096:
        return value
    return None


def _model_path(models: list[Any], model_id: object) -> str | None:
    for model in models:
        if isinstance(model, dict) and model.get("id") == model_id:
            return _text(model.get("path"))
    return None


def read_v1_active_pair(library_file: Path) -> V1ActivePair | None:
    """The pair version 1 marked active in ``library_file``, or None when there is none or
    the file cannot be read (the library says why when it loads it)."""
    try:
        data = read_json_object(library_file, LIBRARY_LIMIT, what="model library")
    except (FileNotFoundError, StoredFileError, OSError):
        return None
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    name = data.get("active") if version == 1 else data.get(V1_ACTIVE_KEY)
    profiles, models = data.get("profiles"), data.get("models")
    if _text(name) is None or not isinstance(profiles, list) or not isinstance(models, list):
        return None
    profile = next((p for p in profiles if isinstance(p, dict) and p.get("name") == name), None)
    if profile is None:
        return None
    target = _model_path(models, profile.get("target"))
    draft_id = profile.get("draft")
    draft = None if draft_id is None else _model_path(models, draft_id)
    if target is None or (draft_id is not None and draft is None):
        return None
    assert isinstance(name, str)
    return V1ActivePair(name, target, draft)


def adopt_v1_active_pair(document: dict[str, Any], library_file: Path) -> dict[str, Any]:
    """A version-1 settings document with ``pair_name`` added from the version-1 library
    (see the module docstring for the rule)."""
    active = read_v1_active_pair(library_file)
    target = document.get("target_path")
    has_files = isinstance(target, str) and bool(target)
    document["pair_name"] = ""
    if active is None:
        return document
    if has_files:
        assert isinstance(target, str)
        if same_file(target, active.target_path):
            document["pair_name"] = active.name
        return document
    document["target_path"] = active.target_path
    document["draft_path"] = active.draft_path or ""
    source = DraftSource.MODEL if active.draft_path else DraftSource.NGRAM
    document["draft_source"] = source.value
    document["pair_name"] = active.name
    return document
