"""Values read from outside (files, servers, request bodies): their checked types, and the
schemas declared with them.

JSON gives any type anywhere (``true`` for a count, ``[1]`` for a number, ``Infinity`` for
a time), and ``int()``/``float()`` turn those into TypeError, OverflowError or silently
wrong numbers. Each check here returns the value in the wanted type or says what is wrong
with it. A schema is a pydantic model whose fields use the types below (``Flag``,
``whole_in(0, 9)``, ``text_of(64)``...): ``validated`` checks a whole document against it
and names the first fault by where it is (``runs.ng.tokens is not a whole number``).
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError
from pydantic_core import ErrorDetails

MAX_COUNT = 10**12  # tokens, drafts: far above any real run, far below any overflow
MAX_KEY_CHARS = 80  # a key shown in a path (a configuration, a prompt id) is cut here

Key = str | int
SchemaT = TypeVar("SchemaT", bound=BaseModel)
Choice = TypeVar("Choice", bound=Enum)


class BadValue(ValueError):
    """A value of the wrong type or out of range; the message names it. ``at``: where it
    sits in the document it came in (keys and list positions), when a schema found it."""

    def __init__(self, message: str, at: tuple[Key, ...] = ()) -> None:
        super().__init__(message)
        self.at = at


class Refusal(ValueError):
    """What is wrong with a value, without naming it: whoever knows where the value came
    from adds that (``BadValue``). ``at``: keys below the value where the fault sits."""

    def __init__(self, reason: str, at: tuple[Key, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.at = at

    def said(self, what: str) -> str:
        """The reason about ``what``: "top_k is not a whole number", "stop: ..."."""
        joined = " " if self.reason[:1].isalnum() else ""
        return f"{what}{joined}{self.reason}"


# --- the checks: each returns the value in its type or raises ``Refusal`` ----------------


def kind(value: object) -> str:
    """What a JSON value is, in words."""
    if value is None:
        return "null"
    names = {bool: "true/false", int: "a number", float: "a number", str: "text"}
    names |= {list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _shown(value: int) -> str:
    if -(10**20) < value < 10**20:
        return str(value)
    return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"


def check_whole(value: object, low: int, high: int) -> int:
    """A whole number in [low, high]; an integral float (``40.0``) counts as whole."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refusal(f"is not a whole number (it is {kind(value)})")
    if not low <= value <= high:
        raise Refusal(f"is {_shown(value)}, outside {low}..{high}")
    return value


def check_number(value: object, low: float = -math.inf, high: float = math.inf) -> float:
    """A finite number in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refusal(f"is not a number (it is {kind(value)})")
    result = float(value) if abs(value) < 1e308 else math.inf
    if not math.isfinite(result):
        raise Refusal("is not a finite number")
    if not low <= result <= high:
        raise Refusal(f"is {result:g}, outside {low:g}..{high:g}")
    return result


def check_flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise Refusal(f"is not true or false (it is {kind(value)})")
    return value


def check_unicode(value: str) -> str:
    """JSON's "\\ud800" escapes make lone surrogates, which are not text: no tokenizer takes
    them and no UTF-8 file can hold them, so they are refused where they are read."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Refusal(
            f"holds a lone surrogate (U+{ord(value[exc.start]):04X} at character "
            f"{exc.start}), which is not text; fix or remove that escape"
        ) from None
    return value


def check_text(value: object, max_chars: int) -> str:
    if not isinstance(value, str):
        raise Refusal(f"is not text (it is {kind(value)})")
    if len(value) > max_chars:
        raise Refusal(f"is longer than {max_chars} characters")
    return check_unicode(value)


def check_label(value: object, max_chars: int) -> str:
    """Text that is shown as a name (a category, a prompt id): one line, no control
    characters (a terminal obeys escape sequences in what the CLI prints)."""
    checked = check_text(value, max_chars)
    if any(unicodedata.category(ch) == "Cc" for ch in checked):
        raise Refusal("holds control characters")
    return checked


