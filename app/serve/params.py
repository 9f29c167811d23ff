"""OpenAI request bodies -> typed calls, or an ``ApiError`` naming the field.

A body is a stranger's JSON, checked against the schema of its endpoint (``ChatBody``,
``CompletionBody``, declared with the checked types of ``app.files.values``) before it
reaches the engine: every value type- and range-checked. Fields the engine does not use are
ignored, as OpenAI-compatible servers do; fields that would change the answer in a way
SpecDeck cannot honour (``n`` > 1, ``echo``) are refused rather than silently dropped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import KW_ONLY, dataclass, fields, replace
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainValidator, ValidationInfo

from app.engine.config import SamplerConfig
from app.files.values import (
    BadValue,
    Flag,
    InputSchema,
    Key,
    Refusal,
    check_mapping,
    check_text,
    check_unicode,
    check_whole,
    kind,
    number_in,
    shown_path,
    text_of,
    validated,
    whole_in,
)

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_MESSAGES = 1024
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256
MAX_TOKENS = 1_000_000  # the context ends an answer long before this
MAX_SEED = 2**63 - 1
MAX_DIGITS = 1000  # far past any field's range; int() of it costs microseconds
MIN_CACHE_KEY = 16  # a shorter prompt_cache_key could be guessed: the connection is the caller
MAX_CACHE_KEY = 256
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(eq=False)
class ApiError(Exception):
    """An HTTP error with OpenAI's error body."""

    status: int
    message: str
    _: KW_ONLY
    param: str | None = None
    code: str | None = None
    kind: str = "invalid_request_error"

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class Sampling(SamplerConfig):
    """What a request may set: the sampler, the answer's length and its stop strings. The
    server's command line (or the window's settings) gives the defaults."""

    max_tokens: int = 512
    stop: tuple[str, ...] = ()

    def sampler(self) -> SamplerConfig:
        return SamplerConfig(**{f.name: getattr(self, f.name) for f in fields(SamplerConfig)})


@dataclass(frozen=True)
class Call:
    """One generation request: chat messages (role, content) or a raw prompt."""

    sampling: Sampling
    stream: bool = False
    include_usage: bool = False
    messages: tuple[tuple[str, str], ...] = ()
    prompt: str | None = None  # /v1/completions
    # who sent it: a call reuses the engine's cached prefix only when the previous prompt
    # came from the same caller; None: never. The HTTP layer names the connection unless
    # the body gives a ``prompt_cache_key`` (``cache_caller``)
    caller: str | None = None

    @property
    def chat(self) -> bool:
        return self.prompt is None


