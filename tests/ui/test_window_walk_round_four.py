"""What the walk through the real window found after issue 33's fixes: a waiting note that
stopped counting in the speculative pane, a short chart without one labelled value, the remote
server dialog squeezing its fields to show a refusal, file names squeezed to "ge…uf" while a
pair loads (all at 1024x640), and a remote pair shown with "weights 0 MiB"."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from app.ui.token_view import TokenView

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def test_a_new_placeholder_over_an_empty_pane_is_painted(qtbot) -> None:  # noqa: ANN001
    view = TokenView()
    qtbot.addWidget(view)
    view.resize(300, 120)
    view.show()
    qtbot.waitExposed(view)
    view.setPlaceholderText("Serving a request from another program (2 s)")
    QApplication.processEvents()
    paints = _Paints()
    view.viewport().installEventFilter(paints)
    view.setPlaceholderText("Serving a request from another program (8 s)")
    qtbot.waitUntil(lambda: paints.count > 0, timeout=2000)
    view.viewport().removeEventFilter(paints)


def test_a_short_chart_labels_a_value_inside_its_axis(qtbot) -> None:  # noqa: ANN001
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


def test_a_remote_pair_shows_no_weights_of_its_own_in_the_pair_bar(qtbot) -> None:  # noqa: ANN001
    from app.ui.pair_bar import REMOTE_MEMORY, PairBar

    bar = PairBar()
    qtbot.addWidget(bar)
    bar.show_resources("remote llama-server", 0, 207 * 2**20)  # a remote pair loads no weights
    assert bar.memory.text() == REMOTE_MEMORY and "MiB" not in bar.memory.toolTip()
    bar.show_resources("CPU · 2 threads", 349 * 2**20, 943 * 2**20)
    assert bar.memory.text() == "weights 349 MiB · process 943 MiB"
