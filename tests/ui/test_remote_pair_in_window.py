"""A remote pair in the window: the pair bar shows no weights of its own and offers no draft
model (the server decides how it drafts), and the verdict waits for its baseline server and
claims no speed-up where the server drafted nothing."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.engine.config import DraftSource

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_a_remote_pair_shows_no_weights_of_its_own_in_the_pair_bar(qtbot) -> None:  # noqa: ANN001
    from app.ui.pair_bar import REMOTE_MEMORY, PairBar

    bar = PairBar()
    qtbot.addWidget(bar)
    bar.show_resources("remote llama-server", 0, 207 * 2**20)  # a remote pair loads no weights
    assert bar.memory.text() == REMOTE_MEMORY and "MiB" not in bar.memory.toolTip()
    bar.show_resources("CPU · 2 threads", 349 * 2**20, 943 * 2**20)
    assert bar.memory.text() == "weights 349 MiB · process 943 MiB"


def test_a_remote_pair_offers_no_draft_model_and_the_ngram_draft_reads_whole(
    make_window,
    qtbot,  # noqa: ANN001
) -> None:
    from app.remote.chat import RemotePair
    from app.ui.pair_bar import REMOTE_CHOICE

    window = make_window()
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    bar = window.pair_bar
    names = "/m/SmolLM2-135M-Instruct"
    bar.show_pair(f"{names}.Q4_1.F16.gguf", None, DraftSource.NGRAM)
    QApplication.processEvents()
    qtbot.wait(50)
    assert bar.draft.text() == bar.draft.shown_text(), bar.draft.shown_text()
    assert "lookup" in bar.draft.toolTip().lower()
    bar.show_remote(RemotePair(url="http://127.0.0.1:9090", server="llama-server"))
    assert not bar.source.isEnabled()
    assert bar.source.currentText() == REMOTE_CHOICE
    assert "server decides" in bar.source.toolTip()
    bar.set_busy(None)  # a load ending does not hand the choice back
    assert not bar.source.isEnabled()
    bar.show_pair(f"{names}.Q4_1.F16.gguf", f"{names}.Q4_1.gguf", DraftSource.MODEL)
    assert bar.source.isEnabled() and bar.source.currentText() == "draft model"


def _answer(url: str, tok_s: float, drafted: int):  # noqa: ANN202
    from app.remote.chat import RemoteAnswer
    from app.remote.client import ServerTimings

    timings = ServerTimings(
        prompt_ms=10.0,
        predicted_n=48,
        predicted_ms=48 * 1000.0 / tok_s,
        draft_n=drafted,
        draft_n_accepted=drafted // 2,
    )
    return RemoteAnswer(url, "Hi", 48, 1.0, 50.0, "length", timings, None)


def test_a_remote_verdict_waits_for_its_baseline_and_claims_nothing_undrafted(
    make_window,
    qtbot,  # noqa: ANN001
) -> None:
    from app.workers.messages import EventBatch

    window = make_window()
    chat = window.chat
    chat.begin_answer(True, remote=True)
    spec = _answer("http://127.0.0.1:8091", 16.8, drafted=0)
    chat.ingest(EventBatch(1, "speculative", (spec,), 3.0, 48))
    words = chat.verdict.text()
    assert "still answering" in words and "without a baseline server" not in words, words
    chat.ingest(EventBatch(1, "baseline", (_answer("http://127.0.0.1:8092", 2.26, 0),), 3.0, 48))
    words = chat.verdict.text()
    assert "Speed-up" not in words and "noise, not a speed-up" in words, words
    assert "Nothing was drafted" in words
    chat.begin_answer(True, remote=True)  # a server that drafts: its speed-up stands
    chat.ingest(EventBatch(2, "speculative", (_answer("http://s", 20.0, drafted=30),), 3.0, 48))
    chat.ingest(EventBatch(2, "baseline", (_answer("http://b", 10.0, 0),), 3.0, 48))
    assert "Speed-up 2.00×" in chat.verdict.text()
    chat.begin_answer(True, remote=True)  # stopped before the baseline: nothing pending
    chat.ingest(EventBatch(3, "speculative", (spec,), 3.0, 48))
    chat.baseline_not_run("Not run: the answer was stopped before the baseline.")
    assert "still answering" not in chat.verdict.text()
