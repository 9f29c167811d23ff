"""Per-run bookkeeping: timestamps, counters and the final ``RunSummary``."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from app.engine.events import RunSummary, StopReason, TokenEvent
from app.engine.llama_backend import LlamaContext
from app.engine.verify import Produced


class RunClock:
    def __init__(self, contexts: Sequence[LlamaContext], *, mode: str) -> None:
        self.mode = mode
        self._contexts = list(contexts)
        self._decode_at_start = sum(c.decode_s for c in self._contexts)
        self.started = time.perf_counter()
        self.generation_started: float | None = None
        self.stamps: list[float] = []
        self.tokens = 0
        self.passes = 0
        self.steps = 0
        self.drafted = 0
        self.accepted = 0
        self.draft_passes = 0
        self.pauses = 0
        self.notes: list[str] = []

    def decode_s(self) -> float:
        """Seconds inside llama_decode so far (all contexts of this run)."""
        return sum(c.decode_s for c in self._contexts) - self._decode_at_start

    def count_draft_passes(self, passes: int) -> None:
        self.draft_passes += passes

    def count_pause(self, message: str) -> None:
        self.pauses += 1
        if message not in self.notes:
            self.notes.append(message)

    def prefill_done(self) -> float:
        """Mark the end of prompt processing; returns its duration in ms."""
        now = time.perf_counter()
        self.generation_started = now
        return (now - self.started) * 1000.0

    def token_event(
        self, produced: Produced, piece: str, step: int, rejected_piece: str | None
    ) -> TokenEvent:
        self.stamps.append(time.perf_counter())
        event = TokenEvent(
            index=self.tokens,
            token_id=produced.token_id,
            piece=piece,
            kind=produced.kind,
            step=step,
            draft_prob=produced.draft_prob,
            target_prob=produced.target_prob,
            rejected_token=produced.rejected_token,
            rejected_piece=rejected_piece,
        )
        self.tokens += 1
        return event

    def count_step(self, drafted: int, accepted: int) -> None:
        self.steps += 1
        self.drafted += drafted
        self.accepted += accepted

    def count_pass(self) -> None:
        self.passes += 1

    def summary(
        self,
        stop: StopReason,
        text: str,
        token_ids: Sequence[int],
        *,
        position_keyed: bool = False,
        temperature: float = 0.0,
        rule: str = "",
    ) -> RunSummary:
        ended = time.perf_counter()
        begin = self.generation_started or self.started
        generation_s = max(ended - begin, 1e-9)
        ttft = (self.stamps[0] - self.started) * 1000.0 if self.stamps else 0.0
        gaps = np.diff(np.array([begin, *self.stamps])) * 1000.0 if self.stamps else np.zeros(1)
        return RunSummary(
            mode=self.mode,
            tokens=self.tokens,
            elapsed_s=ended - self.started,
            tok_s=self.tokens / generation_s,
            ttft_ms=ttft,
            acceptance_rate=self.accepted / self.drafted if self.drafted else 0.0,
            mean_accepted_length=self.accepted / self.steps if self.steps else 0.0,
            target_passes_per_token=self.passes / self.tokens if self.tokens else 0.0,
            p50_itl_ms=float(np.percentile(gaps, 50)),
            p95_itl_ms=float(np.percentile(gaps, 95)),
            p99_itl_ms=float(np.percentile(gaps, 99)),
            stop_reason=stop,
            decode_s=self.decode_s(),
            steps=self.steps,
            drafted=self.drafted,
            accepted=self.accepted,
            token_ids=tuple(token_ids),
            text=text,
            draft_passes=self.draft_passes,
            guard_pauses=self.pauses,
            position_keyed=position_keyed,
            temperature=temperature,
            rule=rule,
            guard_notes=tuple(self.notes),
        )
