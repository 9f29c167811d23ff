"""OpenAI request bodies -> typed calls, or an ``ApiError`` naming the field.

A body is a stranger's JSON: every value is type- and range-checked here (through
``app.lab.checks``, the checks the Lab uses on what servers send it) before it reaches the
engine. Fields the engine does not use are ignored, as OpenAI-compatible servers do; fields
that would change the answer in a way SpecDeck cannot honour (``n`` > 1, ``echo``) are
refused rather than silently dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app.engine.config import SamplerConfig
from app.lab import checks
from app.lab.checks import BadValue

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


class ApiError(Exception):
    """An HTTP error with OpenAI's error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind

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
class Sampling:
    """What a request may set; the server's command line gives the defaults."""

    temperature: float = SamplerConfig.temperature
    top_p: float = SamplerConfig.top_p
    top_k: int = SamplerConfig.top_k
    min_p: float = SamplerConfig.min_p
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def sampler(self) -> SamplerConfig:
        return SamplerConfig(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
            seed=self.seed,
        )


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
        raise ApiError(400, f"the body must be a JSON object, not {checks.kind(payload)}")
    return payload


class _Refused:
    """Stands in the parsed body for a value that is refused, so its place can be named."""

    def __init__(self, what: str) -> None:
        self.what = what


def _path_of(payload: object, target: _Refused) -> str | None:
    """Where ``target`` sits in ``payload`` (``messages[0].content``); None: the top."""
    if payload is target:
        return None
    # each place links to its parent's: (parent place, key); only containers are visited
    stack: list[tuple[dict[str, Any] | list[Any], Any]] = []
    if isinstance(payload, dict | list):
        stack.append((payload, None))
    while stack:  # the parser bounded the nesting; each value is looked at once
        value, place = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if item is target:
                return _shown_place((place, key))
            if isinstance(item, dict | list):
                stack.append((item, (place, key)))
    return None


def _shown_place(place: Any) -> str | None:
    keys: list[str | int] = []
    while place is not None:
        place, key = place
        keys.append(key)
    shown = ""
    for key in reversed(keys):
        shown += f"[{key}]" if isinstance(key, int) else (f".{key}" if shown else key)
    return shown or None


def chat_call(payload: dict[str, Any], defaults: Sampling) -> Call:
    raw = payload.get("messages")
    if not isinstance(raw, list):
        raise ApiError(400, "messages must be a list of messages", param="messages")
    if not raw:
        raise ApiError(400, "messages must hold at least one message", param="messages")
    if len(raw) > MAX_MESSAGES:
        raise ApiError(
            400, f"too many messages ({len(raw)}; at most {MAX_MESSAGES})", param="messages"
        )
    messages = tuple(_message(m, f"messages[{i}]") for i, m in enumerate(raw))
    limit = payload.get("max_completion_tokens")
    name = "max_completion_tokens"
    if limit is None:
        limit, name = payload.get("max_tokens"), "max_tokens"
    return _call(payload, defaults, messages=messages, max_tokens=(name, limit))


def completion_call(payload: dict[str, Any], defaults: Sampling) -> Call:
    prompt = payload.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(
            400,
            f"prompt must be text (or a list of one text), not {checks.kind(prompt)}",
            param="prompt",
        )
    if not prompt:
        raise ApiError(400, "prompt is empty", param="prompt")
    _check("prompt", checks.unicode, prompt, "prompt")
    if payload.get("echo") not in (None, False):
        raise ApiError(400, "echo is not supported", param="echo")
    if payload.get("suffix") not in (None, ""):
        raise ApiError(400, "suffix is not supported", param="suffix")
    _single(payload, "best_of")
    return _call(
        payload, defaults, prompt=prompt, max_tokens=("max_tokens", payload.get("max_tokens"))
    )


