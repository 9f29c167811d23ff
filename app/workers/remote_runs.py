"""A chat answer from a remote server, in the engine worker's own messages.

The engine worker hands a job here when its pair is a ``RemotePair``: the answer streams as
``EventBatch``es of ``TextTail`` pieces (no token kinds: the server does not say which tokens
it drafted), followed by the ``RemoteAnswer`` with the server's own figures and a
``RunSummary`` built only from what the server reported. The baseline is a second server the
user named, run after the first answer is done, like the local baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from app.engine.config import DraftSource
from app.engine.events import Event, RunSummary, StopReason, TextTail
from app.engine.process.protocol import BATCH_SECONDS, PairInfo
from app.remote.chat import RemoteAnswer, RemotePair, check_server, stream_chat
from app.remote.client import RemoteCancelled
from app.workers.messages import ChatJob, EventBatch, PairLoaded

Emit = Callable[[EventBatch], None]


def remote_loaded(
    request_id: int, pair: RemotePair, cancel: Callable[[], bool] | None = None
) -> PairLoaded:
    """Check that the servers answer; the pair bar then names the remote by its address."""
    began = time.perf_counter()
    for url in (pair.url, pair.baseline_url):
        if url is not None:
            check_server(url, cancel=cancel)
    device = f"remote {pair.server}"
    info = PairInfo(
        pair.url,
        pair.baseline_url,
        DraftSource.MODEL,
        device,
        weights_bytes=0,
        n_ctx=0,
        repacking="",
        plain_chat=False,
    )
    return PairLoaded(request_id, info, time.perf_counter() - began, remote=pair)


def summary(run: str, answer: RemoteAnswer) -> RunSummary:
    """The run's figures as far as the server reported them; nothing is estimated."""
    t = answer.timings
    tokens = t.predicted_n if t is not None else answer.chunks
    measured = tokens / answer.wall_s if answer.wall_s > 0 else 0.0  # under check_figures
    tok_s = answer.tok_s if answer.tok_s is not None else measured
    accepted = answer.accepted or 0
    passes = tokens - accepted
    return RunSummary(
        mode=run,
        tokens=tokens,
        elapsed_s=answer.wall_s,
        tok_s=tok_s,
        ttft_ms=answer.first_piece_ms,
        acceptance_rate=(t.acceptance if t is not None else 0.0),
        mean_accepted_length=0.0,
        target_passes_per_token=passes / tokens if tokens and passes > 0 else 1.0,
        p50_itl_ms=0.0,
        p95_itl_ms=0.0,
        stop_reason=StopReason.MAX_TOKENS if answer.finish_reason == "length" else StopReason.EOG,
        decode_s=0.0,
        steps=0,
        drafted=answer.drafted or 0,
        accepted=accepted,
        text=answer.text,
        temperature=0.0,
    )


def stream_run(
    request_id: int, run: str, url: str, pair: RemotePair, job: ChatJob, emit: Emit
) -> RunSummary | None:
    """One answer from ``url``; None when it was stopped. ``RemoteError`` for a failure."""
    s = job.settings
    began = last = time.perf_counter()
    pending: list[Event | RemoteAnswer] = []
    pieces = 0
    result: RunSummary | None = None
    try:
        for event in stream_chat(
            url,
            job.messages,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            seed=s.seed,
            server=pair.server,
            cancel=job.cancel.is_set,
        ):
            pending.append(event)
            now = time.perf_counter()
            if isinstance(event, TextTail):
                pieces += 1
                if now - last < BATCH_SECONDS:
                    continue
            else:
                result = summary(run, event)
                pending.append(result)
            last = now
            batch: tuple[Any, ...] = tuple(pending)  # the RemoteAnswer travels with them
            emit(EventBatch(request_id, run, batch, now - began, pieces))
            pending = []
    except RemoteCancelled:
        return None
    return result
