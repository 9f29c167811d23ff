"""In a small window the banners and buttons give way to the answer: a long banner shows its
first lines with More to read the rest (and all of it on hover), and the chat's buttons stand
in two columns; a large window shows everything as before. At 1024x640 a short chart still
labels a value, the status fields give way by priority while serving, a loading pair keeps its
file names readable, the message being written keeps its room, and the Lab and the remote
dialog fit without squeezing or scrolling sideways."""

from __future__ import annotations

import math

import pytest
from PySide6.QtWidgets import QApplication

from app.ui.chat_panel import COMPACT_HEIGHT, ChatPanel

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

LONG = (
    "<b>Drafting paused at step 2 (cost)</b>: a draft pass costs 25 % of a target pass and "
    "drafting steps ran at 0.90× the target-only speed, so it cannot pay at this agreement "
    "(87.5 %). The target answers alone; the draft is probed again in 64 tokens. " * 2
)


def _panel(qtbot, height: int) -> ChatPanel:  # noqa: ANN001
    panel = ChatPanel("colour", True)
    qtbot.addWidget(panel)
    panel.resize(600, height)
    panel.show()
    qtbot.waitExposed(panel)
    panel.guard_banner.show_text(LONG)
    QApplication.processEvents()
    return panel


def test_a_long_banner_shows_its_first_lines_in_a_small_window_and_more_shows_all(qtbot) -> None:  # noqa: ANN001
    panel = _panel(qtbot, COMPACT_HEIGHT - 100)
    banner = panel.guard_banner
    lines = banner.label.height() / banner.label.fontMetrics().lineSpacing()
    assert banner.cut and lines <= 2.2
    assert banner.label.toolTip() == LONG  # all of it on hover
    assert not banner.more.isHidden() and banner.more.text() == "More"
    banner.more.click()
    assert not banner.cut and banner.more.text() == "Less"
    spacing = banner.label.fontMetrics().lineSpacing()
    qtbot.waitUntil(lambda: banner.label.height() > 2.5 * spacing, timeout=2_000)


def test_the_buttons_stand_in_two_columns_in_a_small_window(qtbot) -> None:  # noqa: ANN001
    panel = _panel(qtbot, COMPACT_HEIGHT - 100)
    assert panel.send.y() == panel.regenerate.y() and panel.send.x() < panel.regenerate.x()
    panel.resize(600, COMPACT_HEIGHT + 300)
    QApplication.processEvents()
    assert panel.send.x() == panel.regenerate.x() and panel.send.y() < panel.regenerate.y()


def test_a_large_window_shows_the_whole_banner(qtbot) -> None:  # noqa: ANN001
    panel = _panel(qtbot, COMPACT_HEIGHT + 300)
    banner = panel.guard_banner
    assert not banner.cut and banner.more.isHidden() and banner.label.toolTip() == ""


def test_a_short_charts_value_axis_labels_a_value_inside_it_with_ticks_apart(qtbot) -> None:  # noqa: ANN001
    from app.ui.charts import LABEL_HALF_PX, MIN_TICK_PX, NICE_STEPS, ChartsPanel

    charts = ChartsPanel()
    qtbot.addWidget(charts)
    axis = charts.plots["acceptance"].getAxis("left")
    # at 1024x640 a plot is ~35 px tall: acceptance 0..1.05, accepted lengths 0..5.1
    for high, size in ((1.05, 35.0), (1.05, 40.0), (1.05, 50.0), (5.1, 30.0), (5.1, 35.0)):
        major = axis.tickSpacing(0.0, high, size)[0][0]
        assert major * size / high >= MIN_TICK_PX
        margin = LABEL_HALF_PX * high / size
        inside = math.ceil(margin / major) * major
        assert inside <= high - margin, (high, size, major)  # a tick far enough in for a label
    for high, size in ((60.0, 40.0), (16.0, 30.0), (1.05, 400.0)):
        major = axis.tickSpacing(0.0, high, size)[0][0]
        assert major * size / high >= MIN_TICK_PX
        mantissa = major / 10 ** math.floor(math.log10(major))
        assert any(mantissa == pytest.approx(step) for step in NICE_STEPS), major
    assert axis.tickSpacing(0.0, 1.05, 400.0)[0][0] <= 0.25  # a tall plot keeps fine labels
    charts.stop()


def test_the_remote_dialog_grows_to_show_a_refusal_without_squeezing_its_fields(qtbot) -> None:  # noqa: ANN001
    from app.ui.pair_chooser import RemoteServerDialog

    dialog = RemoteServerDialog(None, None, "http://127.0.0.1:8080")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.url.setText("http://127.0.0.1:8080")
    dialog.accept()
    QApplication.processEvents()
    assert "own serving address" in dialog.message.text()
    for field in (dialog.url, dialog.kind, dialog.baseline):
        assert field.height() >= field.sizeHint().height()
    assert dialog.message.height() >= dialog.message.heightForWidth(dialog.message.width())


def test_a_loading_pair_leaves_the_file_names_their_room_at_1024(make_window, qtbot) -> None:  # noqa: ANN001
    from app.engine.config import DraftSource
    from app.ui.pair_bar import BUSY_TEXT_WIDTH

    window = make_window()
    window.resize(1024, 640)
    qtbot.waitExposed(window)
    bar = window.pair_bar
    names = "/m/qwen2.5-coder-0.5b-instruct-q4_k_m"
    bar.show_pair(f"{names}.F32.gguf", f"{names}.Q2_K.gguf", DraftSource.MODEL)
    qtbot.wait(50)
    at_rest = bar.target.width()
    bar.set_busy("Loading qwen2.5-coder-0.5b-instruct-q4_k_m.F32.gguf…")
    bar.set_progress(0.0)
    window.cancel_load_button.show()  # as while the engine loads
    qtbot.wait(50)
    assert bar.change.isHidden() and bar.demo.isHidden()  # unusable while it loads
    assert bar.target.width() >= at_rest, (bar.target.width(), at_rest)
    assert bar.status.width() <= BUSY_TEXT_WIDTH  # the words elide, the names do not
    assert bar.status.toolTip()  # its words whole on hover (and in the status bar)
    bar.set_busy(None)
    qtbot.wait(20)
    assert bar.change.isVisible() and bar.demo.isVisible() and bar.change.isEnabled()


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
