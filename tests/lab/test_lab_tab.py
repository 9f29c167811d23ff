"""The Lab tab (pytest-qt, offscreen): a run off the UI thread, cancel and resume, the verdict,
the plot, recommendations and Apply to chat (asked first), the shared table, and the tab inside
the main window."""

from __future__ import annotations

import json
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox

from app.lab.report import CELL_COLUMNS, cell_columns, ordered_cells
from app.lab.results import ResultLog
from app.lab.stats import MIN_HELD_OUT_RUNS
from app.store.settings import Settings
from app.ui.lab_tab import LabTab
from tests.lab import planted
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
    tab.repeats.setValue(1)  # quick: a test's own choice, not the newcomer's default
    tab.resize(900, 1000)
    tab.show()
    return tab


def _scatter_points(tab: LabTab) -> int:
    return sum(
        len(item.data)
        for item in tab.plot.getPlotItem().items
        if isinstance(item, pg.ScatterPlotItem)
    )


def test_lab_tab_runs_and_shows_the_verdict(
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
    tab.repeats.setValue(2)  # three held-out prompts twice: enough runs to judge the claim
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
    if not analysis.verdict.disturbed:  # under outside load the verdict rightly says rerun
        assert (analysis.verdict.status, analysis.verdict.config) == ("confirmed", "agrees")
        text = tab.verdict.text()
        assert text.startswith("CONFIRMED: agrees is at least 1.3×"), text
    else:
        assert tab.verdict.text().startswith("MEASURED UNDER OUTSIDE LOAD"), tab.verdict.text()
    assert tab.table.rowCount() == len(analysis.cells)
    assert tab.recommendation.count() == 2
    # one or two held-out prompts per category: too few runs to recommend anything
    for index, rec in enumerate(analysis.recommendations):
        assert tab.recommendation.itemText(index) == rec.describe()
        assert rec.use == "no recommendation" or rec.confirmed_speedup.n >= MIN_HELD_OUT_RUNS
    assert tab.apply_button.isEnabled() == bool(tab.recommendation.currentData())
    tab.grab().save(str(tmp_path / "lab_tab.png"))


def test_a_falsified_claim_leaves_nothing_to_apply(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    """As found: FALSIFIED ngram beside "code: ngram — confirmed 1.05× on held-out prompts"
    from two runs, and Apply switched the chat to n-gram without a word."""
    tab = LabTab(Settings(), results_dir=tmp_path)
    qtbot.addWidget(tab)
    tab.show_results(planted.falsified_ngram(tmp_path))
    assert "FALSIFIED: ngram" in tab.verdict.text()
    texts = [tab.recommendation.itemText(i) for i in range(tab.recommendation.count())]
    assert texts and all(
        ": no recommendation — the claim about ngram was falsified" in t for t in texts
    )
    assert not tab.apply_button.isEnabled()
    labels = [w.text() for w in tab.findChildren(QLabel)]
    assert f"Recommended (≥ {MIN_HELD_OUT_RUNS} held-out runs)" in labels


def test_apply_asks_first_naming_what_changes_in_the_chat(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    chat = Settings(draft_path="/home/someone/models/draft-q2.gguf", rule="match")
    tab = LabTab(Settings(), results_dir=tmp_path, chat_settings=lambda: chat)
    qtbot.addWidget(tab)
    tab.show()
    tab.show_results(planted.confirmed_ngram(tmp_path))
    assert tab.recommendation.currentText().startswith("code: ngram — confirmed 1.4")
    assert tab.apply_button.isEnabled()
    with qtbot.assertNotEmitted(tab.apply_requested):
        qtbot.mouseClick(tab.apply_button, Qt.MouseButton.LeftButton)
        box = tab.apply_box
        assert box is not None and box.isVisible()
        assert box.textFormat() == Qt.TextFormat.PlainText
        text = box.text()
        assert "Make the chat draft with ngram?" in text
        assert "drafting: draft model → n-gram (prompt lookup)" in text
        assert "acceptance rule: match → rejection" in text
        assert "temperature" not in text  # unchanged settings are not listed
        assert "The pair reloads with the new drafting." in text
        qtbot.mouseClick(box.button(QMessageBox.StandardButton.Cancel), Qt.MouseButton.LeftButton)
    assert tab.apply_box is None
    with qtbot.waitSignal(tab.apply_requested) as applied:
        qtbot.mouseClick(tab.apply_button, Qt.MouseButton.LeftButton)
        box = tab.apply_box
        assert box is not None
        qtbot.mouseClick(box.button(QMessageBox.StandardButton.Apply), Qt.MouseButton.LeftButton)
    assert applied.args[0] == {
        "temperature": 0.0,
        "draft_adaptive": True,
        "draft_max": 16,
        "p_min": 0.0,
        "rule": "rejection",
        "draft_source": "ngram",
    }


def test_the_table_shows_the_shared_columns_and_flags_rows_under_load(
    qtbot,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    tab = LabTab(Settings(), results_dir=tmp_path)
    qtbot.addWidget(tab)
    path = planted.confirmed_ngram(tmp_path, busy_prompts=frozenset({"held2"}))
    tab.show_results(path)
    analysis = tab.analysis
    assert analysis is not None
    headers = [tab.table.horizontalHeaderItem(c).text() for c in range(tab.table.columnCount())]
    assert tuple(headers) == CELL_COLUMNS
    shown = [
        tuple(tab.table.item(r, c).text() for c in range(tab.table.columnCount()))
        for r in range(tab.table.rowCount())
    ]
    assert shown == [cell_columns(c) for c in ordered_cells(analysis)]  # the CLI's rows too
    host = CELL_COLUMNS.index("host ms/token")
    assert {row[host] for row in shown} == {"0.550"}
    load = CELL_COLUMNS.index("outside load")
    assert [row[load] for row in shown if row[0] == "confirmation"] == ["1 of 6 runs: rerun"] * 2
    assert tab.verdict.text().count("MEASURED UNDER OUTSIDE LOAD: RERUN") == 1
    assert "no recommendation — measured under outside load: rerun" in (
        tab.recommendation.currentText()
    )
    assert not tab.apply_button.isEnabled()


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
