"""The engine process's log file (its native messages), and the logs killed parents left.

``EngineHost`` makes one log per engine process in the temporary folder. On POSIX the file's
name is removed at once: the parent keeps the file open to read its tail after a crash, and
the child is handed the open file (``ChildLog``) as its stderr, so the log lives exactly as
long as one of the two holds it, and nothing is left in the folder however they end, a
parent killed with SIGKILL included. Where an open file cannot be handed over (Windows) the
log keeps its name, ``specdeck-engine-<pid>-<random>.log``, and every new one first removes
the logs whose maker is gone, as it does for the logs an older SpecDeck left. A live maker's
log is never touched, not even another SpecDeck's.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from multiprocessing import reduction
from pathlib import Path
from typing import Any

import psutil

LOG_PREFIX = "specdeck-engine-"
LOG_SUFFIX = ".log"
# Logs named before they carried their maker's pid: removed once nothing wrote them for a day.
UNOWNED_LOG_AGE_S = 24 * 3600.0
_OWNED = re.compile(rf"{re.escape(LOG_PREFIX)}(\d+)-[^/\\]*{re.escape(LOG_SUFFIX)}")
# An open file travels to a spawned or forked engine on POSIX only (``reduction.DupFd``).
HANDS_OVER_FILES = os.name == "posix" and hasattr(reduction, "DupFd")


class ChildLog:
    """The engine process's end of its log, pickled into it when it starts: the open
    file itself where it can travel (its name is gone by then), else the file's name."""

    def __init__(self, fd: int | None, path: str) -> None:
        self.fd = fd
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        if self.fd is None:
            return (ChildLog, (None, self.path))
        return (_received, (reduction.DupFd(self.fd), self.path))

    def open(self) -> int:
        """A descriptor that appends to the log (the caller closes it)."""
        if self.fd is None:
            return os.open(self.path, os.O_WRONLY | os.O_APPEND)
        fd, self.fd = self.fd, None
        return fd


def _received(duplicate: Any, path: str) -> ChildLog:
    return ChildLog(duplicate.detach(), path)


class EngineLog:
    """The parent's end of one engine process's log: read for its tail after a crash,
    closed (and, where it still has a name, removed) when that process has ended."""

    def __init__(self, fd: int, path: Path | None) -> None:
        self.fd: int | None = fd
        self.path = path  # None: already nameless, so nothing can be left in the folder

    def for_child(self) -> ChildLog:
        if self.fd is None:
            raise ValueError("the log is closed")
        return ChildLog(self.fd if self.path is None else None, str(self.path or ""))

    def tail(self, limit: int) -> str:
        """The last ``limit`` bytes written, as text ("" when it cannot be read)."""
        if self.fd is None:
            return ""
        try:
            start = max(0, os.fstat(self.fd).st_size - limit)
            if hasattr(os, "pread"):
                data = os.pread(self.fd, limit, start)
            else:  # Windows: the child writes through its own handle, so the offset is ours
                os.lseek(self.fd, start, os.SEEK_SET)
                data = os.read(self.fd, limit)
        except OSError:
            return ""
        return data.decode("utf-8", errors="replace")

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def new_log(directory: Path | None = None) -> EngineLog:
    """An empty log for a new engine process, after removing the stale ones; nameless at
    once where the open file can be handed to the child."""
    clean_stale_logs(directory)
    fd, name = tempfile.mkstemp(
        prefix=f"{LOG_PREFIX}{os.getpid()}-", suffix=LOG_SUFFIX, dir=directory
    )
    if HANDS_OVER_FILES:
        try:
            os.unlink(name)
        except OSError:
            return EngineLog(fd, Path(name))  # kept by name: removed like a Windows log
        return EngineLog(fd, None)
    return EngineLog(fd, Path(name))


def _maker_alive(pid: int, written: float) -> bool:
    """Whether the process that made a log last written at ``written`` may still run: a
    process with that pid that started later is another one that reused the number."""
    try:
        return psutil.Process(pid).create_time() <= written + 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # not ours to inspect: leave its log alone
        return True


def clean_stale_logs(directory: Path | None = None) -> list[Path]:
    """Remove the logs in ``directory`` (the temporary folder) whose maker is gone; returns
    them. A file that cannot be inspected or removed is skipped."""
    folder = directory if directory is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = list(folder.glob(f"{LOG_PREFIX}*{LOG_SUFFIX}"))
    except OSError:
        return removed
    now = time.time()
    for path in candidates:
        with contextlib.suppress(OSError):
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            owned = _OWNED.fullmatch(path.name)
            if owned is not None:
                if _maker_alive(int(owned.group(1)), info.st_mtime):
                    continue
            elif now - info.st_mtime < UNOWNED_LOG_AGE_S:
                continue
            path.unlink()
            removed.append(path)
    return removed
