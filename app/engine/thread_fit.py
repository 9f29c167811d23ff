"""How many CPU threads the engine's passes get: the cores other programs leave free.

llama.cpp's CPU threads meet at a barrier after every step of a pass and spin while they
wait, so one thread more than the free cores makes every pass wait for the thread the
kernel has set aside for another program. Measured on a 2-core machine, Qwen2.5-Coder-0.5B
F32 target-only: quiet, 2 threads 14.3 tok/s and 1 thread 10.4; with one core kept busy by
another program (``busy_machine steady:0.5``), 2 threads 1.03 tok/s and 1 thread 4.98.

So when the settings leave the thread count to SpecDeck (0), a load measures how many cores
other programs keep busy while it reads the weights (a window that runs anyway) and leaves
them those cores. SpecDeck's own processes (the engine process, its children, and the
window or command line that started it) are not other programs: a quiet machine keeps
every core.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import psutil

from app.engine.config import ModelSpec, usable_cores

MIN_WINDOW_S = 0.1  # shorter windows are too short for the kernel's 10 ms CPU accounting
# cores other programs kept busy during a run: worth saying beside it, and a machine whose
# timings (the cost lines' prices) say more about those programs than about the pair
OUTSIDE_LOAD = 0.5


def others_busy(*outside_cores: float | None) -> bool:
    """Whether any of these readings (None: not measured) had other programs keep
    ``OUTSIDE_LOAD`` cores or more busy."""
    return any(c is not None and c >= OUTSIDE_LOAD for c in outside_cores)


@dataclass(frozen=True)
class ThreadFit:
    """The threads a load chose for its passes, and why, in words."""

    threads: int
    cores: int  # the cores this process may run on
    busy_cores: float | None  # cores other programs kept busy at load; None: not measured
    reason: str
    follows: bool = False  # while answering, the threads follow other programs (ThreadGovernor)


def busy_cpu_seconds(cores: Sequence[int]) -> float | None:
    """CPU seconds all processes have used on ``cores`` since boot (steal time included:
    a hypervisor's other guests take it from this one); None where the OS does not say."""
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


def whole_cores(busy: float) -> int:
    """``busy`` cores to the nearest whole core, a half rounding down (0.5 leaves a core
    free more often than not)."""
    return max(0, math.ceil(busy - 0.5))


def fit_threads(
    cores: int, busy_cores: float | None, *, set_threads: int = 0, window_s: float = 1.0
) -> ThreadFit:
    """The threads for a load: ``set_threads`` when the settings set them, else the cores
    less those other programs kept busy (``busy_cores`` over ``window_s``), at least one."""
    cores = max(cores, 1)
    if set_threads > 0:
        reason = f"{_threads(set_threads)}: set in the settings"
        return ThreadFit(set_threads, cores, busy_cores, reason)
    every = _every_core(cores)
    if busy_cores is None:
        why = "how busy other programs kept them could not be read"
        return ThreadFit(cores, cores, None, f"{every} ({why})")
    if window_s < MIN_WINDOW_S:
        why = "the pair loaded too quickly to judge how busy other programs kept them"
        return ThreadFit(cores, cores, None, f"{every} ({why})")
    threads = max(1, cores - whole_cores(busy_cores))
    if threads == cores:
        return ThreadFit(threads, cores, busy_cores, f"{every} free when the pair loaded")
    kept = f"{busy_cores:.1f} {'core' if f'{busy_cores:.1f}' == '1.0' else 'cores'}"
    return ThreadFit(
        threads,
        cores,
        busy_cores,
        f"{_threads(threads)} of {cores} cores: other programs kept {kept} busy when the pair "
        "loaded",
    )


def _threads(count: int) -> str:
    return f"{count} thread" if count == 1 else f"{count} threads"


def _every_core(cores: int) -> str:
    return f"{cores} threads: all {cores} cores" if cores > 1 else "1 thread: the one core"


def _own_cpu_seconds(app_pid: int | None) -> float:
    """CPU seconds of this process, the children it waited for, and the app that started it
    (the window or the command line: ``app_pid``, else this process's parent): SpecDeck's
    own, not other programs'."""
    me = psutil.Process()
    times = me.cpu_times()
    seconds = times.user + times.system + times.children_user + times.children_system
    try:
        parent = psutil.Process(app_pid) if app_pid is not None else me.parent()
        if parent is not None:
            theirs = parent.cpu_times()
            seconds += theirs.user + theirs.system
    except psutil.Error:  # the parent is gone or not ours to read
        pass
    return seconds


class OtherProgramsMeter:
    """The cores other programs keep busy, from its start to ``fit()``: the machine's busy
    CPU time on this process's cores less SpecDeck's own (``_own_cpu_seconds``), over the
    wall time. Children still running at ``fit()`` count as other programs (a test's load).
    ``app_pid``: the app's process, where it is not this one's parent (an engine process
    forked by a fork server)."""

    def __init__(self, app_pid: int | None = None) -> None:
        self._app_pid = app_pid
        self._cores = usable_cores()
        self.started = time.perf_counter()
        self._busy = busy_cpu_seconds(self._cores)
        self._own = _own_cpu_seconds(app_pid)

    def again(self) -> OtherProgramsMeter:
        """A new window from now, for the same app."""
        return OtherProgramsMeter(self._app_pid)

    def busy_cores(self) -> tuple[float | None, float]:
        """(other programs' busy cores, None where the OS does not say; the window's seconds)."""
        wall = time.perf_counter() - self.started
        busy = busy_cpu_seconds(self._cores)
        if busy is None or self._busy is None or wall <= 0:
            return None, wall
        others = (busy - self._busy) - (_own_cpu_seconds(self._app_pid) - self._own)
        return max(others, 0.0) / wall, wall

    def fit(self, spec: ModelSpec) -> ThreadFit:
        """The threads for ``spec``'s passes: its own count when the settings set one."""
        if spec.n_threads > 0:
            return fit_threads(len(self._cores), None, set_threads=spec.n_threads)
        busy, wall = self.busy_cores()
        return fit_threads(len(self._cores), busy, window_s=wall)


def unmeasured_fit(spec: ModelSpec) -> ThreadFit:
    """The threads for a load that measured nothing: the settings' count, or every core."""
    cores = len(usable_cores())
    if spec.n_threads > 0:
        return fit_threads(cores, None, set_threads=spec.n_threads)
    return ThreadFit(cores, cores, None, _every_core(cores))


class ThreadGovernor:
    """Between steps, the threads of the next passes follow a load other programs hold: the
    cores less those they kept busy, as the load's fit does at load, once they have kept
    them busy for ``SUSTAIN_S``; every core again as soon as a ``WINDOW_S`` reads them free.

    A steady load that starts after the pair loaded (a build, a test run) is what fewer
    threads are for. On a 2-core machine with one core kept busy, a Qwen2.5-Coder-0.5B F32
    target pass took 109-135 ms on one thread and 192-266 ms on two; quiet, 66-85 ms on two
    and 97-114 on one (``python -m app.devtools.thread_passes``, 3 repeats). Bursts of a few
    seconds are not: following them window by window (0.25 s) lowered the bench's
    ``--busy bursts:7`` median speedup to 1.68x from 2.05x and target-only to 7.8 from 8.6
    tok/s, since every change lags the burst and one thread gets a smaller share of a
    contended machine. Passes on fewer threads give the same logits, bit for bit, on the CPU."""

    WINDOW_S = 0.25  # long enough for the kernel's 10 ms CPU accounting to say much
    SUSTAIN_S = 4.0  # longer than the bursts of busy_machine (0.2-3 s)

    def __init__(self, meter: OtherProgramsMeter, cores: int, threads: int) -> None:
        self._meter = meter.again()
        self.cores = max(cores, 1)
        self.threads = threads  # what the passes run on now
        self.fewest = threads  # since the last ``begin``
        self._held_since: float | None = None  # when other programs began holding cores
        self._held_fit = threads  # the most threads any window since then left free

    def begin(self) -> None:
        """A new answer: ``fewest`` counts from here."""
        self.fewest = self.threads

    def tick(self) -> int | None:
        """The threads for the next passes when they should change (else None); reads the
        machine once a window, and nothing in between."""
        meter = self._meter
        if time.perf_counter() - meter.started < self.WINDOW_S:
            return None
        busy, _ = meter.busy_cores()
        self._meter = meter.again()
        if busy is None:
            return None
        fit = max(1, self.cores - whole_cores(busy))
        if fit >= self.threads:  # as many cores free as the passes use, or more: take them
            self._held_since = None
            return self._change(fit)
        if self._held_since is None:
            self._held_since, self._held_fit = meter.started, fit
        self._held_fit = max(self._held_fit, fit)
        if self._meter.started - self._held_since < self.SUSTAIN_S:
            return None
        self._held_since = None
        return self._change(self._held_fit)

    def _change(self, threads: int) -> int | None:
        if threads == self.threads:
            return None
        self.threads = threads
        self.fewest = min(self.fewest, threads)
        return threads


def with_threads(spec: ModelSpec, fit: ThreadFit) -> ModelSpec:
    """``spec`` with the fitted thread count where its settings left the count to SpecDeck."""
    return spec if spec.n_threads > 0 else replace(spec, n_threads=fit.threads)
