"""A remote configuration's run in the Lab: one chat completion on a remote server,
measured like a local run (the same metric names), so both land on the same plots.

The request and every figure of the answer are read with the remote client's checks
(``app.remote.client``); vLLM's spec-decode counters are read before and after the request
and their difference kept.
"""

from __future__ import annotations

import time
from typing import Any

from app.files.values import MAX_COUNT, BadValue, loads, whole
from app.remote.client import (
    DEFAULT_DEADLINE_S,
    Budget,
    CancelCheck,
    RemoteError,
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

MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # one completion's answer


def run_remote(
    url: str,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float,
    seed: int,
    kind: str = "llama-server",
    timeout: float = DEFAULT_DEADLINE_S,
    cancel: CancelCheck | None = None,
) -> dict[str, Any]:
    """One chat completion, measured like a local run (same metric names).

    ``timeout`` bounds each whole request (connecting, headers, body), not each read;
    ``cancel`` cuts the request within a tenth of a second (``RemoteCancelled``).
    """
    base = check_url(url)
    budget = Budget(timeout, cancel)
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "stream": False,
    }
    with new_client() as client:
        before = read_counters(client, f"{base}/metrics", budget) if kind == "vllm" else None
        began = time.perf_counter()
        raw = read_bytes(
            client,
            f"{base}/v1/chat/completions",
            json_body(body),
            budget,
            MAX_RESPONSE_BYTES,
        )
        wall_s = time.perf_counter() - began
        after = read_counters(client, f"{base}/metrics", budget) if before is not None else None
    metrics = _completion_metrics(base, raw, wall_s)
    if before is not None and after is not None:
        delta = check_counters(f"{base}/metrics", after.minus(before))
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


def _completion_metrics(base: str, raw: bytes, wall_s: float) -> dict[str, Any]:
    """The figures of one completion answer, every value type- and range-checked."""
    try:
        response = loads(raw.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, NaN/Infinity, nested too deeply
        raise RemoteError(f"{base} did not answer with JSON ({plain(str(exc))})") from None
    if not isinstance(response, dict):
        raise RemoteError(f"{base} did not answer with a completion object")
    usage = response.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    try:
        tokens = whole(usage.get("completion_tokens") or 0, "usage.completion_tokens", 0, MAX_COUNT)
    except BadValue as exc:
        raise RemoteError(f"{base}: {exc}") from None
    metrics: dict[str, Any] = {
        "tokens": tokens,
        "tok_s": tokens / wall_s if wall_s > 0 else 0.0,
        "ttft_ms": 0.0,
        "acceptance": 0.0,
        "tokens_per_pass": 1.0,
        "drafted": 0,
        "accepted": 0,
        "wall_s": round(wall_s, 4),
    }
    try:
        timings = parse_timings(response)
    except RemoteError as exc:
        raise RemoteError(f"{base}: {exc}") from None
    if timings is not None:
        metrics.update(
            tokens=timings.predicted_n,
            # no time from the server: the speed measured here, as without timings
            tok_s=timings.tok_s if timings.tok_s is not None else metrics["tok_s"],
            ttft_ms=timings.prompt_ms,
            acceptance=timings.acceptance,
            tokens_per_pass=timings.tokens_per_pass,
            drafted=timings.draft_n,
            accepted=timings.draft_n_accepted,
        )
    else:  # the speed measured here, of the tokens the server says it wrote
        check_figures(f"{base}: the answer's usage", tokens=tokens, ms=wall_s * 1000.0)
    return metrics
