"""The Lab runs every engine in an engine process, as the chat does: a GGUF that aborts
llama.cpp, a chat template that loops for ever and an engine that ignores Cancel each end
with a message, on the command line and in the Lab tab, and closing the window during a run
returns within two seconds. Real llama.cpp, real engine processes, real Qt widgets."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.engine.process import host as engine_host
from app.store.settings import Settings
from app.ui.lab_tab import LabTab
from tests.crash_ggufs import write_bert_tokenizer_llama, write_hung_template_llama
from tests.processes import engine_processes, gone, run_app
from tests.ui.conftest import (  # noqa: F401 - fixtures: offscreen windows, leak check
    isolated,
    make_window,
    no_live_threads_or_timers,
)


def _lab_run(target: Path, out: Path) -> list[str]:
    return ["lab", "run", "--target", str(target), "--config", "ng:ngram", "--suite", "code",
            "--ctx", "1024", "--threads", "1", "--max-tokens", "16", "--out", str(out)]  # fmt: skip


def test_lab_run_reports_a_gguf_that_aborts_llama_cpp(tmp_path: Path) -> None:
    bad = write_bert_tokenizer_llama(tmp_path / "bert-vocab.gguf")
    done, _ = run_app(_lab_run(bad, tmp_path / "r.jsonl"), timeout_s=120)
    assert done.returncode == 2, done.stderr  # an error, not SIGABRT (134) with no word
    said = "error: the engine process (llama.cpp) died while loading bert-vocab.gguf"
    assert said in done.stderr and "not supported by this llama.cpp build" in done.stderr


def test_lab_run_holds_a_looping_chat_template_to_the_chats_bound(tmp_path: Path) -> None:
    hung = write_hung_template_llama(tmp_path / "hung-template.gguf")
    done, seconds = run_app(_lab_run(hung, tmp_path / "r.jsonl"), timeout_s=120)
    assert done.returncode == 2, done.stderr
    said = "error: broken chat template in hung-template.gguf: rendering did not finish within 5 s"
    assert said in done.stderr
    assert seconds < 60  # start-up and load, then the 5 s bound


def _tab(qtbot, target: Path, tmp_path: Path, configs: str = "ng:ngram") -> LabTab:  # noqa: ANN001
    tab = LabTab(Settings(target_path=str(target)), results_dir=tmp_path)
    qtbot.addWidget(tab)
    _plan(tab, configs)
    tab.show()
    return tab


def _plan(tab: LabTab, configs: str) -> None:
    for row in range(tab.suites.count()):
        item = tab.suites.item(row)
        checked = item.text() in ("code", "chat")
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
    tab.configs.setPlainText(configs)
    tab.max_tokens.setValue(16)


def _engine_ready(tab: LabTab) -> bool:
    """An engine process of the run has loaded its pair (and renders the first prompt)."""
    runner = getattr(tab.worker, "runner", None)
    return runner is not None and any(h.info is not None for h in runner.pool.hosts.values())


def test_a_gguf_that_aborts_llama_cpp_ends_the_run_not_the_window(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    bad = write_bert_tokenizer_llama(tmp_path / "bert-vocab.gguf")
    tab = _tab(qtbot, bad, tmp_path)
    with qtbot.waitSignal(tab.run_finished, timeout=120_000) as ended:
        assert tab.start()
    error = ended.args[0].error or ""
    assert "the engine process (llama.cpp) died while loading bert-vocab.gguf" in error
    assert "died while loading bert-vocab.gguf" in tab.message.text()
    assert not tab.running and tab.run_button.isEnabled() and tab.isVisible()
    assert engine_processes(os.getpid()) == []


def test_closing_the_window_during_a_looping_template_returns_within_two_seconds(
    make_window,  # noqa: ANN001, F811 - a fixture imported from tests.ui.conftest
    qtbot,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    hung = write_hung_template_llama(tmp_path / "hung-template.gguf")
    window = make_window(Settings(target_path=str(hung)), autoload=False)
    tab = window.lab
    tabs = [window.side.tabText(i) for i in range(window.side.count())]
    window.side.setCurrentIndex(tabs.index("Lab"))  # where Run is
    tab.results_dir = tmp_path
    _plan(tab, "ng:ngram")
    assert tab.start()
    qtbot.waitUntil(lambda: _engine_ready(tab), timeout=60_000)
    engines = engine_processes(os.getpid())
    assert engines
    qtbot.wait(300)  # well inside the template now
    began = time.monotonic()
    window.close()
    assert time.monotonic() - began < 2.0
    assert not tab.running and all(gone(p) for p in engines)


def test_cancel_stops_a_looping_template(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    tab = _tab(qtbot, write_hung_template_llama(tmp_path / "hung-template.gguf"), tmp_path)
    assert tab.start()
    qtbot.waitUntil(lambda: _engine_ready(tab), timeout=60_000)
    with qtbot.waitSignal(tab.run_finished, timeout=10_000) as ended:
        qtbot.mouseClick(tab.cancel_button, Qt.MouseButton.LeftButton)
    assert "broken chat template in hung-template.gguf" in (ended.args[0].error or "")
    assert not tab.running and engine_processes(os.getpid()) == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_cancel_stops_a_run_whose_engine_ignores_it(
    qtbot,  # noqa: ANN001
    looping_models,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_host, "STOP_GRACE_SECONDS", 1.0)  # the real grace is 10 s
    monkeypatch.setattr(engine_host, "CLOSE_SECONDS", 1.0)  # and 10 s to close the other one
    configs = f"agrees:draft={looping_models['agrees']},n=8\nng:ngram,n=8"
    tab = _tab(qtbot, looping_models["target"], tmp_path, configs)
    assert tab.start()
    qtbot.waitUntil(lambda: tab.progress.value() >= 1, timeout=120_000)
    engines = engine_processes(os.getpid())
    assert len(engines) == 2
    for engine in engines:  # as if stuck inside llama.cpp: Cancel cannot reach them
        engine.send_signal(signal.SIGSTOP)
    began = time.monotonic()
    with qtbot.waitSignal(tab.run_finished, timeout=30_000) as ended:
        qtbot.mouseClick(tab.cancel_button, Qt.MouseButton.LeftButton)
    assert time.monotonic() - began < 10.0  # the grace, then closing the other one
    error = ended.args[0].error
    assert error is None or "did not respond to" in error, error
    assert not ended.args[0].finished and all(gone(p) for p in engines)
    assert tab.resume_button.isEnabled()  # finished prompts are kept
