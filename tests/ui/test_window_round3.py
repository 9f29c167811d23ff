"""Issue 20, the window: a pair switch cannot strand it, the first window fits a small screen
and the docks follow the width, the keys and menus people expect, settings refused or
warned about at entry, and the smaller things (double-click, Markdown, banners, names,
export names)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QLocale, Qt
from PySide6.QtGui import QKeySequence, QTextFormat
from PySide6.QtWidgets import QComboBox

from app.engine.config import DraftSource, default_threads
from app.engine.events import TokenKind
from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings, SettingsStore
from tests.ui.conftest import ask, load
from tests.ui.dialogs import Dialogs, pick, press

ROOT = Path(__file__).resolve().parents[2]
FAST = Settings(max_tokens=24, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)
LONG = Settings(max_tokens=3000, n_ctx=4096, temperature=0.0, seed=1, n_threads=1)


@pytest.fixture(scope="session")
def foreign_draft(tiny_dir: Path) -> Path:
    """A loadable tiny model whose vocabulary differs from the tiny target's."""
    from app.devtools.test_models.synthetic import write_tiny_llama

    words = ("zebra", "quartz")
    return write_tiny_llama(tiny_dir / "foreign-vocab.gguf", seed=3, extra_words=words)


def type_into(qtbot, editor, text: str) -> None:  # noqa: ANN001
    editor.edit.clear()
    qtbot.keyClicks(editor.edit, text)
    qtbot.keyClick(editor.edit, Qt.Key.Key_Return)


# --- 2. a pair switch cannot strand the window ----------------------------------------------


def test_the_file_picker_refuses_a_foreign_draft_before_anything_unloads(
    make_window, qtbot, tiny_pair, foreign_draft
) -> None:
    window = make_window(FAST)
    target, draft = tiny_pair
    loaded = load(window, qtbot, target, draft)
    engine = window.client.engine_pid
    with Dialogs(pick(target), pick(foreign_draft), press("Cancel")) as dialogs:
        window.change_pair(files=True)
    refusal = dialogs.seen[-1]
    assert refusal.startswith("These models cannot be paired"), dialogs.seen
    assert f"{foreign_draft.name} cannot draft for {target.name}" in refusal
    assert "spell token" in refusal and "stays loaded" in refusal
    assert not window.client.loading and window.loaded is loaded  # nothing was even asked
    assert window.client.engine_pid == engine
    assert window.pair_bar.draft.text() == draft.name and window.settings.draft_path == str(draft)
    assert window.chat.send.isEnabled()
    assert ask(window, qtbot, "hello the model").speculative.drafted > 0

    # "Choose another draft…" picks again at once, and a good draft loads
    answers = (pick(target), pick(foreign_draft), press("Choose another draft…"), pick(draft))
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000), Dialogs(*answers) as dialogs:
        window.change_pair(files=True)
    assert len(dialogs.seen) == 4 and "cannot be paired" in dialogs.seen[2]


def test_a_pair_that_fails_to_load_leaves_the_pair_that_was_loaded(
    make_window, qtbot, tiny_pair, foreign_draft
) -> None:
    window = make_window(FAST)
    target, draft = tiny_pair
    load(window, qtbot, target, draft)
    with (
        qtbot.waitSignal(window.failed, timeout=60_000) as failed,
        qtbot.waitSignal(window.pair_loaded, timeout=60_000) as back,
    ):  # not through the file picker: a saved pair, the Lab, a reload for new settings
        window.load_pair(str(target), str(foreign_draft), DraftSource.MODEL)
        # until a pair has loaded, the window shows the one it has
        assert window.pair_bar.draft.text() == draft.name
    assert failed.args[0].title == "Incompatible pair"
    restored = back.args[0]
    assert restored.restored and restored.pair.draft_path == str(draft)
    assert window.loaded is restored and window.settings.draft_path == str(draft)
    assert window.pair_bar.draft.text() == draft.name and window.chat.send.isEnabled()
    assert "Incompatible pair" in window.chat.error_banner.text()
    done = ask(window, qtbot, "hello the model")  # answered, not "No model pair is loaded"
    assert not done.cancelled and done.speculative.drafted > 0


