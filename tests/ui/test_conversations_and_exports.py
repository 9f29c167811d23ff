"""Conversations and exports from the window: a double click opens a conversation, the
Markdown export names the pair and the settings, and an export typed without an extension
gets one."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt

from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings
from tests.ui.conftest import ask, load
from tests.ui.dialogs import Dialogs, pick

FAST = Settings(max_tokens=48, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


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


def test_markdown_export_names_the_pair_and_settings(make_window, qtbot, tiny_pair, isolated):  # noqa: ANN001, ANN201
    from app.store.conversations import to_markdown

    window = make_window(replace(FAST, max_tokens=8, temperature=0.5, seed=3))
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    text = to_markdown(window.conversation)
    assert "> target.gguf + draft.gguf (draft model)" in text
    assert "temperature 0.5" in text and "rule rejection" in text and "seed 3" in text


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
