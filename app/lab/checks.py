"""The checks of values the Lab reads from files and servers, by the names the Lab and the
server import them; they live in ``app.files.values``, below the remote-engine clients
(``app.remote``) that use them too."""

from __future__ import annotations

from app.files.values import (
    MAX_COUNT,
    BadValue,
    flag,
    kind,
    label,
    loads,
    mapping,
    number,
    optional_text,
    refuse_constant,
    text,
    unicode,
    whole,
)

__all__ = [
    "MAX_COUNT",
    "BadValue",
    "flag",
    "kind",
    "label",
    "loads",
    "mapping",
    "number",
    "optional_text",
    "refuse_constant",
    "text",
    "unicode",
    "whole",
]
