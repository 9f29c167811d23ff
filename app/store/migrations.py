"""Schema versions of the stored JSON files and the steps that upgrade old ones.

Modelled on napari's ``settings/_migrations.py``: each store has an ordered list of migrator
functions, the one at index ``i`` turning a version ``i + 1`` document into version
``i + 2``; loading applies, in order, every step from the file's version to the current one.
A file written before versions were recorded is version 1. Steps work on a deep copy, so a
step that fails leaves what was read untouched, and the caller keeps the file on disk; a
file already at the current version is not copied (a 60 MB conversation took seconds).
No Qt here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.files.values import quoted

Document = dict[str, Any]
Migrator = Callable[[Document], Document]


class MigrationError(ValueError):
    """A stored version that cannot be read, or a step that failed."""


@dataclass(frozen=True)
class Schema:
    kind: str  # what the file is, for messages: "settings", "conversation", …
    current: int
    steps: tuple[Migrator, ...] = ()  # steps[i]: version i + 1 -> i + 2
    key: str = "version"

    def __post_init__(self) -> None:
        if self.current < 1 or len(self.steps) != self.current - 1:
            raise ValueError(
                f"{self.kind}: version {self.current} needs "
                f"{self.current - 1} migration steps, got {len(self.steps)}"
            )


@dataclass(frozen=True)
class Upgraded:
    data: Document
    found: int  # the version the file carried (1 when it carried none)
    newer: bool  # written by a newer SpecDeck: ``data`` is as read, not understood in full


# A format version no SpecDeck will reach: beyond it the number is damage, not the future (a
# 4,000-digit "version" was quoted whole, and the copy named after it could not be written,
# so the next save replaced the file with no copy kept).
MAX_FORMAT_VERSION = 1_000_000


def stored_version(data: Document, schema: Schema) -> int:
    version = data.get(schema.key, 1)
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or not 1 <= version <= MAX_FORMAT_VERSION
    ):
        raise MigrationError(f"its {schema.key} {quoted(version)} is not a format version")
    return version


def upgrade(data: Document, schema: Schema) -> Upgraded:
    """``data`` brought to ``schema.current``; raises ``MigrationError`` naming the step."""
    found = stored_version(data, schema)
    if found > schema.current:
        return Upgraded(data, found, newer=True)
    if found == schema.current:
        return Upgraded({**data, schema.key: schema.current}, found, newer=False)
    document = copy.deepcopy(data)
    for version in range(found, schema.current):
        step = schema.steps[version - 1]
        try:
            document = step(document)
        except Exception as exc:  # noqa: BLE001 - any failure of a step is reported the same
            raise MigrationError(
                f"upgrading its format from version {version} to {version + 1} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(document, dict):
            raise MigrationError(f"upgrading from version {version} gave no document")
    document[schema.key] = schema.current
    return Upgraded(document, found, newer=False)