def read_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object: strict UTF-8, no NaN/Infinity, no number longer than
    ``MAX_DIGITS`` digits, bounded nesting; a bad value is named by where it is."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the body is not UTF-8 text (byte {exc.start})") from None
    found: list[_Refused] = []

    def refuse(what: str) -> _Refused:
        found.append(_Refused(what))
        return found[-1]

    def whole(digits: str) -> int | _Refused:
        if len(digits) > MAX_DIGITS:
            shown = len(digits.lstrip("-"))
            return refuse(f"a number of {shown} digits (at most {MAX_DIGITS})")
        return int(digits)

    def constant(name: str) -> _Refused:
        return refuse(f"{name}, which is not a number JSON allows")

    try:
        payload = json.loads(text, parse_int=whole, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise ApiError(
            400, f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ApiError(400, "the body is not valid JSON: it is nested too deeply") from None
    except ValueError as exc:  # any other number the interpreter will not convert
        raise ApiError(400, f"the body is not valid JSON: {str(exc)[:200]}") from None
    if found:
        where = _path_of(payload, found[0])
        raise ApiError(400, f"{where or 'the body'} is {found[0].what}", param=where)
    if not isinstance(payload, dict):
        raise ApiError(400, f"the body must be a JSON object, not {kind(payload)}")
    return payload


class _Refused:
    """Stands in the parsed body for a value that is refused, so its place can be named."""

    def __init__(self, what: str) -> None:
        self.what = what


def _path_of(payload: object, target: _Refused) -> str | None:
    """Where ``target`` sits in ``payload`` (``messages[0].content``); None: the top."""
    # each place links to its parent's: (parent place, key); only containers are visited
    stack: list[tuple[dict[str, Any] | list[Any], Any]] = []
    if isinstance(payload, dict | list):
        stack.append((payload, None))
    while stack:  # the parser bounded the nesting; each value is looked at once
        value, place = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if item is target:
                return shown_path(_keys((place, key))) or None
            if isinstance(item, dict | list):
                stack.append((item, (place, key)))
    return None


def _keys(place: Any) -> list[Key]:
    keys: list[Key] = []
    while place is not None:
        place, key = place
        keys.append(key)
    return keys[::-1]


# --- the schemas of the two bodies ---------------------------------------------------------


def _role(value: object) -> str:
    if not isinstance(value, str) or value not in ROLES:
        shown = value if isinstance(value, str) else kind(value)
        raise Refusal(f"is {shown[:40]!r}; it must be one of {', '.join(ROLES)}")
    return ROLES[value]


def _content(value: object, info: ValidationInfo) -> str:
    """Text, or a list of text parts joined; an assistant's may be null (a tool call's)."""
    if value is None and info.data.get("role") == "assistant":
        return ""
    if isinstance(value, list):
        value = "".join(_text_part(part, i) for i, part in enumerate(value))
    return check_text(value, MAX_BODY_BYTES)


def _text_part(value: object, index: int) -> str:
    try:
        part = check_mapping(value)
        if part.get("type") != "text":
            raise Refusal(": only text content is supported")
    except Refusal as refusal:
        raise Refusal(refusal.reason, (index,)) from None
    try:
        return check_text(part.get("text"), MAX_BODY_BYTES)
    except Refusal as refusal:
        raise Refusal(refusal.reason, (index, "text")) from None


class Message(InputSchema):
    role: Annotated[str, PlainValidator(_role)] = Field(None, validate_default=True)
    content: Annotated[str, PlainValidator(_content)] = Field(None, validate_default=True)


def _message_list(value: object) -> list[Any]:
    """The list before its messages are checked one by one (``Message``)."""
    if not isinstance(value, list):
        raise Refusal("must be a list of messages")
    if not value:
        raise Refusal("must hold at least one message")
    if len(value) > MAX_MESSAGES:
        raise Refusal(f"holds too many messages ({len(value)}; at most {MAX_MESSAGES})")
    return value


def _stop(value: object) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list):
        raise Refusal(f"must be text or a list of text, not {kind(value)}")
    if len(values) > MAX_STOP_STRINGS:
        raise Refusal(f"holds more than {MAX_STOP_STRINGS} strings")
    stops = []
    for i, stop in enumerate(values):
        try:
            stops.append(check_text(stop, MAX_STOP_CHARS))
        except Refusal as refusal:
            raise Refusal(refusal.reason, (i,)) from None
    return tuple(stops)


def _one_answer(value: object) -> int:
    if check_whole(value, 1, 128) != 1:
        raise Refusal("must be 1: one answer per request")
    return 1


def _unsupported(*allowed: object) -> PlainValidator:
    def check(value: object) -> object:
        if value not in allowed:
            raise Refusal("is not supported")
        return value

    return PlainValidator(check)


def _prompt(value: object) -> str:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if not isinstance(value, str):
        raise Refusal(f"must be text (or a list of one text), not {kind(value)}")
    if not value:
        raise Refusal("is empty")
    return check_unicode(value)


Tokens = Annotated[int, whole_in(1, MAX_TOKENS)]
OneAnswer = Annotated[int, PlainValidator(_one_answer)]


class StreamOptions(InputSchema):
    include_usage: Flag | None = None


class Body(InputSchema):
    """What both endpoints take; null means the server's default."""

    n: OneAnswer | None = None
    temperature: Annotated[float, number_in(0, 2)] | None = None
    top_p: Annotated[float, number_in(0, 1)] | None = None
    top_k: Annotated[int, whole_in(-1, MAX_TOKENS)] | None = None
    min_p: Annotated[float, number_in(0, 1)] | None = None
    seed: Annotated[int, whole_in(-1, MAX_SEED)] | None = None  # -1: a fresh seed
    stop: Annotated[tuple[str, ...], PlainValidator(_stop)] | None = None
    max_tokens: Tokens | None = None
    prompt_cache_key: Annotated[str, text_of(MAX_CACHE_KEY)] | None = None
    stream: Flag | None = None
    stream_options: StreamOptions | None = None


class ChatBody(Body):
    """``/v1/chat/completions``."""

    messages: Annotated[tuple[Message, ...], BeforeValidator(_message_list)] = Field(
        None, validate_default=True
    )
    max_completion_tokens: Tokens | None = None  # the newer name of max_tokens, first if both


class CompletionBody(Body):
    """``/v1/completions``."""

    prompt: Annotated[str, PlainValidator(_prompt)] = Field(None, validate_default=True)
    echo: Annotated[object, _unsupported(None, False)] = None
    suffix: Annotated[object, _unsupported(None, "")] = None
    best_of: OneAnswer | None = None


def _body(schema: type[Body], payload: dict[str, Any]) -> Any:
    """``payload`` checked by ``schema``; a fault as a 400 naming the field."""
    try:
        return validated(schema, payload, "the body")
    except BadValue as exc:
        raise ApiError(400, str(exc), param=_param(exc.at)) from None


def _param(at: tuple[Key, ...]) -> str | None:
    """The field a fault is reported under: the message, or its content part, for a fault
    inside one; the top-level field otherwise."""
    if at[:1] == ("messages",):
        return shown_path(at[:2] if len(at) <= 3 else at[:4])
    return shown_path(at[:1]) or None


def chat_call(payload: dict[str, Any], defaults: Sampling) -> Call:
    body: ChatBody = _body(ChatBody, payload)
    messages = tuple((m.role, m.content) for m in body.messages)
    limit = body.max_tokens if body.max_completion_tokens is None else body.max_completion_tokens
    return _call(body, defaults, limit, messages=messages)


def completion_call(payload: dict[str, Any], defaults: Sampling) -> Call:
    body: CompletionBody = _body(CompletionBody, payload)
    return _call(body, defaults, body.max_tokens, prompt=body.prompt)


def _call(
    body: Body,
    defaults: Sampling,
    max_tokens: int | None,
    *,
    messages: tuple[tuple[str, str], ...] = (),
    prompt: str | None = None,
) -> Call:
    def given(value: Any, default: Any) -> Any:
        return default if value is None else value

    seed = given(body.seed, defaults.seed)
    sampling = replace(
        defaults,
        temperature=given(body.temperature, defaults.temperature),
        top_p=given(body.top_p, defaults.top_p),
        top_k=given(body.top_k, defaults.top_k),
        min_p=given(body.min_p, defaults.min_p),
        max_tokens=given(max_tokens, defaults.max_tokens),
        seed=None if seed == -1 else seed,  # -1: a fresh seed, as llama-server reads it
        stop=given(body.stop, defaults.stop),
    )
    options = body.stream_options
    include_usage = bool(options and options.include_usage)
    caller = cache_caller(body.prompt_cache_key)
    return Call(sampling, bool(body.stream), include_usage, messages, prompt, caller)


def cache_caller(key: str | None) -> str | None:
    """OpenAI's ``prompt_cache_key`` as the caller: requests that send the same key share
    the engine's cached prefix whatever their connection. A key is a secret among them;
    one under ``MIN_CACHE_KEY`` characters is too easily guessed and is not used."""
    if key is None or len(key) < MIN_CACHE_KEY:
        return None
    return "key " + hashlib.sha256(key.encode("utf-8")).hexdigest()
