"""Per-run clock and the final ``RunSummary``, its counts read from the step records.

Each run also measures the machine it got, so two runs timed one after the other can be
told apart when they did not get the same one: the CPU the run's own threads received
against what they could use (process CPU time against wall time), and the CPU other
processes took on the cores this process may run on (psutil's per-core times).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from app.engine.config import usable_cores
from app.engine.events import GuardEvent, RunSummary, StopReason, TokenEvent
from app.engine.loop.acceptance import Produced
from app.engine.step_record import StepRecord, per_drafter, per_position
from app.engine.thread_fit import busy_cpu_seconds


class DecodeTimed(Protocol):
    """A context (or a drafting head's) that counts the wall time spent inside llama.cpp."""

    decode_s: float
    decode_thread_s: float  # the seconds of decode_s, each times the threads it ran on
    threads: int  # how many threads its passes use now


MIN_METERED_S = 0.3  # shorter runs are too short for the kernel's 10 ms CPU accounting


class MachineMeter:
    """What one run got of the machine, from its start to ``read()``."""

    def __init__(self, contexts: Sequence[DecodeTimed]) -> None:
        self._contexts = list(contexts)
        self._cores = usable_cores()
        self._decode = [(c.decode_s, c.decode_thread_s) for c in self._contexts]
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._busy = busy_cpu_seconds(self._cores)

    def read(self) -> tuple[float | None, float | None]:
        """(CPU share, outside cores).

        CPU share: this process's CPU time over what its threads could have used: each
        decode's threads (at most one per core) for the decode's wall time, one thread for
        the rest. About 1 on a quiet machine; half when another process takes half the
        cores. Outside cores: CPU other processes used on this process's cores, in cores.
        """
        wall = time.perf_counter() - self._wall
        if wall < MIN_METERED_S:
            return None, None
        own = time.process_time() - self._cpu
        cores = len(self._cores)
        decode_total, possible = 0.0, 0.0
        for ctx, (before, thread_before) in zip(self._contexts, self._decode, strict=True):
            decode = ctx.decode_s - before
            decode_total += decode
            # the threads of each pass (they follow other programs), at most one per core
            possible += min(max(ctx.decode_thread_s - thread_before, decode), decode * cores)
        possible += max(wall - decode_total, 0.0)
        share = own / possible if possible > 0 else None
        busy = busy_cpu_seconds(self._cores)
        outside = None
        if busy is not None and self._busy is not None:
            outside = max(busy - self._busy - own, 0.0) / wall
        return share, outside


class RunClock:
    """When things happened in one run; every count comes from its step records."""

    def __init__(self, contexts: Sequence[DecodeTimed], *, mode: str) -> None:
        self.mode = mode
        self._contexts = list(contexts)
        self._decode_at_start = sum(c.decode_s for c in self._contexts)
        self.machine = MachineMeter(self._contexts)
        self.started = time.perf_counter()
        self.generation_started: float | None = None
        self.stamps: list[float] = []  # when each generated token was released
        # the steps' time after their records (what the drafter and the controller learned
        # from them), outside llama_decode: a record cannot hold the time spent reading it
        self.learning_s = 0.0

    def decode_s(self) -> float:
        """Seconds inside llama_decode so far (all contexts of this run)."""
        return sum(c.decode_s for c in self._contexts) - self._decode_at_start

    def learned(self, began: float, decode_s: float) -> None:
        """A step's learning, from ``began`` with ``decode_s`` already decoded, is over."""
        outside = time.perf_counter() - began - (self.decode_s() - decode_s)
        self.learning_s += max(outside, 0.0)

    def prefill_done(self) -> float:
        """Mark the end of prompt processing; returns its duration in ms."""
        now = time.perf_counter()
        self.generation_started = now
        return (now - self.started) * 1000.0

    def token_event(
        self, produced: Produced, piece: str, step: int, rejected_piece: str | None
    ) -> TokenEvent:
        self.stamps.append(time.perf_counter())
        return TokenEvent(
            index=len(self.stamps) - 1,
            token_id=produced.token_id,
            piece=piece,
            kind=produced.kind,
            step=step,
            draft_prob=produced.draft_prob,
            target_prob=produced.target_prob,
            rejected_token=produced.rejected_token,
            rejected_piece=rejected_piece,
        )

    def summary(
        self,
        stop: StopReason,
        text: str,
        token_ids: Sequence[int],
        records: Sequence[StepRecord],
        pauses: Sequence[GuardEvent] = (),
        *,
        position_keyed: bool = False,
        temperature: float = 0.0,
        rule: str = "",
        sampling: str = "",
    ) -> RunSummary:
        cpu_share, outside_cores = self.machine.read()
        ended = time.perf_counter()
        begin = self.generation_started or self.started
        generation_s = max(ended - begin, 1e-9)
        tokens = len(self.stamps)
        ttft = (self.stamps[0] - self.started) * 1000.0 if self.stamps else 0.0
        gaps = np.diff(np.array([begin, *self.stamps])) * 1000.0 if self.stamps else np.zeros(1)
        steps = sum(1 for r in records if r.proposed)
        drafted = sum(r.proposed for r in records)
        accepted = sum(r.accepted for r in records)
        drafted_at, accepted_at = per_position(records)
        p50, p95, p99 = (float(x) for x in np.percentile(gaps, (50, 95, 99)))
        return RunSummary(
            mode=self.mode,
            tokens=tokens,
            elapsed_s=ended - self.started,
            tok_s=tokens / generation_s,
            ttft_ms=ttft,
            acceptance_rate=accepted / drafted if drafted else 0.0,
            mean_accepted_length=accepted / steps if steps else 0.0,
            target_passes_per_token=len(records) / tokens if tokens else 0.0,
            p50_itl_ms=p50,
            p95_itl_ms=p95,
            p99_itl_ms=p99,
            stop_reason=stop,
            decode_s=self.decode_s(),
            steps=steps,
            drafted=drafted,
            accepted=accepted,
            token_ids=tuple(token_ids),
            text=text,
            draft_passes=sum(r.draft_passes for r in records),
            guard_pauses=len(pauses),
            position_keyed=position_keyed,
            temperature=temperature,
            rule=rule,
            guard_events=tuple(pauses),
            paused_tokens=sum(r.emitted for r in records if r.paused),
            paused_lookup_tokens=sum(
                r.accepted for r in records if r.paused and r.proposed and not r.draft_passes
            ),
            paused_at_end=paused_at_end(records),
            cpu_share=cpu_share,
            outside_cores=outside_cores,
            drafted_per_position=drafted_at,
            accepted_per_position=accepted_at,
            per_drafter=per_drafter(records),
            verify_passes=tuple((r.proposed + 1, r.verify_ms) for r in records),
            lone_passes=tuple(r.verify_ms for r in records if not r.paid),
            step_host_s=sum(r.host_ms for r in records) / 1000.0 + self.learning_s,
            sampling=sampling,
            passes=len(records),
            verified=sum(r.verified for r in records),
        )


def paused_at_end(records: Sequence[StepRecord]) -> int:
    """Tokens the trailing paused steps wrote: how long drafting had stayed paused when the
    answer ended (prompt lookups that went on while it was paused count as paused)."""
    tokens = 0
    for record in reversed(records):
        if not record.paused:
            break
        tokens += record.emitted
    return tokens
