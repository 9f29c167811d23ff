"""The memory the loaded pair takes: this process and the engine process together, where the
models live (the pair bar and the status bar show it after each load and answer), and the
cyclic collector kept off what lives with the pair."""

from __future__ import annotations

import gc

import psutil


def process_rss(pid: int | None = None) -> int | None:
    """Resident memory of this process, or of process ``pid`` (the engine process)."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError):
        return None


def memory_in_use(engine_pid: int | None) -> int | None:
    """This process's resident memory, plus the engine process's when both are known."""
    rss = process_rss()
    engine_rss = process_rss(engine_pid) if engine_pid else None
    if rss is not None and engine_rss is not None:
        rss += engine_rss  # the models live in the engine process
    return rss


class CollectorFreeze:
    """Out of the cyclic collector's reach, what is alive when a pair loads (Qt wrappers,
    numpy buffers, the engine client) is not scanned while tokens stream (31 ms pauses
    otherwise). A frozen cycle is never collected, so what the last load froze is unfrozen
    first: the last pair's and old conversations' cycles go, not stay for good."""

    def __init__(self) -> None:
        self._froze = False

    def after_load(self) -> None:
        if self._froze:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._froze = True
