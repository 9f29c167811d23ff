"""The client of a remote OpenAI-compatible server that does its own speculation, for the
Lab's remote configurations (``app.lab.remote_run``) and the window's remote chat
(``app.remote.chat``).

llama.cpp's ``llama-server`` with a draft model returns ``timings`` in every completion
(``predicted_n``, ``predicted_ms``, ``prompt_ms`` and, when it drafted, ``draft_n`` and
``draft_n_accepted``). vLLM exposes cumulative Prometheus counters at ``/metrics``
(``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
``..._num_accepted_tokens_total``, ``..._num_accepted_tokens_per_pos_total{position=}``); the
caller reads them before and after each request and keeps the difference.

A server is untrusted input: each request goes through the Hub code's watched request
(``app.models.hub_http``), so it has one total deadline, headers included, a size cap and a
cancel that cuts the connection; every value of an answer is type- and range-checked, and
what a server says (reason phrase, error text) is passed on short and on one line.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from app.files.values import MAX_COUNT, BadValue, number, whole
from app.models.hub_http import (
    HubError,
    TransferCancelled,
    TransferLimits,
    Watch,
    read_capped,
    watched_request,
)

MAX_METRICS_BYTES = 16 * 1024 * 1024
DEFAULT_DEADLINE_S = 600.0  # one whole request: the longest answer a lab run asks for
MAX_MS = 1e10  # about four months
# One request's generation speed no server reaches: a token per microsecond. Real servers
# answer one request at well under 10,000 tokens/sec; a figure above this is a lie or damage.
MAX_TOK_S = 1_000_000.0
MAX_POSITIONS = 1024  # draft positions vLLM reports acceptance for
MAX_SERVER_TEXT = 160  # characters of a reason phrase or error text passed on
VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_SAMPLE = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|NaN|[-+]?Inf))"
    r"(?:\s+-?[0-9]+)?\s*$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNPRINTABLE = re.compile(r"[^\x20-\x7e\u00a0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]+")

CancelCheck = Callable[[], bool]


def new_client() -> Any:
    """An httpx client for one request or one chat: redirects are not followed, and its TLS
    context (the system's certificates) is the one this process built first, since building
    one reads the whole CA bundle (about 50 ms, longer than a local answer)."""
    import httpx2

    return httpx2.Client(follow_redirects=False, verify=tls_context())


@cache
def tls_context() -> Any:
    """The system's certificates as one TLS context, built once per process."""
    import httpx2

    return httpx2.create_ssl_context()


class RemoteError(ValueError):
    """A server that could not be used; the message names it and says why."""


class RemoteCancelled(RemoteError):
    """The request was cut because the run was cancelled."""


def check_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is no number or out of range
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.netloc
        or plain(url, len(url) + 1) != url
        or " " in url
    ):
        raise RemoteError(f"{url!r} is not an http(s) server address")
    return url.rstrip("/")


def plain(text: str, limit: int = MAX_SERVER_TEXT) -> str:
    """What a server said, as one short line of printable text."""
    flat = _UNPRINTABLE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class _CancelFlag(threading.Event):
    """A caller's cancel is a callable; the watched request polls an Event's ``is_set``."""

    def __init__(self, check: CancelCheck) -> None:
        super().__init__()
        self._check = check

    def is_set(self) -> bool:
        return super().is_set() or self._check()


@dataclass(frozen=True)
class Budget:
    """The limits of one request: a total deadline (headers, body, everything) and a cancel."""

    deadline_s: float = DEFAULT_DEADLINE_S
    cancel: CancelCheck | None = None

    def watch(self, url: str) -> Watch:
        flag = None if self.cancel is None else _CancelFlag(self.cancel)
        # a completion sends nothing until it is done: only the total deadline applies
        limits = TransferLimits(
            stall_timeout_s=self.deadline_s, deadline_s=self.deadline_s, cancel=flag
        )
        return limits.watch(url)


