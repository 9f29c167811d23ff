"""What the second walk after issue 33's fixes still found at 1024x640 and 1920x1080: every
status field cut while serving, the Lab wider than its dock, a remote pair offering "draft
model", the n-gram draft elided to "n-gram …lookup)", the message view squeezed to ~65 px,
and a remote verdict claiming a speed-up from a server that drafted nothing."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.engine.config import DraftSource

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

SERVING = "Serving on 127.0.0.1:8080 · answering a request (8 s) · 0 requests · acceptance —"
FIELDS = {
    "device": "CPU · 2 threads",
    "speed": "tok/s — (waiting for the first token)",
    "acceptance": "acceptance 66 % (4/6 drafted) · 1.67 tokens/pass",
    "memory": "memory 878 MiB (weights 349 MiB)",
}


def test_status_fields_while_serving_give_way_by_priority_at_1024(make_window, qtbot) -> None:  # noqa: ANN001
    window = make_window()
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    for name, text in FIELDS.items():
        window.status[name].setText(text)
    window.server.status_changed.emit(SERVING)  # as the local server reports it
    QApplication.processEvents()
    qtbot.wait(50)
    fields = [*window.status.values(), window.serving_label]
    # the serving state and this answer's speed are shown, in words, never cut mid-word
    for field in (window.serving_label, window.status["speed"]):
        assert field.isVisible()
        assert "…" not in field.shown_text(), field.shown_text()
    assert window.serving_label.shown_text().startswith("Serving on 127.0.0.1:8080")
    assert window.status["speed"].shown_text() == FIELDS["speed"]  # this answer's, whole
    for field in fields:  # what shows is whole (a short form at most), its tooltip all of it
        if field.isVisible():
            assert "…" not in field.shown_text(), field.shown_text()
        assert field.text() in field.toolTip()
    shown = [f for f in fields if f.isVisible()]
    assert sum(f.width() for f in shown) <= window.statusBar().width()
    # the least needed gave way first: the device before acceptance
    if window.status["acceptance"].isHidden():
        assert window.status["device"].isHidden()
    window.resize(1920, 1080)
    qtbot.wait(50)
    QApplication.processEvents()
    for field in fields:  # wide: every field whole again
        assert field.isVisible() and field.shown_text() == field.text(), field.shown_text()


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


@pytest.mark.parametrize("size", [(1024, 640), (1920, 1080)])
def test_the_lab_fits_its_dock_without_scrolling_sideways(
    make_window,
    qtbot,
    tmp_path,
    size: tuple[int, int],  # noqa: ANN001
) -> None:
    from PySide6.QtWidgets import QScrollArea

    from app.store.settings import Settings
    from tests.lab.test_lab_narrow import CONFIGS, _write_results

    window = make_window(Settings(), autoload=False)
    window.resize(*size)
    qtbot.waitExposed(window)
    qtbot.wait(100)
    tabs = [window.side.tabText(i) for i in range(window.side.count())]
    window.side.setCurrentIndex(tabs.index("Lab"))
    lab = window.lab
    lab.configs.setPlainText(CONFIGS)
    lab.show_results(_write_results(tmp_path / "lab.jsonl"))  # a verdict, notes, the plot
    scroll = window.findChild(QScrollArea, "labScroll")
    qtbot.wait(100)
    bar = scroll.horizontalScrollBar()
    assert bar.isHidden() or bar.maximum() == 0, (size, lab.width(), scroll.viewport().width())
    assert lab.width() <= scroll.viewport().width()
    for text in (lab.verdict, lab.runs_note, lab.message, lab.apply_note):
        assert text.geometry().right() <= scroll.viewport().width()  # the verdict is not cut


VERDICT = (
    "0.36× — 64 % slower (1346.3 vs 3718.9 tok/s target-only): 0.7 ms a token against 0.3 ms "
    "target-only. 1 token came from 1 drafting step at 3.2 ms a token (a step: 0.4 ms drafting "
    "+ 0.6 ms verifying + 2.3 ms other for 1.00 tokens); the other 44 tokens and the time "
    "between steps took 30 ms (0.7 ms a token) — drafting paused for 43 of 45 tokens"
)
GUARD = (
    "<b>Drafting paused at step 1</b>: a draft pass costs 46 % of a target pass, so by the "
    "measured pass costs no draft length can beat the target alone, even with every draft "
    "token accepted. Try prompt lookup. Prompt lookups still draft where the answer repeats "
    "the conversation; the draft model is probed again in 32 tokens. History: paused at step "
    "1 (cost), lookups kept drafting (12 tokens), resumed at step 30, paused at step 31."
)


def test_the_message_being_written_keeps_its_room_at_1024x640(make_window, qtbot) -> None:  # noqa: ANN001
    from app.ui.chat_panel import MESSAGE_MIN_PX

    window = make_window()
    window.resize(1024, 610)  # 640 less the window's title bar
    qtbot.waitExposed(window)
    chat = window.chat
    chat.notes_banner.show_text(
        "<b>The Hugging Face Hub cannot be reached,</b> so SpecDeck starts with the offline "
        "demo pair. Use Change pair… when you are online."
    )
    chat.begin_answer(True)
    chat.guard_banner.show_text(GUARD)
    chat.set_comparison_open(True)
    chat.show_verdict(VERDICT, None)
    qtbot.wait(50)
    assert chat.guard_banner.more.isVisible()
    chat.guard_banner.more.click()  # More: the whole guard banner
    qtbot.wait(100)
    QApplication.processEvents()
    assert chat.transcript.height() >= MESSAGE_MIN_PX, chat.transcript.height()
    assert window.height() <= 610  # nothing pushed the window taller
    banner = chat.guard_banner
    assert banner.isVisible() and banner.label.height() >= banner.label.fontMetrics().height()
    if banner.label.height() < banner.label.heightForWidth(banner.label.width()):
        assert "Drafting paused" in banner.label.toolTip()  # the rest on hover
