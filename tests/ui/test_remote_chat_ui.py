"""The window chatting with real ``llama-server`` processes (built from the vendored
llama.cpp) on 127.0.0.1, chosen through Change pair → Remote server…: one server drafts with
the tiny draft model, the other (the baseline the user names) does not."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.remote.chat import NOT_REPORTED, RemotePair
from app.store.settings import Settings
from app.ui.pair_chooser import RemoteServerDialog
from tests.lab.llama_server import llama_server
from tests.ui.conftest import ask

pytestmark = pytest.mark.slow
FAST = Settings(max_tokens=32, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


@pytest.fixture(scope="module")
def servers(tiny_pair, tmp_path_factory) -> Iterator[tuple[str, str]]:  # noqa: ANN001
    logs = tmp_path_factory.mktemp("llama-servers")
    with (
        llama_server(tiny_pair[0], tiny_pair[1], logs / "spec.log") as spec,
        llama_server(tiny_pair[0], None, logs / "base.log") as base,
    ):
        yield spec, base


def _fill_dialog(url: str, baseline: str, first_url: str = "") -> None:
    """Answer the modal dialog once it is open: first a wrong address, then the right one."""

    def fill() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, RemoteServerDialog):
            QTimer.singleShot(20, fill)
            return
        if first_url:
            dialog.url.setText(first_url)
            dialog.accept()
            assert "is not an http(s) server address" in dialog.message.text()
            assert dialog.isVisible()
        dialog.url.setText(url)
        dialog.baseline.setText(baseline)
        dialog.accept()

    QTimer.singleShot(20, fill)


def test_the_chat_streams_from_a_remote_llama_server(make_window, qtbot, servers) -> None:  # noqa: ANN001
    spec_url, base_url = servers
    window = make_window(FAST)
    remote = next(a for a in window.pair_bar.menu.actions() if a.text() == "Remote server…")
    _fill_dialog(spec_url, base_url, first_url="gpu-box:8080")
    with qtbot.waitSignal(window.pair_loaded, timeout=30_000) as blocker:
        remote.trigger()
    loaded = blocker.args[0]
    assert loaded.remote is not None and loaded.remote.url == spec_url
    assert window.pair_bar.target.text() == f"{spec_url} (llama-server)"
    assert base_url in window.pair_bar.draft.text()

    done = ask(window, qtbot, "hello the model")
    assert not done.cancelled and done.speculative is not None and done.baseline is not None
    spec, base = done.speculative, done.baseline
    answer = window.chat.spec_view.text()
    assert answer.strip() and answer == spec.text
    assert window.chat.base_view.text() == base.text == spec.text  # greedy: the same answer
    assert window.chat.spec_view.events == []  # no token kinds: nothing coloured as drafted
    assert spec.drafted > 0 and base.drafted == 0
    verdict = window.chat.verdict.text()
    assert f"drafted {spec.drafted}, accepted {spec.accepted}" in verdict
    assert f"Token colours: {NOT_REPORTED}." in verdict
    assert "Speed-up" in verdict and "(the two servers' own tok/s)" in verdict
    stored = window.conversation.messages[-1]
    assert stored.content == answer
    folder = os.environ.get("SPECDECK_SHOTS")
    if folder:
        window.resize(1400, 860)
        qtbot.wait(200)
        window.grab().save(os.path.join(folder, "remote_chat.png"))


@pytest.fixture
def hostile() -> Iterator[object]:
    from tests.lab.test_remote_chat_hostile import Hostile

    server = Hostile()
    yield server
    server.close()


def _load_remote(window, qtbot, url: str):  # noqa: ANN001, ANN202
    with qtbot.waitSignal(window.pair_loaded, timeout=30_000) as blocker:
        window.load_remote(RemotePair.checked(url, "openai"))
    return blocker.args[0]


def test_a_hostile_server_error_is_a_plain_message(make_window, qtbot, hostile) -> None:  # noqa: ANN001
    window = make_window(FAST)
    _load_remote(window, qtbot, f"{hostile.url}/error")
    assert window.pair_bar.target.text() == f"{hostile.url}/error (openai)"
    with qtbot.waitSignal(window.client.error, timeout=15_000) as blocker:
        done = ask(window, qtbot, "hello")
    error = blocker.args[0]
    assert done.cancelled and done.speculative is None
    assert error.title == "Remote server" and "answered with an error: model" in error.message
    assert "\x1b" not in error.message


def test_stop_cuts_a_remote_answer(make_window, qtbot, hostile) -> None:  # noqa: ANN001
    window = make_window(FAST)
    _load_remote(window, qtbot, f"{hostile.url}/slow-pieces")
    with qtbot.waitSignal(window.answer_finished, timeout=15_000) as blocker:
        window.chat.input.setPlainText("hello")
        window.chat.input.submit()
        qtbot.waitUntil(lambda: "zz" in window.chat.spec_view.text(), timeout=10_000)
        began = time.monotonic()
        window.client.cancel()
    assert blocker.args[0].cancelled
    assert time.monotonic() - began < 2.0


def test_a_remote_answer_shows_no_token_legend_per_step_charts_or_baseline_pane(
    make_window,  # noqa: ANN001
    qtbot,  # noqa: ANN001
    hostile,  # noqa: ANN001
) -> None:
    window = make_window(FAST)  # the baseline is on in the settings; this server has none
    _load_remote(window, qtbot, f"{hostile.url}/good")
    ask(window, qtbot, "hello")
    assert window.chat.legend.isHidden()
    assert window.chat.base_box.isHidden()
    charts = window.charts
    assert charts.plots["acceptance"].isHidden() and charts.plots["draft_length"].isHidden()
    assert not charts.plots["tok_s"].isHidden() and not charts.remote_note.isHidden()


def test_a_remote_answer_stopped_before_its_first_token_says_so(
    make_window,  # noqa: ANN001
    qtbot,  # noqa: ANN001
    hostile,  # noqa: ANN001
) -> None:
    window = make_window(FAST)
    _load_remote(window, qtbot, f"{hostile.url}/drip")
    with qtbot.waitSignal(window.answer_finished, timeout=15_000) as blocker:
        window.chat.input.setPlainText("hello")
        window.chat.input.submit()
        qtbot.wait(300)
        window.client.cancel()
    assert blocker.args[0].cancelled
    assert window.chat.spec_view.placeholderText() == "Stopped before the first token."
    assert window.chat.verdict.text() == "stopped — no verdict"
