"""The Lab for a newcomer (issue 33 §4): the loaded pair is the starting configuration, the
default repeats can lead to a recommendation (and the tab says what to raise when they
cannot), Apply says why it is off, a new run clears the last verdict, and the verdict wraps
within a narrow dock instead of running past its edge. pytest-qt, offscreen; the words
themselves Qt-free."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QScrollArea

from app.lab.stats import MIN_HELD_OUT_RUNS
from app.lab.suites import BUILTIN_CATEGORIES, builtin
from app.store.settings import Settings
from app.ui.lab_start import held_out, runs_note
from app.ui.lab_tab import LabTab
from tests.lab import planted
from tests.lab.test_lab_narrow import NARROW_DOCK, _write_results
from tests.ui.conftest import (  # noqa: F401 - fixtures: offscreen windows, leak check
    isolated,
    load,
    make_window,
    no_live_threads_or_timers,
)


def _tab(qtbot, settings: Settings | None = None, **kwargs: object) -> LabTab:  # noqa: ANN001
    tab = LabTab(settings or Settings(), **kwargs)  # type: ignore[arg-type]
    qtbot.addWidget(tab)
    return tab


def _only(tab: LabTab, categories: set[str]) -> None:
    for row in range(tab.suites.count()):
        item = tab.suites.item(row)
        checked = item.text() in categories
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)


def test_the_words_about_runs() -> None:
    held = held_out(builtin(list(BUILTIN_CATEGORIES)))
    assert min(held.values()) == 1 and set(held) <= set(BUILTIN_CATEGORIES)
    assert runs_note(Counter(), 3) == ""
    assert runs_note(Counter({"code": 2, "chat": 1}), 5) == (
        f"Every category can be recommended: a recommendation needs {MIN_HELD_OUT_RUNS} "
        "held-out runs, and the fewest, chat gets 1 held-out prompt × 5 repeats = 5."
    )
    assert runs_note(Counter({"code": 2}), 1) == (
        "Too few runs for a recommendation: code gets 2 held-out prompts × 1 repeat = 2 "
        f"held-out runs, and a recommendation needs {MIN_HELD_OUT_RUNS}. Raise repeats to 3."
    )


def test_the_loaded_pair_becomes_the_starting_configuration_unless_edited(
    make_window,  # noqa: F811
    qtbot,  # noqa: ANN001
    tiny_pair,  # noqa: ANN001
) -> None:
    """As found: on first start the Target was empty and the only configuration
    ``ngram:ngram`` until a restart."""
    target, draft = tiny_pair
    window = make_window(Settings(n_threads=1, n_ctx=512), autoload=False)
    lab = window.lab
    assert lab.target.text() == "" and lab.configs.toPlainText() == "ngram:ngram"
    load(window, qtbot, target, draft)
    assert lab.target.text() == str(target)
    lines = lab.configs.toPlainText().splitlines()
    assert lines[:2] == [f"adaptive:draft={draft}", f"fixed8:draft={draft},n=8"]
    assert lines[-1] == "ngram:ngram"

    lab.configs.setPlainText("mine:ngram,n=4")  # the person's own: kept from now on
    lab.follow_pair(str(draft), None)
    assert lab.target.text() == str(draft)  # the target field was not edited: it follows
    assert lab.configs.toPlainText() == "mine:ngram,n=4"
    lab.target.setText("/models/chosen.gguf")
    lab.follow_pair(str(target), str(draft))
    assert lab.target.text() == "/models/chosen.gguf"


def test_default_repeats_can_lead_to_a_recommendation_and_the_tab_says_what_to_raise(
    qtbot,  # noqa: ANN001
) -> None:
    """As found: repeats 1 gave one held-out run per category, so Apply could never come on,
    and nothing said to raise the repeats."""
    tab = _tab(qtbot)
    held = held_out(builtin(list(BUILTIN_CATEGORIES)))
    assert min(held.values()) * tab.repeats.value() >= MIN_HELD_OUT_RUNS
    assert tab.runs_note.text().startswith("Every category can be recommended")
    _only(tab, {"code"})  # two held-out prompts: three repeats are enough
    assert tab.repeats.value() == 3
    tab.repeats.setValue(1)  # the person's choice is kept, and its meaning said
    assert tab.runs_note.text().endswith("a recommendation needs 5. Raise repeats to 3.")
    _only(tab, set(BUILTIN_CATEGORIES))
    assert tab.repeats.value() == 1
    assert tab.runs_note.text().endswith("Raise repeats to 5.")


def test_apply_says_why_it_is_off(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    tab = _tab(qtbot, results_dir=tmp_path)
    tab.show()
    assert not tab.apply_button.isEnabled()
    assert tab.apply_note.text() == "Apply is off: nothing has run yet."
    tab.show_results(planted.confirmed_ngram(tmp_path / "few", held_out=MIN_HELD_OUT_RUNS - 1))
    assert not tab.apply_button.isEnabled() and tab.apply_note.isVisible()
    note = tab.apply_note.text()
    assert note.startswith("Apply is off: code: no recommendation — ngram ran at "), note
    assert "needs at least 5 (raise repeats to 2, or add prompts)" in note
    assert "TOO FEW RUNS to judge" in tab.verdict.text()
    tab.show_results(planted.confirmed_ngram(tmp_path / "enough"))
    assert tab.apply_button.isEnabled() and tab.apply_note.isHidden()


def test_a_new_run_clears_the_last_verdict(qtbot, looping_models, tmp_path: Path) -> None:  # noqa: ANN001
    tab = _tab(qtbot, Settings(target_path=str(looping_models["target"])), results_dir=tmp_path)
    tab.show_results(planted.falsified_ngram(tmp_path / "before"))
    assert tab.verdict.text().startswith("FALSIFIED")
    _only(tab, {"code"})
    tab.configs.setPlainText("ng:ngram,n=4")
    tab.max_tokens.setValue(8)
    with qtbot.waitSignal(tab.run_finished, timeout=120_000):
        assert tab.start()
        assert "FALSIFIED" not in tab.verdict.text()
        assert tab.verdict.text().startswith("Running: the previous run's verdict is cleared")
        assert tab.recommendation.count() == 0 and tab.table.rowCount() == 0
        assert tab.apply_note.text() == "Apply is off: a run is under way."
        tab.cancel()


def test_the_verdict_wraps_within_a_narrow_dock(make_window, qtbot, tmp_path: Path) -> None:  # noqa: ANN001, F811
    """As found (screenshot 12): the verdict ran past the dock's edge, cut mid-sentence."""
    window = make_window(Settings(), autoload=False)
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    qtbot.wait(100)
    tabs = [window.side.tabText(i) for i in range(window.side.count())]
    window.side.setCurrentIndex(tabs.index("Lab"))
    lab = window.lab
    lab.show_results(_write_results(tmp_path / "lab.jsonl"))
    window.resizeDocks([window.settings_dock], [NARROW_DOCK], Qt.Orientation.Horizontal)
    scroll = window.findChild(QScrollArea, "labScroll")
    qtbot.waitUntil(lambda: scroll.isVisible() and scroll.viewport().width() < NARROW_DOCK)
    qtbot.wait(50)
    assert len(lab.verdict.text()) > 100
    viewport = scroll.viewport()
    for label in (lab.verdict, lab.message, lab.runs_note, lab.apply_note):
        if label.isVisible() and label.text():
            right = label.mapTo(viewport, QPoint(label.width(), 0)).x()
            assert right <= viewport.width(), f"{label.objectName()}: {right} > {viewport.width()}"
            assert label.height() >= label.heightForWidth(label.width())
    window.grab().save(str(tmp_path / "lab-verdict-narrow.png"))