def test_send_and_the_pair_bar_follow_what_is_loaded(
    make_window, qtbot, tiny_pair, tmp_path
) -> None:
    window = make_window(FAST)
    assert not window.chat.send.isEnabled() and "Demo pair" in window.chat.send.toolTip()
    with qtbot.waitSignal(window.failed, timeout=30_000):
        window.load_pair(str(tmp_path / "missing.gguf"), None, DraftSource.NGRAM)
        assert window.chat.send.isEnabled()  # while a pair loads, a message waits for it
        assert window.pair_bar.target.text() == "none loaded"
    assert window.pair_bar.target.text() == "none loaded"
    assert not window.chat.send.isEnabled() and "Change pair" in window.chat.send.toolTip()
    load(window, qtbot, *tiny_pair)
    assert window.chat.send.isEnabled() and window.chat.send.toolTip() == ""
    assert window.pair_bar.target.text() == tiny_pair[0].name


@pytest.mark.real
def test_qwen_f32_with_a_smollm2_draft_is_refused_and_the_pair_stays(
    make_window, qtbot, smollm2_pair, qwen_pair
) -> None:
    """The issue's case: Change pair → Local GGUF files… with the Qwen F32 target and the
    SmolLM2 draft, while the SmolLM2 pair is loaded."""
    window = make_window(replace_settings(FAST, n_threads=2, max_tokens=12))
    smol_target, smol_draft = smollm2_pair
    qwen_target, _ = qwen_pair
    loaded = load(window, qtbot, smol_target, smol_draft)
    with Dialogs(pick(qwen_target), pick(smol_draft), press("Cancel")) as dialogs:
        window.change_pair(files=True)
    refusal = dialogs.seen[-1]
    assert f"{smol_draft.name} cannot draft for {qwen_target.name}" in refusal, dialogs.seen
    assert "start of a text (BOS token id: target 151643, draft 1)" in refusal
    assert window.loaded is loaded and not window.client.loading
    assert window.pair_bar.target.text() == smol_target.name
    assert window.pair_bar.draft.text() == smol_draft.name
    assert window.chat.send.isEnabled()
    assert ask(window, qtbot, "Say hello.", timeout=120_000).speculative.tokens > 0


def replace_settings(settings: Settings, **changes: object) -> Settings:
    from dataclasses import replace

    return replace(settings, **changes)  # type: ignore[arg-type]


# --- 6. small screens ----------------------------------------------------------------------


