"""The engine process's log file (its native messages), and the logs killed parents left.

``EngineHost`` makes one log per engine process in the temporary folder and removes it when
that process ends. A parent killed outright cannot, so each log is named after the process
that made it (``specdeck-engine-<pid>-<random>.log``) and every new one first removes the
logs whose maker is gone. A live maker's log is never touched, not even another SpecDeck's.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from pathlib import Path

import psutil

LOG_PREFIX = "specdeck-engine-"
LOG_SUFFIX = ".log"
# Logs named before they carried their maker's pid: removed once nothing wrote them for a day.
UNOWNED_LOG_AGE_S = 24 * 3600.0
_OWNED = re.compile(rf"{re.escape(LOG_PREFIX)}(\d+)-[^/\\]*{re.escape(LOG_SUFFIX)}")


def new_log(directory: Path | None = None) -> Path:
    """An empty log for a new engine process, after removing the stale ones."""
    clean_stale_logs(directory)
    handle, name = tempfile.mkstemp(
        prefix=f"{LOG_PREFIX}{os.getpid()}-", suffix=LOG_SUFFIX, dir=directory
    )
    os.close(handle)
    return Path(name)


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