def check_mapping(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Refusal(f"is not an object (it is {kind(value)})")
    return value


# --- the same checks naming the value, for code that reads values one by one -------------


def named(what: str, check: Callable[..., Any], *args: Any) -> Any:
    """``check(*args)``, a refusal as ``BadValue`` about ``what``."""
    try:
        return check(*args)
    except Refusal as refusal:
        raise BadValue(refusal.said(what)) from None


def whole(value: object, what: str, low: int, high: int) -> int:
    return int(named(what, check_whole, value, low, high))


def number(value: object, what: str, low: float = -math.inf, high: float = math.inf) -> float:
    return float(named(what, check_number, value, low, high))


def label(value: object, what: str, max_chars: int) -> str:
    return str(named(what, check_label, value, max_chars))


def unicode(value: str, what: str) -> str:
    return str(named(what, check_unicode, value))


# --- the types schemas declare their fields with -------------------------------------------


def whole_in(low: int, high: int) -> PlainValidator:
    return PlainValidator(lambda value: check_whole(value, low, high))


def number_in(low: float = -math.inf, high: float = math.inf) -> PlainValidator:
    return PlainValidator(lambda value: check_number(value, low, high))


def text_of(max_chars: int) -> PlainValidator:
    return PlainValidator(lambda value: check_text(value, max_chars))


def label_of(max_chars: int) -> PlainValidator:
    return PlainValidator(lambda value: check_label(value, max_chars))


def one_of(choices: Sequence[str]) -> PlainValidator:
    """Text that is one of ``choices``."""
    return PlainValidator(lambda value: _chosen(value, choices))


def member_of(choices: type[Choice]) -> PlainValidator:
    """The member of an enumeration of text whose value the text is."""
    values = tuple(member.value for member in choices)
    return PlainValidator(lambda value: choices(_chosen(value, values)))


def _chosen(value: object, choices: Sequence[str]) -> str:
    if check_text(value, 1000) not in choices:
        raise Refusal(f"is {str(value)[:80]!r}, not one of {', '.join(choices)}")
    return str(value)


Flag = Annotated[bool, PlainValidator(check_flag)]
Finite = Annotated[float, number_in()]
Count = Annotated[int, whole_in(0, MAX_COUNT)]
Wide = Annotated[int, whole_in(-(2**63), 2**63)]  # a whole number the dataclass then ranges
Mapping = Annotated[dict[str, Any], PlainValidator(check_mapping)]
# Fields that may be left out (None: not given, the reader's default applies) but are never
# null when given: the check sees the null and refuses it.
GivenFinite = Annotated[float | None, number_in()]
GivenWide = Annotated[int | None, whole_in(-(2**63), 2**63)]
GivenCount = Annotated[int | None, whole_in(0, MAX_COUNT)]
GivenFlag = Annotated[bool | None, PlainValidator(check_flag)]


class InputSchema(BaseModel):
    """A schema for what comes from outside: keys it does not declare are ignored (the
    readers never look at them), declared ones are checked by their types above."""

    model_config = ConfigDict(extra="ignore", frozen=True)


def validated(schema: type[SchemaT], data: object, what: str = "the value") -> SchemaT:
    """``data`` checked against ``schema``; raises ``BadValue`` naming the first fault by
    its place (``what`` is the document itself)."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        if errors[0]["type"] == "missing":  # all the missing keys at once
            missing = [e["loc"] for e in errors if e["type"] == "missing"]
            names = ", ".join(shown_path(loc) or what for loc in missing)
            raise BadValue(f"{names} missing", tuple(missing[0])) from None
        raise _fault(errors[0], what) from None


def _fault(error: ErrorDetails, what: str) -> BadValue:
    at = tuple(error["loc"])
    refusal = error.get("ctx", {}).get("error")
    if at[-1:] == ("[key]",):  # a dictionary's key: (..., the key, "[key]")
        at = at[:-2]
        shown = f"a name in {shown_path(at) or what}"
    else:
        if isinstance(refusal, Refusal):
            at += refusal.at
        shown = shown_path(at) or what
    if isinstance(refusal, Refusal):
        return BadValue(refusal.said(shown), at)
    if error["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return BadValue(f"{shown} is not an object (it is {kind(error['input'])})", at)
    if error["type"] == "list_type":
        return BadValue(f"{shown} is not a list (it is {kind(error['input'])})", at)
    return BadValue(f"{shown}: {error['msg']}", at)


def quoted(value: object, limit: int = 40) -> str:
    """A value from outside as a message quotes it: its JSON where it has one, else its
    repr, cut to ``limit`` characters (a refused value may be a megabyte of text)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_path(keys: Sequence[Key]) -> str:
    """Where a value sits, as a person reads it: ``messages[0].content``; "" for the top."""
    shown = ""
    for key in keys:
        if isinstance(key, int):
            shown += f"[{key}]"
        else:
            shown += f".{key[:MAX_KEY_CHARS]}" if shown else key[:MAX_KEY_CHARS]
    return shown


# --- JSON as read from outside --------------------------------------------------------------


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
