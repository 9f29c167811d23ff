"""The Lab tab (pytest-qt, offscreen): a run off the UI thread, cancel and resume, the verdict,
the plot, Apply to chat, and the tab inside the main window."""

from __future__ import annotations

import json
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.lab.results import ResultLog
from app.store.settings import Settings
from app.ui.lab_tab import LabTab
from tests.ui.conftest import (  # noqa: F401 - fixtures: offscreen windows, leak check
    isolated,
    make_window,
    no_live_threads_or_timers,
)


def _tab(qtbot, models: dict[str, Path], tmp_path: Path, categories: set[str]) -> LabTab:  # noqa: ANN001
    # one thread: a shared CPU's other work then slows both sides of a comparison alike
    settings = Settings(target_path=str(models["target"]), n_threads=1)
    tab = LabTab(settings, results_dir=tmp_path)
    qtbot.addWidget(tab)
    for row in range(tab.suites.count()):
        item = tab.suites.item(row)
        item.setCheckState(
            Qt.CheckState.Checked if item.text() in categories else Qt.CheckState.Unchecked
        )
    tab.configs.setPlainText(f"agrees:draft={models['agrees']},n=8\nng:ngram,n=8")
    tab.max_tokens.setValue(24)
    tab.resize(900, 1000)
    tab.show()
    return tab


def _scatter_points(tab: LabTab) -> int:
    return sum(
        len(item.data)
        for item in tab.plot.getPlotItem().items
        if isinstance(item, pg.ScatterPlotItem)
    )


def test_lab_tab_runs_shows_the_verdict_and_applies_to_chat(
    qtbot,
    looping_models,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    tab = _tab(qtbot, looping_models, tmp_path, {"code", "math"})
    # planted numbers: one draft agrees with every target token, the other with none, so
    # the agreeing one is the best and clears the claimed 1.3× (it measures about 2×)
    tab.configs.setPlainText(
        f"agrees:draft={looping_models['agrees']},n=8\n"
        f"disagrees:draft={looping_models['disagrees']},n=16,guard=off,lookup=off"
    )
    assert tab.plan().target.n_threads == 1  # the chat's thread count
    with qtbot.waitSignal(tab.run_finished, timeout=180_000) as blocker:
        assert tab.start()
        assert tab.running and not tab.run_button.isEnabled() and tab.cancel_button.isEnabled()
    assert blocker.args[0].finished and blocker.args[0].error is None
    assert not tab.running and tab.run_button.isEnabled()
    analysis = tab.analysis
    assert analysis is not None
    assert _scatter_points(tab) == len(analysis.rows) > 0
    assert tab.progress.value() == tab.progress.maximum() > 0
    assert (analysis.verdict.status, analysis.verdict.config) == ("confirmed", "agrees")
    assert tab.verdict.text().startswith("CONFIRMED: agrees is at least 1.3×"), tab.verdict.text()
    assert tab.table.rowCount() == len(analysis.cells)
    assert tab.recommendation.count() == 2
    assert tab.apply_button.isEnabled()
    with qtbot.waitSignal(tab.apply_requested) as applied:
        qtbot.mouseClick(tab.apply_button, Qt.MouseButton.LeftButton)
    assert tab.recommendation.currentData() == "agrees"
    assert applied.args[0] == {
        "temperature": 0.0,
        "draft_adaptive": False,
        "draft_max": 8,
        "p_min": 0.0,
        "rule": "rejection",
        "draft_source": "model",
        "draft_path": str(looping_models["agrees"]),
    }
    tab.grab().save(str(tmp_path / "lab_tab.png"))


def test_cancel_keeps_finished_prompts_and_resume_completes(
    qtbot,
    looping_models,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    tab = _tab(qtbot, looping_models, tmp_path, {"code", "chat"})
    with qtbot.waitSignal(tab.run_finished, timeout=180_000) as blocker:
        tab.start()
        qtbot.waitUntil(lambda: tab.progress.value() >= 1, timeout=120_000)
        qtbot.mouseClick(tab.cancel_button, Qt.MouseButton.LeftButton)
    assert not blocker.args[0].finished and "cancelled" in tab.eta.text()
    path = tab.log_path
    assert path is not None
    kept = ResultLog.open(path).done_groups()
    assert kept and not ResultLog.open(path).finished
    assert tab.resume_button.isEnabled()
    with qtbot.waitSignal(tab.run_finished, timeout=180_000) as blocker:
        qtbot.mouseClick(tab.resume_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0].finished
    log = ResultLog.open(path)
    assert log.finished and kept <= log.done_groups()
    assert len(log.of_kind("prompt")) == len(log.done_groups())  # nothing ran twice
    assert not tab.resume_button.isEnabled()


def test_a_plan_that_cannot_run_says_why(qtbot, looping_models, tmp_path: Path) -> None:  # noqa: ANN001
    tab = _tab(qtbot, looping_models, tmp_path, {"code"})
    tab.configs.setPlainText("broken:colour=red")
    assert not tab.start() and not tab.running
    assert "Cannot run" in tab.message.text() and "colour=red" in tab.message.text()
    tab.configs.setPlainText(f"x:draft={tmp_path / 'missing.gguf'}")
    assert not tab.start() and "not found" in tab.message.text()
    tab.target.setText(str(tmp_path / "nope.gguf"))
    assert not tab.start() and "choose a target model" in tab.message.text()
    assert list(tmp_path.glob("*.jsonl")) == []


def test_main_window_has_the_lab_tab_and_applies_its_recommendation(
    make_window,  # noqa: F811 - a fixture imported from tests.ui.conftest
    isolated,  # noqa: F811, ANN001
    looping_models,
) -> None:
    window = make_window(Settings(target_path=str(looping_models["target"])), autoload=False)
    tabs = [window.side.tabText(i) for i in range(window.side.count())]
    assert "Lab" in tabs
    assert window.lab.target.text() == str(looping_models["target"])
    window.lab.apply_requested.emit(
        {
            "temperature": 0.0,
            "draft_adaptive": False,
            "draft_max": 6,
            "p_min": 0.0,
            "rule": "match",
            "draft_source": "ngram",
        }
    )
    saved = json.loads((isolated / "config" / "settings.json").read_text())
    assert (saved["draft_max"], saved["draft_adaptive"], saved["rule"]) == (6, False, "match")
