"""The engine process's log in the temporary folder: a parent killed outright leaves it, and
the next engine start removes it, while the logs of engines that still run are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from app.engine.engine_host import EngineHost
from app.engine.engine_logs import UNOWNED_LOG_AGE_S, clean_stale_logs

ROOT = Path(__file__).resolve().parents[2]
PARENT = (
    "import time\n"
    "from app.engine.engine_host import EngineHost\n"
    "host = EngineHost()\n"
    "host.start()\n"
    "print('started', flush=True)\n"
    "time.sleep(300)\n"
)


def _logs(folder: Path) -> set[Path]:
    return set(folder.glob("specdeck-engine-*.log"))


def _parent(folder: Path) -> tuple[subprocess.Popen[str], Path]:
    """A SpecDeck-like parent process with a running engine; returns it and its log."""
    before = _logs(folder)
    env = {**os.environ, "TMPDIR": str(folder), "TEMP": str(folder), "TMP": str(folder)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    process = subprocess.Popen(
        [sys.executable, "-c", PARENT], env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "started"
    (made,) = _logs(folder) - before
    return process, made


@pytest.fixture
def temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_killed_parents_log_is_removed_at_the_next_start(temp_folder: Path) -> None:
    killed, killed_log = _parent(temp_folder)
    live, live_log = _parent(temp_folder)
    try:
        killed.kill()  # no atexit, no cleanup: the log stays behind
        killed.wait(10)
        assert killed_log.exists()
        host = EngineHost()
        try:
            host.start()
            logs = _logs(temp_folder)
            assert killed_log not in logs  # its maker is gone
            assert live_log in logs  # a running engine keeps its log
            assert len(logs) == 2  # and this one's own
        finally:
            host.close()
    finally:
        live.kill()
        live.wait(10)


def test_stale_logs_are_told_by_their_maker_or_their_age(temp_folder: Path) -> None:
    now = time.time()
    day_old = now - UNOWNED_LOG_AGE_S - 60

    def log(name: str, written: float) -> Path:
        path = temp_folder / name
        path.write_text("llama.cpp said something\n")
        os.utime(path, (written, written))
        return path

    mine = log(f"specdeck-engine-{os.getpid()}-live.log", now)
    # this pid, written before this process started: another process that had the number
    reused = log(f"specdeck-engine-{os.getpid()}-reused.log", day_old)
    old_style = log("specdeck-engine-k2j4_x9a.log", day_old)  # no pid in the name, a day old
    fresh_old_style = log("specdeck-engine-p0q1_r2s.log", now)
    other = log("unrelated-engine-1.log", day_old)
    removed = clean_stale_logs(temp_folder)
    assert sorted(removed) == sorted([reused, old_style])
    assert mine.exists() and fresh_old_style.exists() and other.exists()
