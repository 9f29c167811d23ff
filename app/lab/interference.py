"""Did a Lab measurement have the machine to itself? Outside load and uneven steps.

A speedup is the ratio of two runs made one after the other; when other programs take the
cores during one of them, or the steps stall, the ratio measures the machine rather than the
configuration. The runner takes a ``CpuSample`` before and after each prompt and keeps both
in the result file (``between``); ``judge`` reads them back, from the numbers alone, so every
reader (the CLI, the Lab tab, the report) flags the same rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

# Other programs' CPU beyond the cores the run leaves free, in cores, before a row is flagged
# (an idle desktop stays well under it; one busy program on a core the run uses is over it).
OUTSIDE_CORES = 0.3
# Target-only steps are one pass each, so their gaps should be even: a 95th percentile this
# many times the median, and this much longer, means the steps were held up.
STEP_SPREAD = 3.0
STEP_STALL_MS = 10.0
RERUN = "measured under outside load: rerun"
_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")  # guest is inside user


@dataclass(frozen=True)
class CpuSample:
    at_s: float  # monotonic clock
    own_cpu_s: float  # user + system time of the measuring processes
    busy_cpu_s: float  # every program's busy time on the CPUs this process may use
    cpus: int


def _usable_cpus() -> list[int] | None:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return None


def _busy(times: Any) -> float:
    return sum(float(getattr(times, name, 0.0)) for name in _BUSY_FIELDS)


def sample(pids: Iterable[int] = ()) -> CpuSample:
    """CPU times now; ``pids`` are further processes whose work is the measurement's own
    (an engine process), besides the calling one."""
    own = 0.0
    for pid in (os.getpid(), *pids):
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:  # ended meanwhile: its time is no longer anyone's
            continue
        own += times.user + times.system
    usable = _usable_cpus()
    per_cpu = psutil.cpu_times(percpu=True)
    if usable is not None and all(i < len(per_cpu) for i in usable):
        busy = sum(_busy(per_cpu[i]) for i in usable)
        cpus = len(usable)
    else:
        busy = sum(_busy(t) for t in per_cpu)
        cpus = len(per_cpu)
    return CpuSample(time.monotonic(), own, busy, max(cpus, 1))


def between(before: CpuSample, after: CpuSample, *, threads: int) -> dict[str, float | int]:
    """What a result record keeps: the wall, own and everyone's busy time of one prompt."""
    return {
        "wall_s": round(after.at_s - before.at_s, 4),
        "own_cpu_s": round(after.own_cpu_s - before.own_cpu_s, 4),
        "busy_cpu_s": round(after.busy_cpu_s - before.busy_cpu_s, 4),
        "cpus": after.cpus,
        "threads": threads,
    }


def outside_cores(wall_s: float, own_cpu_s: float, busy_cpu_s: float, cpus: int) -> float:
    """Cores' worth of CPU that other programs used meanwhile (1.87: 187 % CPU)."""
    if wall_s <= 0:
        return 0.0
    return min(max(busy_cpu_s - own_cpu_s, 0.0) / wall_s, float(cpus))


def judge(
    *,
    wall_s: float,
    own_cpu_s: float,
    busy_cpu_s: float,
    cpus: int,
    threads: int,
    steps: Sequence[tuple[float, float]] = (),
) -> str | None:
    """None when the measurement had the machine; otherwise why not, in words.

    ``steps``: (median, 95th percentile) inter-token gaps in ms of target-only runs.
    """
    reasons = []
    others = outside_cores(wall_s, own_cpu_s, busy_cpu_s, cpus)
    free = max(cpus - threads, 0)
    if others > free + OUTSIDE_CORES:
        reasons.append(
            f"other programs used {others:.1f} of {cpus} cores ({others:.0%} CPU) "
            f"beside its {threads} thread{'s' if threads != 1 else ''}"
        )
    uneven = [
        (p50, p95) for p50, p95 in steps if p95 > STEP_SPREAD * p50 and p95 - p50 > STEP_STALL_MS
    ]
    if uneven:
        p50, p95 = max(uneven, key=lambda s: s[1] / max(s[0], 1e-9))
        reasons.append(f"steps were held up (95th percentile {p95:.0f} ms, median {p50:.1f} ms)")
    return "; ".join(reasons) or None