def _first_window(tmp_path: Path, width: int, height: int) -> dict:
    """The window started in a child process on an offscreen screen of this size."""
    config = tmp_path / f"screen-{width}x{height}.json"
    screen = {"name": "s", "x": 0, "y": 0, "width": width, "height": height}
    screen |= {"logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    config.write_text(json.dumps({"screens": [screen]}))
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={config}")
    result = subprocess.run(
        [sys.executable, "-m", "tests.ui.first_window"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _inside(rect: list[int], room: list[int]) -> bool:
    x, y, w, h = rect
    rx, ry, rw, rh = room
    return rx <= x and ry <= y and x + w <= rx + rw and y + h <= ry + rh


def test_the_first_window_fits_a_1024x640_screen(isolated, tmp_path) -> None:  # noqa: ANN001
    small = _first_window(tmp_path, 1024, 640)
    assert _inside(small["window"], small["screen"]), small
    for name, rect in small["controls"].items():  # the input box, Send, Change pair …
        assert rect is not None and _inside(rect, small["screen"]), (name, small)
    assert small["tabbed"] and small["chat_width"] >= 480, small
    big = _first_window(tmp_path, 1920, 1080)  # closed there: its layout is saved
    assert _inside(big["window"], big["screen"]) and not big["tabbed"], big
    again = _first_window(tmp_path, 1024, 640)  # back on the small screen
    assert _inside(again["window"], again["screen"]) and again["tabbed"], again


def test_the_docks_follow_the_width_both_ways(make_window, qtbot) -> None:
    window = make_window()
    qtbot.waitExposed(window)

    def tabbed() -> bool:
        return window.settings_dock in window.tabifiedDockWidgets(window.charts_dock)

    for width, narrow in ((1500, False), (1100, True), (1500, False), (1000, True)):
        window.resize(width, 800)
        qtbot.waitUntil(lambda n=narrow: tabbed() is n, timeout=3000)
        qtbot.wait(30)
        if narrow:  # one column of tabs beside a chat of at least half the window
            assert window.chat.width() >= width // 2, (width, window.chat.width())
        else:
            assert window.settings_dock.isVisible() and window.charts_dock.isVisible()


def test_the_pair_bar_shows_device_and_memory_whole_or_not_at_all(make_window, qtbot) -> None:
    window = make_window()
    bar = window.pair_bar
    names = "/m/qwen2.5-coder-0.5b-instruct-q4_k_m"
    bar.show_pair(f"{names}.F32.gguf", f"{names}.Q2_K.gguf", DraftSource.MODEL)
    bar.show_resources("CPU · 2 threads", int(2.7 * 2**30), int(3.3 * 2**30))
    figures = {
        "device": "CPU · 2 threads",
        "speed": "spec 15.2 tok/s · base 9.1 tok/s",
        "acceptance": "acceptance 80 % (40/50)",
        "memory": "memory 3.3 GiB (weights 2.7 GiB)",
    }
    for name, text in figures.items():
        window.status[name].setText(text)
    shown = []
    for width in (1024, 1280, 1560, 1920, 2600):
        window.resize(width, 800)
        qtbot.wait(30)
        for label in (bar.device, bar.memory):  # never "CPU…ads"
            assert label.isHidden() or not label.is_elided(), (width, label.shown_text())
        shown.append(bar.device.isVisible())
    assert shown[-1]  # a wide bar has room for them
    labels = list(window.status.values())
    for left, right in zip(labels, labels[1:], strict=False):  # items do not run together
        metrics = left.fontMetrics()
        end = left.x() + left.contentsRect().x() + metrics.horizontalAdvance(left.text())
        assert right.x() + right.contentsRect().x() - end >= 12, (left.text(), right.text())


def test_device_and_memory_in_the_pair_bar_do_not_hold_a_shrinking_window_wide(
    make_window, qtbot
) -> None:
    window = make_window()
    bar = window.pair_bar
    names = "/m/qwen2.5-coder-0.5b-instruct-q4_k_m"
    bar.show_pair(f"{names}.F32.gguf", f"{names}.Q2_K.gguf", DraftSource.MODEL)
    bar.show_resources("CPU · 2 threads", int(2.7 * 2**30), int(3.4 * 2**30))
    window.resize(1920, 1080)
    qtbot.waitUntil(bar.device.isVisible, timeout=3000)
    window.resize(1008, 572)  # shrunk later, as the screenshots of a 1024x640 screen do
    qtbot.wait(100)
    assert window.width() <= 1008 and bar.device.isHidden(), (window.width(), bar.width())
    bar.set_busy(None)  # a load ended
    assert bar.status.isHidden()  # empty, it keeps no room the file names lack


def test_a_padded_label_elides_with_a_mark_instead_of_being_cut(qtbot) -> None:
    from app.ui.elided_label import ElidedLabel

    label = ElidedLabel("memory 3.4 GiB (weights 2.7 GiB)", mode=Qt.TextElideMode.ElideRight)
    label.setStyleSheet("QLabel { border-left: 1px solid palette(mid); padding: 0 8px; }")
    qtbot.addWidget(label)
    label.show()
    label.resize(label.sizeHint().width() - 10, 20)  # as a crowded status bar squeezes it
    qtbot.wait(20)
    shown = label.shown_text()
    room = label.contentsRect().width()  # inside the padding: "GiB)" drawn past it is cut
    assert shown.endswith("…") and label.fontMetrics().horizontalAdvance(shown) <= room, shown


def test_no_pair_and_the_start_hint_read_whole_in_a_small_window(make_window, qtbot) -> None:
    window = make_window()
    window.resize(1008, 572)  # the first window on a 1024x640 screen
    qtbot.wait(50)
    bar = window.pair_bar
    assert bar.target.text() == "none loaded"
    assert not bar.target.is_elided(), bar.target.shown_text()  # not "none…aded"
    assert bar.status.text() == "Choose a pair to start →"
    assert not bar.status.is_elided(), bar.status.shown_text()  # not "Choose a pair to star…"


# --- 8. keys, menus, Continue after Stop, settings -------------------------------------------


def test_the_menu_bar_holds_the_windows_actions(make_window) -> None:
    window = make_window()
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    assert list(menus) == ["File", "Edit", "View", "Pair", "Help"]

    def texts(name: str) -> set[str]:
        return {a.text().replace("&", "") for a in menus[name].actions() if not a.isSeparator()}

    assert {"New chat", "Export conversation as Markdown…", "Quit"} <= texts("File")
    assert {"Send", "Stop", "Continue", "Regenerate", "Copy answer", "Settings"} <= texts("Edit")
    assert {"Settings", "Charts", "Theme"} <= texts("View")
    assert {"Pair wizard…", "Local GGUF files…", "Demo pair", "Reload pair"} <= texts("Pair")
    assert {"Keyboard shortcuts", "About SpecDeck"} <= texts("Help")
    assert window.stop_action.shortcut() == QKeySequence("Esc")
    assert window.new_chat_action.shortcut() == QKeySequence(QKeySequence.StandardKey.New)
    assert QKeySequence("Ctrl+Return") in window.send_action.shortcuts()
    assert not window.stop_action.isEnabled()  # Esc is left alone while nothing runs


def test_ctrl_enter_sends_esc_stops_ctrl_n_starts_a_new_chat(make_window, qtbot, tiny_pair) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    box = window.chat.input
    box.setFocus()
    qtbot.keyClicks(box, "hello the model")
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as finished:
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        qtbot.keyClick(box, Qt.Key.Key_Escape)
    assert finished.args[0].cancelled
    assert window.conversation.messages[0].content == "hello the model"
    assert window.conversation.messages[-1].role == "assistant"
    qtbot.keyClick(box, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.conversation.messages == ()


def test_an_answer_stopped_by_the_person_can_be_continued(make_window, qtbot, tiny_pair) -> None:
    window = make_window(LONG)
    load(window, qtbot, *tiny_pair)
    window.chat.input.setPlainText("hello the model")
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as stopped:
        window.chat.input.submit()
        qtbot.waitUntil(lambda: window.charts.samples > 0, timeout=30_000)
        window.stop()
    assert stopped.args[0].cancelled
    first = window.conversation.messages[-1]
    assert first.role == "assistant" and first.stats["stopped"] and first.content
    button = window.chat.continue_button
    assert not button.isHidden() and button.isEnabled()
    assert window.continue_action.isEnabled()
    assert "Continue writes more" in window.chat.transcript.toPlainText()
    window.settings_panel.update_settings(max_tokens=16)  # the rest, briefly
    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as more:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    done = more.args[0]
    assert not done.cancelled and done.speculative.tokens > 0
    assert [m.role for m in window.conversation.messages] == ["user", "assistant"]
    message = window.conversation.messages[-1]
    assert message.content == first.content + done.speculative.text
    assert message.stats["continued"] == 1 and "stopped" not in message.stats


def test_a_context_smaller_than_max_tokens_is_refused_as_typed(make_window, qtbot) -> None:
    window = make_window(Settings(max_tokens=3000, n_ctx=4096))
    context = window.settings_panel.fields["n_ctx"]
    type_into(qtbot, context, "2048")
    assert "Max tokens (3000)" in (context.error() or ""), context.error()
    assert window.settings.n_ctx == 4096 and SettingsStore().load().n_ctx == 4096
    assert "Context size" in window.settings_panel.refusal()
    type_into(qtbot, window.settings_panel.fields["max_tokens"], "1000")
    type_into(qtbot, context, "2048")
    assert context.error() is None and window.settings.n_ctx == 2048


def test_more_threads_than_cores_are_accepted_with_a_warning(make_window, qtbot) -> None:
    window = make_window()
    cores = default_threads()
    field = window.settings_panel.fields["n_threads"]
    type_into(qtbot, field, str(cores * 32))
    assert field.error() is None and window.settings.n_threads == cores * 32
    assert field.warning.isVisible() and f"{cores} cores" in field.warning.text()
    assert window.settings_panel.refusal() == ""  # a warning does not block Send
    type_into(qtbot, field, "1")
    assert field.warning.isHidden() and window.settings.n_threads == 1
    again = make_window()  # loaded settings say it too
    assert again.settings_panel.fields["n_threads"].warning.isHidden()


def test_a_decimal_comma_is_read_where_the_locale_writes_it(make_window, qtbot) -> None:
    previous = QLocale()
    QLocale.setDefault(QLocale(QLocale.Language.German, QLocale.Country.Germany))
    try:
        window = make_window()
        field = window.settings_panel.fields["temperature"]
        type_into(qtbot, field, "0,7")
        assert field.error() is None and window.settings.temperature == 0.7
        type_into(qtbot, field, "0.5")  # the dot is still understood
        assert window.settings.temperature == 0.5
        type_into(qtbot, window.settings_panel.fields["top_p"], "0,9")
        assert window.settings.top_p == 0.9 and SettingsStore().load().top_p == 0.9
    finally:
        QLocale.setDefault(previous)


def test_weight_repacking_is_a_choice_box(make_window) -> None:
    window = make_window(Settings(weight_repacking="on"))
    panel = window.settings_panel
    assert "weight_repacking" not in panel.fields
    box = panel.findChild(QComboBox, "weight_repacking")
    assert box is not None
    assert [box.itemData(i) for i in range(box.count())] == ["auto", "on", "off"]
    assert box.currentData() == "on"
    box.setCurrentIndex(box.findData("off"))
    assert window.settings.weight_repacking == "off"
    assert SettingsStore().load().weight_repacking == "off"


# --- 9. the smaller things -------------------------------------------------------------------


def test_double_clicking_a_conversation_opens_it(make_window, qtbot, isolated) -> None:  # noqa: ANN001
    store = ConversationStore()
    for index in range(2):
        message = ChatMessage("user", f"question {index}")
        store.save(Conversation(f"c{index}", f"chat {index}", 1.0 + index, 2.0 + index, (message,)))
    window = make_window()
    window.side.setCurrentWidget(window.conversations)
    qtbot.waitExposed(window)
    listing = window.conversations.list
    item = listing.item(1)
    wanted = item.data(Qt.ItemDataRole.UserRole)
    assert window.conversation.id != wanted
    spot = listing.visualItemRect(item).center()
    qtbot.mouseClick(listing.viewport(), Qt.MouseButton.LeftButton, pos=spot)
    qtbot.mouseDClick(listing.viewport(), Qt.MouseButton.LeftButton, pos=spot)
    qtbot.waitUntil(lambda: window.conversation.id == wanted, timeout=2000)
    assert window.conversations.list.currentItem().data(Qt.ItemDataRole.UserRole) == wanted


def test_a_code_fence_first_and_pasted_code_keep_their_shape(qtbot) -> None:
    from app.ui.transcript import Transcript

    transcript = Transcript()
    qtbot.addWidget(transcript)
    answer = "```python\nx = 1\ny = 2\n```\nDone."
    pasted = "Why?\ndef f(x):\n    if x:\n        return 1\n    return 2"
    transcript.show_messages(
        [
            ChatMessage("user", pasted),
            ChatMessage("assistant", answer, stats={"kinds": [["a", len(answer)]]}),
        ]
    )
    code: dict[str, bool] = {}
    block = transcript.document().begin()
    while block.isValid():
        fmt = block.blockFormat()
        fenced = fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.nonBreakableLines()
        code[block.text()] = fenced
        if block.text() == "x = 1":
            first_code = block.position()
        block = block.next()
    assert code["x = 1"] and code["y = 2"] and not code["Done."], code
    shown = transcript.toPlainText().replace("\u00a0", " ")
    assert "def f(x):\n    if x:\n        return 1\n    return 2" in shown, shown
    found = transcript.kind_at(first_code)  # the colours still line up with the text
    assert found is not None and found[0] is TokenKind.ACCEPTED


def test_the_demo_pair_is_named(make_window, qtbot, tiny_pair, tmp_path, monkeypatch) -> None:
    from app.engine.quantize import quantized_path
    from app.models.shipped import QWEN_CODER_05B

    cache = tmp_path / "models"
    monkeypatch.setenv("SPECDECK_MODEL_CACHE", str(cache))
    cache.mkdir()
    source = cache / QWEN_CODER_05B.filename
    target, draft = quantized_path(source, "F32"), quantized_path(source, "Q2_K")
    shutil.copy(tiny_pair[0], target)  # the demo pair's files, where the demo keeps them
    shutil.copy(tiny_pair[1], draft)
    window = make_window(FAST)
    load(window, qtbot, target, draft)
    assert window.pair_bar.pair_name.text() == "Demo pair"
    assert "Qwen2.5-Coder" in window.pair_bar.pair_name.toolTip()
    assert window.settings.pair_name == ""  # named, not a saved pair


def test_exports_typed_without_an_extension_get_one(make_window, qtbot, tmp_path) -> None:
    window = make_window()
    with Dialogs(pick(tmp_path / "chart")):
        window.charts._export_png_dialog("acceptance")
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "chart").exists()
    with Dialogs(pick(tmp_path / "run")):
        window.charts._export_stats_dialog("csv")
    assert (tmp_path / "run.csv").read_text().startswith("step,drafted,accepted")
    store = ConversationStore()
    store.save(Conversation("c1", "A chat", 1.0, 2.0, (ChatMessage("user", "Hello"),)))
    with Dialogs(pick(tmp_path / "notes")):
        window.conversations.export("c1", "md")
    assert "Hello" in (tmp_path / "notes.md").read_text()
