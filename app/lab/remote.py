"""Remote configurations: an OpenAI-compatible server that does its own speculation.

llama.cpp's ``llama-server`` with a draft model returns ``timings`` in every completion
(``predicted_n``, ``predicted_ms``, ``prompt_ms`` and, when it drafted, ``draft_n`` and
``draft_n_accepted``). vLLM exposes cumulative Prometheus counters at ``/metrics``
(``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
``..._num_accepted_tokens_total``, ``..._num_accepted_tokens_per_pos_total{position=}``); the
lab reads them before and after each request and keeps the difference. Both become the same
per-run metrics the local runs record, so they land on the same plots. Stdlib HTTP only;
every read is bounded.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_METRICS_BYTES = 16 * 1024 * 1024
VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_SAMPLE = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|NaN|[-+]?Inf))"
    r"(?:\s+-?[0-9]+)?\s*$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class RemoteError(ValueError):
    """A server that could not be used; the message names it and says why."""


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(f"{url!r} is not an http(s) server address")
    return url.rstrip("/")


def _read(response: Any, limit: int, url: str) -> bytes:
    data: bytes = response.read(limit + 1)
    if len(data) > limit:
        raise RemoteError(f"{url} answered with more than {limit >> 20} MiB")
    return data


def _request(url: str, body: dict[str, Any] | None, timeout: float, limit: int) -> bytes:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(
        url,
        data=data,
        method="POST" if data else "GET",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return _read(response, limit, url)
    except urllib.error.HTTPError as exc:
        raise RemoteError(f"{url} answered HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RemoteError(f"{url} did not answer ({reason})") from exc


# --- llama-server ------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerTimings:
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    draft_n: int
    draft_n_accepted: int

    @property
    def tok_s(self) -> float:
        return self.predicted_n * 1000.0 / self.predicted_ms if self.predicted_ms > 0 else 0.0

    @property
    def acceptance(self) -> float:
        return self.draft_n_accepted / self.draft_n if self.draft_n else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Every target pass yields one token of its own plus the drafts it accepted."""
        passes = self.predicted_n - self.draft_n_accepted
        return self.predicted_n / passes if passes > 0 else 0.0


def _number(data: dict[str, Any], key: str, default: float = 0.0) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RemoteError(f"timings.{key} is not a number")
    return float(value)


def parse_timings(response: dict[str, Any]) -> ServerTimings | None:
    """llama-server's ``timings`` object of a completion; None when the server sent none."""
    timings = response.get("timings") if isinstance(response, dict) else None
    if timings is None:
        return None
    if not isinstance(timings, dict):
        raise RemoteError("the server's timings are not an object")
    return ServerTimings(
        prompt_ms=_number(timings, "prompt_ms"),
        predicted_n=int(_number(timings, "predicted_n")),
        predicted_ms=_number(timings, "predicted_ms"),
        draft_n=int(_number(timings, "draft_n")),
        draft_n_accepted=int(_number(timings, "draft_n_accepted")),
    )


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
        samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
    return samples


@dataclass(frozen=True)
class SpecCounters:
    drafts: float
    draft_tokens: float
    accepted: float
    per_position: tuple[float, ...]

    @staticmethod
    def from_metrics(text: str, *, model: str | None = None) -> SpecCounters:
        totals = {VLLM_DRAFTS: 0.0, VLLM_DRAFT_TOKENS: 0.0, VLLM_ACCEPTED: 0.0}
        positions: dict[int, float] = {}
        for name, labels, value in parse_prometheus(text):
            if model is not None and labels.get("model_name", model) != model:
                continue
            if name in totals:
                totals[name] += value
            elif name == VLLM_PER_POSITION and labels.get("position", "").isdigit():
                position = int(labels["position"])
                positions[position] = positions.get(position, 0.0) + value
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


# --- one request -------------------------------------------------------------------------


def run_remote(
    url: str,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float,
    seed: int,
    kind: str = "llama-server",
    timeout: float = 600.0,
) -> dict[str, Any]:
    """One chat completion, measured like a local run (same metric names)."""
    base = check_url(url)
    before = (
        SpecCounters.from_metrics(
            _request(f"{base}/metrics", None, timeout, MAX_METRICS_BYTES).decode("utf-8", "replace")
        )
        if kind == "vllm"
        else None
    )
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "stream": False,
    }
    began = time.perf_counter()
    raw = _request(f"{base}/v1/chat/completions", body, timeout, MAX_RESPONSE_BYTES)
    wall_s = time.perf_counter() - began
    try:
        response = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RemoteError(f"{base} did not answer with JSON ({exc})") from exc
    if not isinstance(response, dict):
        raise RemoteError(f"{base} did not answer with a completion object")
    usage = response.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    tokens = int(usage.get("completion_tokens") or 0)
    metrics: dict[str, Any] = {
        "tokens": tokens,
        "tok_s": tokens / wall_s if wall_s else 0.0,
        "ttft_ms": 0.0,
        "acceptance": 0.0,
        "tokens_per_pass": 1.0,
        "drafted": 0,
        "accepted": 0,
        "wall_s": round(wall_s, 4),
    }
    timings = parse_timings(response)
    if timings is not None:
        metrics.update(
            tokens=timings.predicted_n,
            tok_s=timings.tok_s,
            ttft_ms=timings.prompt_ms,
            acceptance=timings.acceptance,
            tokens_per_pass=timings.tokens_per_pass,
            drafted=timings.draft_n,
            accepted=timings.draft_n_accepted,
        )
    if before is not None:
        after = SpecCounters.from_metrics(
            _request(f"{base}/metrics", None, timeout, MAX_METRICS_BYTES).decode("utf-8", "replace")
        )
        delta = after.minus(before)
        metrics.update(
            acceptance=delta.acceptance,
            tokens_per_pass=delta.tokens_per_pass,
            drafted=int(delta.draft_tokens),
            accepted=int(delta.accepted),
            accepted_per_position=list(delta.per_position),
        )
    for key in ("tok_s", "ttft_ms", "acceptance", "tokens_per_pass"):
        metrics[key] = round(float(metrics[key]), 4)
    metrics.update(
        itl_p50_ms=0.0,
        itl_p95_ms=0.0,
        itl_p99_ms=0.0,
        host_ms_per_token=0.0,
        guard_pauses=0,
        peak_rss_mb=None,
        stop_reason="remote",
    )
    return metrics