def _call(
    payload: dict[str, Any],
    defaults: Sampling,
    *,
    max_tokens: tuple[str, Any],
    messages: tuple[tuple[str, str], ...] = (),
    prompt: str | None = None,
) -> Call:
    _single(payload, "n")
    sampling = replace(
        defaults,
        temperature=_optional(payload, "temperature", defaults.temperature, checks.number, 0, 2),
        top_p=_optional(payload, "top_p", defaults.top_p, checks.number, 0, 1),
        top_k=_optional(payload, "top_k", defaults.top_k, checks.whole, -1, MAX_TOKENS),
        min_p=_optional(payload, "min_p", defaults.min_p, checks.number, 0, 1),
        seed=_seed(payload.get("seed"), defaults.seed),
        stop=_stop(payload.get("stop"), defaults.stop),
    )
    name, limit = max_tokens
    if limit is not None:
        sampling = replace(
            sampling, max_tokens=_check(name, checks.whole, limit, name, 1, MAX_TOKENS)
        )
    caller = cache_caller(payload.get("prompt_cache_key"))
    stream = _optional(payload, "stream", False, _flag)
    options = payload.get("stream_options")
    include_usage = False
    if options is not None:
        options = _check("stream_options", checks.mapping, options, "stream_options")
        include_usage = _optional(options, "include_usage", False, _flag, param="stream_options")
    return Call(sampling, stream, include_usage, messages, prompt, caller)


def cache_caller(raw: object) -> str | None:
    """OpenAI's ``prompt_cache_key`` as the caller: requests that send the same key share
    the engine's cached prefix whatever their connection. A key is a secret among them;
    one under ``MIN_CACHE_KEY`` characters is too easily guessed and is not used."""
    if raw is None:
        return None
    key = _check("prompt_cache_key", checks.text, raw, "prompt_cache_key", MAX_CACHE_KEY)
    if len(key) < MIN_CACHE_KEY:
        return None
    return "key " + hashlib.sha256(key.encode("utf-8")).hexdigest()


def _message(raw: object, where: str) -> tuple[str, str]:
    message = _check(where, checks.mapping, raw, where)
    role = message.get("role")
    if role not in ROLES:
        allowed = ", ".join(ROLES)
        shown = role if isinstance(role, str) else checks.kind(role)
        raise ApiError(
            400, f"{where}.role is {str(shown)[:40]!r}; it must be one of {allowed}", param=where
        )
    content = message.get("content")
    if content is None and role == "assistant":
        content = ""
    if isinstance(content, list):
        content = "".join(
            _text_part(part, f"{where}.content[{i}]") for i, part in enumerate(content)
        )
    text = _check(where, checks.text, content, f"{where}.content", MAX_BODY_BYTES)
    return ROLES[role], text


def _text_part(raw: object, where: str) -> str:
    part = _check(where, checks.mapping, raw, where)
    if part.get("type") != "text":
        raise ApiError(400, f"{where}: only text content is supported", param=where)
    return _check(where, checks.text, part.get("text"), f"{where}.text", MAX_BODY_BYTES)


def _stop(raw: object, default: tuple[str, ...]) -> tuple[str, ...]:
    if raw is None:
        return default
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list):
        raise ApiError(
            400, f"stop must be text or a list of text, not {checks.kind(raw)}", param="stop"
        )
    if len(values) > MAX_STOP_STRINGS:
        raise ApiError(400, f"stop holds more than {MAX_STOP_STRINGS} strings", param="stop")
    return tuple(
        _check("stop", checks.text, v, f"stop[{i}]", MAX_STOP_CHARS) for i, v in enumerate(values)
    )


def _seed(raw: object, default: int | None) -> int | None:
    if raw is None:
        return default
    seed = _check("seed", checks.whole, raw, "seed", -1, MAX_SEED)
    return None if seed == -1 else seed  # -1: a fresh seed, as llama-server reads it


def _single(payload: dict[str, Any], name: str) -> None:
    value = payload.get(name)
    if value is not None and _check(name, checks.whole, value, name, 1, 128) != 1:
        raise ApiError(400, f"{name} must be 1: one answer per request", param=name)


def _flag(value: object, what: str) -> bool:
    return checks.flag(value, what)


def _optional(
    payload: dict[str, Any],
    name: str,
    default: Any,
    check: Callable[..., Any],
    *bounds: Any,
    param: str = "",
) -> Any:
    value = payload.get(name)
    if value is None:
        return default
    return _check(param or name, check, value, name, *bounds)


def _check(param: str, check: Callable[..., Any], *args: Any) -> Any:
    """``check(*args)``, its ``BadValue`` as a 400 naming ``param``."""
    try:
        return check(*args)
    except BadValue as exc:
        raise ApiError(400, str(exc), param=param) from None
