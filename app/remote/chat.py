"""The chat against a remote server: llama-server, vLLM or SGLang on their OpenAI-compatible
``/v1/chat/completions``, streamed (server-sent events).

The answer arrives as ``TextTail`` pieces, the engine's event for text that carries no token
kind: no remote server here says which of its tokens were drafted, so none is coloured as
drafted or as the target's own. The figures are the server's own, never estimated:
llama-server's ``timings`` (its last chunk carries ``draft_n`` / ``draft_n_accepted``) or,
for vLLM, the difference of its ``/metrics`` spec-decode counters around the request. A server
that reports neither is shown as such. A speed-up is claimed only against a baseline the
user named (a second server without speculation): the vendored llama-server compiles its
per-request ``speculative.*`` fields out (``server-schema.cpp``), so speculation cannot be
turned off for one request there.

Every read is bounded like the Lab's (``app.remote.client``): one total deadline for the whole
request, a cap on the bytes, on one event line and on the events, type checks on every value,
a cancel that cuts the connection, and no redirect followed. Every figure passes the Lab's
``check_figures`` (finite, not negative, no more accepted than drafted, no impossible speed),
so the chat shows and stores only figures a server can have measured.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.events import TextTail
from app.engine.figures import speed_text
from app.files.values import BadValue, loads, unicode
from app.files.values import kind as kind_of
from app.remote.client import (
    Budget,
    CancelCheck,
    RemoteError,
    ServerTimings,
    SpecCounters,
    answer,
    check_counters,
    check_figures,
    check_url,
    json_body,
    new_client,
    parse_timings,
    plain,
    read_bytes,
    read_counters,
)

MAX_STREAM_BYTES = 16 * 1024 * 1024  # a whole streamed answer
MAX_EVENT_BYTES = 256 * 1024  # one ``data:`` line
MAX_EVENTS = 200_000
MAX_ANSWER_CHARS = 4 * 1024 * 1024
DEFAULT_CHAT_DEADLINE_S = 300.0
KINDS = ("llama-server", "vllm", "openai")
NOT_REPORTED = "the server does not report which tokens were drafted, so no token is coloured"


@dataclass(frozen=True)
class RemotePair:
    """A server the chat streams from, and optionally a second one without speculation
    (the same model) that the user named as the baseline."""

    url: str
    server: str = "llama-server"  # "llama-server" (timings) | "vllm" (/metrics) | "openai"
    baseline_url: str | None = None

    @staticmethod
    def checked(url: str, server: str, baseline_url: str = "") -> RemotePair:
        """A pair from what a person typed; raises ``RemoteError`` saying what is wrong."""
        if server not in KINDS:
            raise RemoteError(f"unknown server kind {server!r} (one of {', '.join(KINDS)})")
        base = check_url(url.strip())
        baseline = check_url(baseline_url.strip()) if baseline_url.strip() else None
        if baseline == base:
            raise RemoteError("the baseline must be a second server, not the same address")
        return RemotePair(base, server, baseline)


def check_server(url: str, deadline_s: float = 10.0, cancel: CancelCheck | None = None) -> None:
    """Raise ``RemoteError`` unless ``url`` answers ``GET /v1/models`` with a JSON object."""
    with new_client() as client:
        data = read_bytes(client, f"{url}/v1/models", None, Budget(deadline_s, cancel), 1 << 20)
    try:
        value = loads(data.decode("utf-8"))
    except (ValueError, BadValue) as exc:
        raise RemoteError(f"{url}/v1/models is not JSON ({plain(str(exc))})") from None
    if not isinstance(value, dict):
        raise RemoteError(f"{url}/v1/models is not an OpenAI model list")


@dataclass(frozen=True)
class RemoteAnswer:
    """One streamed answer and the figures the server itself gave for it."""

    url: str
    text: str
    chunks: int  # content pieces received
    wall_s: float
    first_piece_ms: float  # measured here: request sent to the first piece of text
    finish_reason: str
    timings: ServerTimings | None  # llama-server's, as sent
    counters: SpecCounters | None  # vLLM's /metrics difference around the request

    @property
    def drafted(self) -> int | None:
        if self.timings is not None:
            return self.timings.draft_n
        return int(self.counters.draft_tokens) if self.counters is not None else None

    @property
    def accepted(self) -> int | None:
        if self.timings is not None:
            return self.timings.draft_n_accepted
        return int(self.counters.accepted) if self.counters is not None else None

    @property
    def tok_s(self) -> float | None:
        """The server's own generation speed (llama-server's timings); None when unknown."""
        return self.timings.tok_s if self.timings is not None else None

    def figures(self) -> str:
        """What the server said about its speculation, in words; never more than it said."""
        if self.timings is not None:
            t = self.timings
            source = "llama-server's timings"
            speed = f", {t.predicted_n} tokens" + (
                f" at {speed_text(t.tok_s)}" if t.tok_s is not None else " (no time reported)"
            )
            if t.draft_n == 0:
                return f"no drafting reported ({source}){speed}"
            return (
                f"drafted {t.draft_n}, accepted {t.draft_n_accepted} ({t.acceptance:.0%}), "
                f"{t.tokens_per_pass:.2f} tokens per pass ({source}){speed}"
            )
        if self.counters is not None:
            c = self.counters
            if c.draft_tokens <= 0:
                return "no drafting reported (vLLM /metrics)"
            return (
                f"drafted {int(c.draft_tokens)}, accepted {int(c.accepted)} "
                f"({c.acceptance:.0%}), {c.tokens_per_pass:.2f} tokens per pass "
                "(vLLM /metrics counters, the whole server during this request)"
            )
        return "the server reports no speculative figures"


def speedup(spec: RemoteAnswer, base: RemoteAnswer) -> float | None:
    """Speculative tok/s over baseline tok/s, both from the servers' own timings, or None
    when either server gave none (then no speed-up is claimed)."""
    if spec.tok_s is None or base.tok_s is None or base.tok_s <= 0:
        return None
    return spec.tok_s / base.tok_s


def describe(
    spec: RemoteAnswer, base: RemoteAnswer | None = None, *, baseline_pending: bool = False
) -> str:
    """The chat's line about a remote answer: the server's figures, what it does not report,
    and a speed-up only against the baseline server the user named (``baseline_pending``:
    that server has not answered yet)."""
    text = f"{spec.url}: {spec.figures()}. Token colours: {NOT_REPORTED}."
    if base is None:
        if baseline_pending:
            return text + " The baseline server is still answering; the speed-up follows."
        return text + " No speed-up is claimed without a baseline server."
    ratio = speedup(spec, base)
    text += f" Baseline {base.url}: {base.figures()}."
    if ratio is None:
        return text + " No speed-up is claimed: a server gave no timings."
    both = f"{speed_text(spec.tok_s or 0.0)} vs {speed_text(base.tok_s or 0.0)}"
    if spec.drafted == 0:  # the local verdict's rule (exactness.speed_text): no draft, no gain
        return (
            text + f" Nothing was drafted, so both servers answered target-only ({both}): "
            "the difference is noise, not a speed-up."
        )
    return text + f" Speed-up {ratio:.2f}× (the two servers' own tok/s)."


def stream_chat(
    url: str,
    messages: Sequence[dict[str, str]],
    *,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    server: str = "llama-server",
    model: str | None = None,
    deadline_s: float = DEFAULT_CHAT_DEADLINE_S,
    cancel: CancelCheck | None = None,
) -> Iterator[TextTail | RemoteAnswer]:
    """Stream one answer: ``TextTail`` pieces as they arrive, then one ``RemoteAnswer``.

    Raises ``RemoteError`` (``RemoteCancelled`` for a cancel) naming the server and what was
    wrong; ``deadline_s`` bounds the whole request, connecting and every byte included.
    """
    if server not in KINDS:
        raise RemoteError(f"unknown server kind {server!r} (one of {', '.join(KINDS)})")
    base = check_url(url)
    budget = Budget(deadline_s, cancel)
    body: dict[str, Any] = {
        "messages": list(messages),
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
    }
    if seed is not None:
        body["seed"] = seed
    if model:
        body["model"] = model
    if server == "vllm":
        body["stream_options"] = {"include_usage": True}
    endpoint = f"{base}/v1/chat/completions"
    with new_client() as client:
        before = read_counters(client, f"{base}/metrics", budget) if server == "vllm" else None
        began = time.perf_counter()
        first_ms = 0.0
        pieces: list[str] = []
        size = 0
        finish = ""
        timings: ServerTimings | None = None
        done = False
        with answer(client, endpoint, json_body(body), budget) as response:
            for event in _events(endpoint, response.chunks()):
                if event is None:  # [DONE]
                    done = True
                    break
                piece, reason, found = _chunk(endpoint, event)
                timings = found or timings
                finish = reason or finish
                if piece:
                    size += len(piece)
                    if size > MAX_ANSWER_CHARS:
                        raise RemoteError(
                            f"{endpoint} sent an answer of more than "
                            f"{MAX_ANSWER_CHARS >> 20} M characters"
                        )
                    if not pieces:
                        first_ms = (time.perf_counter() - began) * 1000.0
                    pieces.append(piece)
                    yield TextTail(piece)
        wall_s = time.perf_counter() - began
        if not done and not finish:
            raise RemoteError(
                f"{endpoint} ended the stream before the answer was finished (no finish "
                "reason, no [DONE]); the server may have stopped"
            )
        counters = None
        if before is not None:
            after = read_counters(client, f"{base}/metrics", budget)
            counters = check_counters(f"{base}/metrics", after.minus(before))
    if timings is None:  # the speed is then measured here: the pieces over the wall time
        check_figures(f"{endpoint}: the stream", tokens=len(pieces), ms=wall_s * 1000.0)
    yield RemoteAnswer(
        base, "".join(pieces), len(pieces), wall_s, first_ms, finish, timings, counters
    )


def _events(where: str, chunks: Iterator[bytes]) -> Iterator[dict[str, Any] | None]:
    """The JSON objects of the ``data:`` lines of an event stream; None for ``[DONE]``.
    Bounded: the whole stream, one line and the number of events."""
    pending = b""
    total = events = 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_STREAM_BYTES:
            raise RemoteError(f"{where} sent more than {MAX_STREAM_BYTES >> 20} MiB")
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > MAX_EVENT_BYTES:
            raise RemoteError(f"{where} sent an event line longer than {MAX_EVENT_BYTES >> 10} KiB")
        for line in lines:
            line = line.rstrip(b"\r")
            if not line.startswith(b"data:"):
                if line.startswith(b"{"):
                    yield _instead_of_events(where, line)
                continue  # blank separators, comments, event:/id: fields
            if len(line) > MAX_EVENT_BYTES:
                raise RemoteError(
                    f"{where} sent an event line longer than {MAX_EVENT_BYTES >> 10} KiB"
                )
            data = line[5:].strip()
            if data == b"[DONE]":
                yield None
                return
            events += 1
            if events > MAX_EVENTS:
                raise RemoteError(f"{where} sent more than {MAX_EVENTS} events")
            yield _object(where, data)
    if pending.lstrip().startswith(b"{"):  # one object without a line end
        yield _instead_of_events(where, pending.strip())
    elif pending.strip():
        raise RemoteError(f"{where} ended the stream in the middle of an event")


def _instead_of_events(where: str, line: bytes) -> dict[str, Any]:
    """A JSON object sent where events were asked: an error, which ``_chunk`` passes on, or
    a whole answer from a server that ignored ``stream``, whose text no event carries (it
    read as an empty answer)."""
    value = _object(where, line)
    if value.get("error") is None:
        raise RemoteError(
            f"{where} answered with one JSON object, not a stream of events: the server does "
            'not stream answers (it ignored "stream": true); use a server that does'
        )
    return value


def _object(where: str, data: bytes) -> dict[str, Any]:
    try:
        value = loads(data.decode("utf-8"))
    except (ValueError, BadValue) as exc:  # not UTF-8, not JSON, NaN, nested too deeply
        raise RemoteError(f"{where} sent an event that is not JSON ({plain(str(exc))})") from None
    if not isinstance(value, dict):
        raise RemoteError(f"{where} sent an event that is not an object (it is {kind_of(value)})")
    return value


def _chunk(where: str, event: dict[str, Any]) -> tuple[str, str, ServerTimings | None]:
    """The text piece, the finish reason and llama-server's timings of one chunk."""
    error = event.get("error")
    if error is not None:
        message = error.get("message") if isinstance(error, dict) else error
        raise RemoteError(f"{where} answered with an error: {plain(str(message))}")
    try:
        timings = parse_timings(event)
    except RemoteError as exc:
        raise RemoteError(f"{where}: {exc}") from None
    choices = event.get("choices", [])
    if not isinstance(choices, list):
        raise RemoteError(f"{where}: choices is not a list (it is {kind_of(choices)})")
    if not choices:  # a usage-only or timings-only chunk
        return "", "", timings
    choice = choices[0]
    if not isinstance(choice, dict):
        raise RemoteError(f"{where}: a choice is not an object (it is {kind_of(choice)})")
    delta = choice.get("delta", {})
    if not isinstance(delta, dict):
        raise RemoteError(f"{where}: a choice's delta is not an object (it is {kind_of(delta)})")
    piece = delta.get("content") or ""
    if not isinstance(piece, str):
        raise RemoteError(f"{where}: a delta's content is not text (it is {kind_of(piece)})")
    try:
        unicode(piece, "a delta's content")
    except BadValue as exc:
        raise RemoteError(f"{where}: {exc}") from None
    reason = choice.get("finish_reason") or ""
    if not isinstance(reason, str):
        raise RemoteError(f"{where}: finish_reason is not text (it is {kind_of(reason)})")
    return piece, plain(reason, 40), timings
