"""Type and range checks for values read from files and servers: the Lab's files, remote
servers' answers, request bodies.

JSON gives any type anywhere (``true`` for a count, ``[1]`` for a number, ``Infinity`` for
a time), and ``int()``/``float()`` turn those into TypeError, OverflowError or silently
wrong numbers. Each check here either returns the value in the wanted type or raises
``BadValue`` naming what was wrong; the caller adds where it came from.
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

MAX_COUNT = 10**12  # tokens, drafts: far above any real run, far below any overflow


class BadValue(ValueError):
    """A value of the wrong type or out of range; the message names it."""


def whole(value: object, what: str, low: int, high: int) -> int:
    """A whole number in [low, high]; an integral float (``40.0``) counts as whole."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadValue(f"{what} is not a whole number (it is {kind(value)})")
    if not low <= value <= high:
        raise BadValue(f"{what} is {_shown(value)}, outside {low}..{high}")
    return value


def number(value: object, what: str, low: float = -math.inf, high: float = math.inf) -> float:
    """A finite number in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadValue(f"{what} is not a number (it is {kind(value)})")
    result = float(value) if abs(value) < 1e308 else math.inf
    if not math.isfinite(result):
        raise BadValue(f"{what} is not a finite number")
    if not low <= result <= high:
        raise BadValue(f"{what} is {result:g}, outside {low:g}..{high:g}")
    return result


def flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise BadValue(f"{what} is not true or false (it is {kind(value)})")
    return value


def text(value: object, what: str, max_chars: int) -> str:
    if not isinstance(value, str):
        raise BadValue(f"{what} is not text (it is {kind(value)})")
    if len(value) > max_chars:
        raise BadValue(f"{what} is longer than {max_chars} characters")
    return unicode(value, what)


def label(value: object, what: str, max_chars: int) -> str:
    """``text`` that is shown as a name (a category, a prompt id): one line, no control
    characters (a terminal obeys escape sequences in what the CLI prints)."""
    checked = text(value, what, max_chars)
    if any(unicodedata.category(ch) == "Cc" for ch in checked):
        raise BadValue(f"{what} holds control characters")
    return checked


def unicode(value: str, what: str) -> str:
    """JSON's "\\ud800" escapes make lone surrogates, which are not text: no tokenizer takes
    them and no UTF-8 file can hold them, so they are refused where they are read."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadValue(
            f"{what} holds a lone surrogate (U+{ord(value[exc.start]):04X} at character "
            f"{exc.start}), which is not text; fix or remove that escape"
        ) from None
    return value


def optional_text(value: object, what: str, max_chars: int) -> str | None:
    return None if value is None else text(value, what, max_chars)


def mapping(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadValue(f"{what} is not an object (it is {kind(value)})")
    return value


def _shown(value: int) -> str:
    if -(10**20) < value < 10**20:
        return str(value)
    return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"


def kind(value: object) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "null"
    names = {bool: "true/false", int: "a number", float: "a number", str: "text"}
    names |= {list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def refuse_constant(name: str) -> float:
    """``json.loads(..., parse_constant=refuse_constant)``: SpecDeck never writes NaN or
    Infinity, so one in a file or an answer is damage, refused where it is read."""
    raise BadValue(f"{name} is not a number JSON allows")


def loads(data: str | bytes) -> Any:
    """``json.loads`` that refuses NaN/Infinity and turns nesting too deep for the parser
    into ``BadValue`` (the parser itself raises RecursionError)."""
    try:
        return json.loads(data, parse_constant=refuse_constant)
    except RecursionError:
        raise BadValue("the JSON is nested too deeply to be read") from None
