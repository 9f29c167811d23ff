"""A busy machine on purpose: other programs' load, reproducible, for the bench.

Users' machines are rarely quiet (a browser, an IDE, a build), and what fools a guard is not
a steady load but bursts: every core busy for a moment, then idle. ``MachineLoad`` says
which load; ``LoadRunning`` makes it with one process per core for as long as it is held,
and never longer than ``limit_s`` (each process also ends by itself at that deadline, and
when the process that started it is gone).

- ``bursts[:SEED]``: all cores busy together, spinning and streaming memory, for seeded
  random spans of 0.2-3 s with idle gaps of the same range. Each start replays the same
  schedule, so every prompt of a bench meets the same bursts.
- ``steady:SHARE``: SHARE of the machine's cores kept busy all the time (0.5 on two cores:
  one core spinning), the fraction beyond whole cores as a duty cycle.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from app.engine.config import usable_cores

LoadKind = Literal["bursts", "steady"]
MEMORY_BYTES = 16 << 20  # copied back and forth in a burst: more than a core's caches hold
SLICE_S = 0.002  # spinning between two copies
DUTY_PERIOD_S = 0.1  # a steady fraction of a core: busy this share of every period


@dataclass(frozen=True)
class MachineLoad:
    kind: LoadKind
    seed: int = 0
    share: float = 0.5  # steady: the cores kept busy, as a share of ``core_count``
    shortest_s: float = 0.2  # bursts: the shortest busy span and idle gap
    longest_s: float = 3.0  # bursts: the longest
    limit_s: float = 1800.0  # no load outlives this, whatever happens to its starter
    cores: int = 0  # 0: those this process may run on, which its load processes inherit

    @classmethod
    def parse(cls, text: str) -> MachineLoad:
        """``bursts``, ``bursts:SEED`` or ``steady:SHARE`` (a share of the cores, 0-1)."""
        kind, _, value = text.strip().partition(":")
        if kind == "bursts":
            if value and not value.isdigit():
                raise ValueError(f"bursts:SEED takes a whole number as its seed, not {value!r}")
            return cls("bursts", seed=int(value or 0))
        if kind == "steady":
            try:
                share = float(value or "0.5")
            except ValueError:
                raise ValueError(
                    f"steady:SHARE takes a share of the cores, not {value!r}"
                ) from None
            if not 0.0 < share <= 1.0:
                raise ValueError(
                    f"steady:SHARE is a share of the cores above 0 and at most 1, not {share}"
                )
            return cls("steady", share=share)
        raise ValueError(f"a machine load is bursts, bursts:SEED or steady:SHARE, not {text!r}")

    @property
    def core_count(self) -> int:
        return self.cores or len(usable_cores())

    def describe(self) -> str:
        cores = self.core_count
        if self.kind == "bursts":
            every = f"all {cores} cores" if cores > 1 else "the one core"
            return (
                f"bursts (seed {self.seed}): {every} busy for "
                f"{self.shortest_s:g}-{self.longest_s:g} s, idle for as long"
            )
        return f"steady: {self.share:.0%} of {cores} {'cores' if cores > 1 else 'core'} busy"

    def schedule(self) -> list[tuple[float, float]]:
        """The bursts as (start, end) seconds after the load starts, up to ``limit_s``."""
        rng = random.Random(self.seed)
        spans, at = [], 0.0
        while at < self.limit_s:
            busy = rng.uniform(self.shortest_s, self.longest_s)
            spans.append((at, min(at + busy, self.limit_s)))
            at += busy + rng.uniform(self.shortest_s, self.longest_s)
        return spans

    def duties(self) -> list[float]:
        """Each process's busy share of the time (steady), one process per busy core."""
        busy = self.share * self.core_count
        whole = math.floor(busy + 1e-9)
        rest = busy - whole
        return [1.0] * whole + ([rest] if rest > 0.01 else [])


class LoadRunning:
    """``with LoadRunning(load):`` the machine is busy inside the block, quiet after it."""

    def __init__(self, load: MachineLoad) -> None:
        self.load = load
        self._processes: list[Any] = []

    def __enter__(self) -> LoadRunning:
        spawn = multiprocessing.get_context("spawn")
        load = self.load
        start = time.monotonic() + 0.5  # every process starts the schedule together
        shares = [1.0] * load.core_count if load.kind == "bursts" else load.duties()
        for share in shares:
            process = spawn.Process(
                target=_work, args=(load, share, start, os.getpid()), daemon=True
            )
            process.start()
            self._processes.append(process)
        time.sleep(max(0.0, start - time.monotonic()))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join(2.0)
        self._processes.clear()


def _work(load: MachineLoad, share: float, start: float, parent: int) -> None:
    """One core's share of the load, until the deadline or the starter is gone."""
    deadline = start + load.limit_s
    memory = (bytearray(MEMORY_BYTES), bytearray(MEMORY_BYTES))

    def going() -> bool:
        return time.monotonic() < deadline and os.getppid() == parent

    if load.kind == "bursts":
        for began, ended in load.schedule():
            if not going():
                return
            _sleep_until(start + began)
            _busy_until(min(start + ended, deadline), memory)
        return
    while going():
        period_began = time.monotonic()
        _busy_until(period_began + share * DUTY_PERIOD_S, memory)
        _sleep_until(period_began + DUTY_PERIOD_S)


def _sleep_until(moment: float) -> None:
    wait = moment - time.monotonic()
    if wait > 0:
        time.sleep(wait)


def _busy_until(moment: float, memory: tuple[bytearray, bytearray]) -> None:
    """Spin and stream memory, as a build or a browser does, until ``moment``."""
    source, target = memory
    spin = 0
    while time.monotonic() < moment:
        slice_end = time.monotonic() + SLICE_S
        while time.monotonic() < slice_end:
            spin = (spin * 1103515245 + 12345) & 0x7FFFFFFF
        target[:] = source
