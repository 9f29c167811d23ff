"""The memory the loaded pair takes: this process and the engine process together, where the
models live. The pair bar and the status bar show it after each load and answer."""

from __future__ import annotations

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