@contextmanager
def answer(client: Any, url: str, body: bytes | None, budget: Budget) -> Iterator[Any]:
    """The response to one request within ``budget``, once its status says it answered;
    every failure (refused, redirected, cut, cancelled, past the deadline) is a
    ``RemoteError`` that names the server. A redirect is never followed: a conversation
    goes to the address the user named and nowhere else."""
    import httpx2

    watch = budget.watch(url)
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    try:
        with watched_request(
            client, "GET" if body is None else "POST", url, headers, watch, content=body
        ) as response:
            if 300 <= response.status_code < 400:
                where = plain(str(response.headers.get("Location", "")), 120) or "elsewhere"
                raise RemoteError(
                    f"{url} answered with a redirect (HTTP {response.status_code}) to {where}; "
                    "SpecDeck does not follow it, so nothing is sent to an address you did not "
                    "name. Use the final address instead"
                )
            if response.status_code >= 400:
                reason = plain(str(response.reason_phrase or ""), 80)
                raise RemoteError(f"{url} answered HTTP {response.status_code} {reason}".rstrip())
            encoding = str(response.headers.get("Content-Encoding", "identity")).lower()
            if encoding not in ("identity", ""):
                raise RemoteError(
                    f"{url} sent compressed data ({plain(encoding, 40)}) although none was asked"
                )
            yield _Answer(response, watch)
    except TransferCancelled as exc:
        raise RemoteCancelled(f"{url}: cancelled") from exc
    except HubError as exc:
        if watch.deadline is not None and time.monotonic() >= watch.deadline - 0.05:
            raise RemoteError(
                f"{url} did not answer within {budget.deadline_s:g} s (the whole request: "
                "headers and body); the server is too slow or stalled"
            ) from exc
        raise RemoteError(plain(str(exc))) from exc
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        raise RemoteError(
            f"{url} did not answer ({plain(str(exc) or type(exc).__name__)})"
        ) from exc


@dataclass(frozen=True)
class _Answer:
    response: Any
    watch: Watch

    def read(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (one more tells the caller it was too long)."""
        return read_capped(self.response, limit, self.watch)

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives, each chunk counted against the deadline and the cancel."""
        for chunk in self.response.iter_raw():
            self.watch.progress(len(chunk), 1)
            yield chunk
        self.watch.check()  # a connection cut at the deadline or the cancel ends quietly


def read_bytes(client: Any, url: str, body: bytes | None, budget: Budget, limit: int) -> bytes:
    """The body of one request, at most ``limit`` bytes, within ``budget``."""
    with answer(client, url, body, budget) as response:
        data = response.read(limit + 1)
    if len(data) > limit:
        raise RemoteError(f"{url} answered with more than {limit >> 20} MiB")
    return data


def read_counters(client: Any, url: str, budget: Budget) -> SpecCounters:
    text = read_bytes(client, url, None, budget, MAX_METRICS_BYTES).decode("utf-8", "replace")
    try:
        return SpecCounters.from_metrics(text)
    except BadValue as exc:
        raise RemoteError(f"{url}: {exc}") from None


# --- the one check of a server's figures ---------------------------------------------------


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:.3g}"


def check_figures(
    source: str,
    *,
    tokens: float = 0.0,
    ms: float | None = None,
    drafted: float = 0.0,
    accepted: float = 0.0,
    counts: tuple[float, ...] = (),
) -> None:
    """Refuse figures no server can have measured, wherever they come from (llama-server's
    timings, vLLM's counters, a completion's usage, what the chat measured here), so the Lab's
    runs and the chat's answers show and store only possible ones: every figure finite and not
    negative, no more tokens accepted than drafted, and no speed above ``MAX_TOK_S``.

    ``source`` names where the figures came from; ``ms`` is the time the ``tokens`` took
    (0 or None: not reported, so no speed is derived); ``counts`` are further counts (vLLM's
    per-position acceptances). Raises ``RemoteError`` naming the figure that cannot be."""
    named = [("tokens", tokens), ("drafted tokens", drafted), ("accepted tokens", accepted)]
    named += [("milliseconds", ms)] if ms is not None else []
    named += [("counts", count) for count in counts]
    for name, value in named:
        if not math.isfinite(value):
            raise RemoteError(f"{source} give {name} that are not a finite number")
        if value < 0:
            raise RemoteError(f"{source} give {_figure(value)} {name}, fewer than none")
    if accepted > drafted:
        raise RemoteError(
            f"{source} accept {_figure(accepted)} drafted tokens of {_figure(drafted)}"
        )
    if ms is not None and ms > 0 and tokens > MAX_TOK_S * ms / 1000.0:
        raise RemoteError(
            f"{source} give {_figure(tokens)} tokens in {ms:.3g} ms, faster than any model "
            f"runs (more than {MAX_TOK_S:,.0f} tokens/sec)"
        )


def check_counters(where: str, delta: SpecCounters) -> SpecCounters:
    """vLLM's counters over one request (after minus before), under ``check_figures``; a
    counter that went down says the server restarted in between."""
    if min(delta.drafts, delta.draft_tokens, delta.accepted, *delta.per_position) < 0:
        raise RemoteError(
            f"{where}: the spec-decode counters went down during the request "
            "(was the server restarted?)"
        )
    check_figures(
        f"{where}: the spec-decode counters",
        drafted=delta.draft_tokens,
        accepted=delta.accepted,
        counts=(delta.drafts, *delta.per_position),
    )
    return delta


