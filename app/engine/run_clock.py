"""Per-run bookkeeping: timestamps, counters and the final ``RunSummary``.

Each run also measures the machine it got, so two runs timed one after the other can be
told apart when they did not get the same one: the CPU the run's own threads received
against what they could use (process CPU time against wall time), and the CPU other
processes took on the cores this process may run on (psutil's per-core times).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np
import psutil

from app.engine.acceptance import Produced
from app.engine.events import RunSummary, StopReason, TokenEvent
from app.engine.llama_backend import LlamaContext

MIN_METERED_S = 0.3  # shorter runs are too short for the kernel's 10 ms CPU accounting


def _cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _busy_s(cores: Sequence[int]) -> float | None:
    """CPU seconds all processes have used on ``cores`` since boot (steal time included:
    a hypervisor's other guests take it from this one)."""
    try:
        per_core = psutil.cpu_times(percpu=True)
    except (OSError, RuntimeError, psutil.Error):
        return None
    busy = 0.0
    for index in cores:
        if index >= len(per_core):
            return None
        times = per_core[index]._asdict()
        idle = times.get("idle", 0.0) + times.get("iowait", 0.0)
        # guest time is already counted in user time on Linux
        total = sum(times.values()) - times.get("guest", 0.0) - times.get("guest_nice", 0.0)
        busy += total - idle
    return busy


class MachineMeter:
    """What one run got of the machine, from its start to ``read()``."""

    def __init__(self, contexts: Sequence[LlamaContext]) -> None:
        self._contexts = list(contexts)
        self._cores = _cores()
        self._decode = [c.decode_s for c in self._contexts]
        self._wall = time.perf_counter()
        self._cpu = time.process_time()
        self._busy = _busy_s(self._cores)

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
        for ctx, before in zip(self._contexts, self._decode, strict=True):
            decode = ctx.decode_s - before
            decode_total += decode
            possible += decode * min(max(ctx.model.spec.threads(), 1), cores)
        possible += max(wall - decode_total, 0.0)
        share = own / possible if possible > 0 else None
        busy = _busy_s(self._cores)
        outside = None
        if busy is not None and self._busy is not None:
            outside = max(busy - self._busy - own, 0.0) / wall
        return share, outside


class RunClock:
    def __init__(self, contexts: Sequence[LlamaContext], *, mode: str) -> None:
        self.mode = mode
        self._contexts = list(contexts)
        self._decode_at_start = sum(c.decode_s for c in self._contexts)
        self.machine = MachineMeter(self._contexts)
        self.paused_tokens = 0
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

    def count_paused(self, tokens: int) -> None:
        """Tokens the target wrote alone while the guard had drafting paused."""
        self.paused_tokens += tokens

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
        cpu_share, outside_cores = self.machine.read()
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
            paused_tokens=self.paused_tokens,
            cpu_share=cpu_share,
            outside_cores=outside_cores,
        )
