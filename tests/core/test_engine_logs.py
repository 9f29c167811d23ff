"""The engine process's log in the temporary folder: nothing is left there when the parent
is killed outright (the log has no name while the engine runs), llama.cpp's last words still
reach the crash report, and logs that kept a name (Windows, an older SpecDeck) are removed at
the next start once their maker is gone, while those of engines that still run are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from app.engine.config import DraftSource, ModelSpec
from app.engine.process.host import EngineCrashed, EngineHost, LoadRequest
from app.engine.process.logs import HANDS_OVER_FILES, UNOWNED_LOG_AGE_S, clean_stale_logs
from tests.crash_ggufs import write_bert_tokenizer_llama

ROOT = Path(__file__).resolve().parents[2]
PARENT = (
    "import time\n"
    "from app.engine.process.host import EngineHost\n"
    "host = EngineHost()\n"
    "host.start()\n"
    "print(host.pid, flush=True)\n"
    "time.sleep(300)\n"
)


def _logs(folder: Path) -> set[Path]:
    return set(folder.glob("specdeck-engine-*"))


def _stderr_in(pid: int, folder: Path) -> str:
    """Where process ``pid`` writes its stderr (Linux), once the engine has sent it into
    ``folder`` (it starts on the parent's stderr)."""
    deadline = time.monotonic() + 60
    target = os.readlink(f"/proc/{pid}/fd/2")
    while not target.startswith(str(folder)) and time.monotonic() < deadline:
        time.sleep(0.05)
        target = os.readlink(f"/proc/{pid}/fd/2")
    return target


@pytest.fixture
def temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_parent_killed_outright_leaves_no_engine_log(temp_folder: Path) -> None:
    env = {**os.environ, "TMPDIR": str(temp_folder), "TEMP": str(temp_folder)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        engine = psutil.Process(int(parent.stdout.readline()))
        # the engine writes its native messages into a log in that folder, which has no name
        log = _stderr_in(engine.pid, temp_folder)
        assert log.startswith(f"{temp_folder}{os.sep}specdeck-engine-"), log
        assert log.endswith(" (deleted)") and _logs(temp_folder) == set()
    finally:
        parent.kill()  # SIGKILL: no atexit, no cleanup in the parent
        parent.wait(10)
    deadline = time.monotonic() + 10
    while engine.is_running() and engine.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the engine outlived its parent"
        time.sleep(0.01)
    assert _logs(temp_folder) == set()


def test_a_crash_report_still_carries_what_llama_cpp_wrote(temp_folder: Path) -> None:
    bad = write_bert_tokenizer_llama(temp_folder.parent / "bert-vocab.gguf")
    host = EngineHost()
    try:
        with pytest.raises(EngineCrashed) as crash:
            host.load(LoadRequest(ModelSpec(str(bad), n_threads=1), None, DraftSource.NGRAM))
        if HANDS_OVER_FILES:
            assert _logs(temp_folder) == set()
    finally:
        host.close()
    assert 'llama.cpp said: "llama-vocab.cpp:' in str(crash.value)
    assert _logs(temp_folder) == set()


def test_a_named_log_of_a_killed_parent_is_removed_at_the_next_start(temp_folder: Path) -> None:
    """Where a log keeps its name (Windows, an older SpecDeck), the next start removes it
    once its maker is gone, and keeps the log of a maker that still runs."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    killed_log = temp_folder / f"specdeck-engine-{int(gone.stdout)}-abc.log"
    killed_log.write_text("llama.cpp said something\n")
    live_log = temp_folder / f"specdeck-engine-{os.getpid()}-live.log"
    live_log.write_text("")
    host = EngineHost()
    try:
        host.start()
        assert not killed_log.exists() and live_log.exists()
    finally:
        host.close()


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