# --- llama-server ------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerTimings:
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    draft_n: int
    draft_n_accepted: int

    @property
    def tok_s(self) -> float | None:
        """The server's generation speed; None where it gave no time (``predicted_ms`` 0 is
        "not reported" to ``check_figures``, and must not become a speed of 0)."""
        return self.predicted_n * 1000.0 / self.predicted_ms if self.predicted_ms > 0 else None

    @property
    def acceptance(self) -> float:
        return self.draft_n_accepted / self.draft_n if self.draft_n else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Every target pass yields one token of its own plus the drafts it accepted."""
        passes = self.predicted_n - self.draft_n_accepted
        return self.predicted_n / passes if passes > 0 else 0.0


def _count(data: dict[str, Any], key: str) -> int:
    return whole(data.get(key, 0), f"timings.{key}", 0, MAX_COUNT)


def _ms(data: dict[str, Any], key: str) -> float:
    return number(data.get(key, 0.0), f"timings.{key}", 0.0, MAX_MS)


def parse_timings(response: dict[str, Any]) -> ServerTimings | None:
    """llama-server's ``timings`` object of a completion; None when the server sent none."""
    timings = response.get("timings") if isinstance(response, dict) else None
    if timings is None:
        return None
    if not isinstance(timings, dict):
        raise RemoteError("the server's timings are not an object")
    try:
        parsed = ServerTimings(
            prompt_ms=_ms(timings, "prompt_ms"),
            predicted_n=_count(timings, "predicted_n"),
            predicted_ms=_ms(timings, "predicted_ms"),
            draft_n=_count(timings, "draft_n"),
            draft_n_accepted=_count(timings, "draft_n_accepted"),
        )
    except BadValue as exc:
        raise RemoteError(f"the server's {exc}") from None
    check_figures(
        "the server's timings",
        tokens=parsed.predicted_n,
        ms=parsed.predicted_ms,
        drafted=parsed.draft_n,
        accepted=parsed.draft_n_accepted,
    )
    return parsed


# --- vLLM /metrics -----------------------------------------------------------------------


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition; comments and malformed lines are skipped."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        name, labels, value = match.groups()
        try:
            samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
        except ValueError:  # "1.2.3" fits the pattern
            continue
    return samples


@dataclass(frozen=True)
class SpecCounters:
    drafts: float
    draft_tokens: float
    accepted: float
    per_position: tuple[float, ...]

    @staticmethod
    def from_metrics(text: str, *, model: str | None = None) -> SpecCounters:
        """The spec-decode counters; raises ``BadValue`` for a counter that is not a finite
        count or a position beyond ``MAX_POSITIONS``."""
        totals = {VLLM_DRAFTS: 0.0, VLLM_DRAFT_TOKENS: 0.0, VLLM_ACCEPTED: 0.0}
        positions: dict[int, float] = {}
        for name, labels, value in parse_prometheus(text):
            if model is not None and labels.get("model_name", model) != model:
                continue
            if name in totals:
                totals[name] += number(value, name, 0.0, MAX_COUNT)
            # isdecimal, not isdigit: int() refuses digits such as "²" that isdigit takes
            elif name == VLLM_PER_POSITION and labels.get("position", "").isdecimal():
                where = f'{name}{{position="{labels["position"][:12]}"}}'
                position = whole(int(labels["position"][:12]), where, 0, MAX_POSITIONS - 1)
                positions[position] = positions.get(position, 0.0) + number(
                    value, where, 0.0, MAX_COUNT
                )
        width = max(positions) + 1 if positions else 0
        return SpecCounters(
            totals[VLLM_DRAFTS],
            totals[VLLM_DRAFT_TOKENS],
            totals[VLLM_ACCEPTED],
            tuple(positions.get(i, 0.0) for i in range(width)),
        )

    def minus(self, before: SpecCounters) -> SpecCounters:
        width = max(len(self.per_position), len(before.per_position))
        mine = self.per_position + (0.0,) * (width - len(self.per_position))
        theirs = before.per_position + (0.0,) * (width - len(before.per_position))
        return SpecCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            tuple(a - b for a, b in zip(mine, theirs, strict=True)),
        )

    @property
    def acceptance(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens > 0 else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """vLLM's mean acceptance length: the bonus token plus accepted drafts per step."""
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else 1.0


def json_body(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode("utf-8")  # ASCII escapes: a lone surrogate travels too
