"""The settings say which threads the last load chose and why, and the status bar names them
when a pair runs on fewer threads than the cores (no process started: fast tier)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.engine.config import DraftSource
from app.engine.process.protocol import PairInfo
from app.engine.thread_fit import fit_threads
from app.store.settings import Settings
from app.ui.settings_panel import SettingsPanel
from app.ui.status_bar import loaded_message
from app.workers.messages import PairLoaded

pytestmark = pytest.mark.fast


def loaded(threads: object) -> PairLoaded:
    info = PairInfo(
        "/m/target.gguf", None, DraftSource.NGRAM, "CPU", 10, 512, "", False, threads=threads
    )
    return PairLoaded(1, info, 1.25)


def test_the_threads_field_shows_the_last_loads_choice_and_why(qtbot) -> None:
    panel = SettingsPanel(Settings())
    qtbot.addWidget(panel)
    panel.show()
    note = panel.fields["n_threads"].note
    assert note.isHidden()  # nothing loaded yet
    busy = fit_threads(2, 1.0)
    panel.show_threads(busy)
    assert note.isVisible() and note.text() == f"Last load: {busy.reason}"
    assert "other programs kept 1.0 core busy" in note.text()
    followed = replace(fit_threads(2, 0.0), follows=True)
    panel.show_threads(followed)
    assert note.text() == (
        "Last load: 2 threads: all 2 cores free when the pair loaded; while answering, fewer "
        "while other programs hold cores for 4 s or more"
    )
    panel.show_threads(None)  # a remote pair runs on another machine's threads
    assert note.isHidden()


def test_the_status_bar_names_the_threads_only_when_fewer_than_the_cores() -> None:
    fewer = loaded_message(loaded(fit_threads(2, 1.0)))
    assert fewer.startswith("Pair loaded in 1.2 s: ")
    assert fewer.endswith(
        "; 1 thread of 2 cores: other programs kept 1.0 core busy when the pair loaded"
    )
    every = loaded_message(loaded(fit_threads(2, 0.0)))
    assert "thread" not in every
    assert "1 thread: set in the settings" in loaded_message(
        loaded(fit_threads(2, 0.0, set_threads=1))
    )
