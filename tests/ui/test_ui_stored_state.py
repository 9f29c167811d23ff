"""Stored state never stops the window: hostile settings and conversation files at start-up,
and a data or config folder that refuses writes while chatting and when closing. Real files,
real widgets, the tiny synthetic pair through real llama.cpp."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings, SettingsStore
from tests.ui.conftest import ask, load
from tests.unwritable import make_unwritable, make_writable, unwritable

FAST = Settings(max_tokens=24, n_ctx=1024, temperature=0.0, seed=1, n_threads=1, baseline=False)


def _write_conversation(folder: Path, name: str, text: str, **overrides: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    conv = Conversation.new().with_message(ChatMessage("user", text))
    (folder / f"{name}.json").write_text(json.dumps({**conv.to_json(), **overrides}))


def test_settings_of_the_wrong_type_start_the_window_with_a_note(make_window, isolated) -> None:
    config = isolated / "config"
    config.mkdir()
    (config / "settings.json").write_text(
        json.dumps(
            {
                "max_tokens": "100",
                "baseline": "no",
                "temperature": "0.7",  # seen in practice
                "colour_style": "underline",
                "target_path": "/no/such/dir/\u0000.gguf",
            }
        )
    )
    (config / "window.ini").write_text("[General]\nsideTab=abc\ngeometry=@ByteArray(junk)\n")
    window = make_window()
    banner = window.chat.notes_banner
    assert not banner.isHidden()
    for name in ("max_tokens", "baseline", "temperature", "target_path"):
        assert f"&quot;{name}&quot;" in banner.label.text() or f'"{name}"' in banner.label.text()
    assert window.chat.baseline_box.isChecked()  # the default, not "no"
    assert window.settings_panel.fields["max_tokens"].edit.text() == "256"
    assert window.settings_panel.fields["temperature"].edit.text() == "0.0"
    assert window.chat.style_box.currentData() == "underline"  # a good value is kept
    assert window.pair_bar.status.text() == "Choose a pair to start →"


def test_conversation_files_with_odd_ids_are_repaired_or_skipped(make_window, isolated) -> None:
    folder = isolated / "data" / "conversations"
    _write_conversation(folder, "abc123", "hello from a renamed file", id="../../../etc/passwd")
    _write_conversation(folder, "my chat", "a name with a space")
    (folder / "broken.json").write_bytes(b"\xff\xfe{")
    window = make_window()
    assert window.conversation.id == "abc123"
    assert "hello from a renamed file" in window.chat.transcript.toPlainText()
    assert window.conversations.ids() == ["abc123"]
    text = window.chat.notes_banner.label.text()
    assert not window.chat.notes_banner.isHidden()
    assert "abc123.json" in text and "my chat.json" in text and "broken.json" in text
    assert "<script" not in text  # notes are shown as text, never as markup
    assert (folder / "my chat.json").exists() and (folder / "broken.json").exists()


def test_read_only_data_folder_keeps_message_and_answer_and_saves_later(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    window.save_retry.setInterval(200)
    folder = isolated / "data" / "conversations"
    banner = window.chat.save_banner
    with unwritable(folder):
        done = ask(window, qtbot, "keep this question")
        assert "keep this question" in window.chat.transcript.toPlainText()
        roles = [m.role for m in window.conversation.messages]
        assert roles == ["user", "assistant"]
        assert window.conversation.messages[1].content == done.speculative.text
        assert not banner.isHidden()
        assert "cannot save: " in banner.label.text() and str(folder) in banner.label.text()
        assert window.statusBar().currentMessage().startswith("cannot save: ")
        assert list(folder.glob("*.json")) == [] and window.save_retry.isActive()
        window.new_chat()  # the unsaved one stays listed and opens from memory
        listed = window.conversations.list.item(0).text()
        assert "keep this question" in listed and "not saved yet" in listed
        window.open_conversation(window.conversations.ids()[0])
        assert [m.role for m in window.conversation.messages] == ["user", "assistant"]

        make_writable(folder)  # the retry timer writes what was kept in memory
        path = folder / f"{window.conversation.id}.json"
        qtbot.waitUntil(path.is_file, timeout=5000)
        assert ConversationStore().load(window.conversation.id) == window.conversation
        assert banner.isHidden() and not window.save_retry.isActive()
        assert "not saved yet" not in window.conversations.list.item(0).text()

        make_unwritable(folder)  # fails again; then the next Send's save writes both turns
        ask(window, qtbot, "second question")
        assert not banner.isHidden()
        window.save_retry.stop()  # prove the save itself retries, not only the timer
        make_writable(folder)
        ask(window, qtbot, "third question")
    saved = ConversationStore().load(window.conversation.id)
    assert [m.content for m in saved.messages if m.role == "user"] == [
        "keep this question",
        "second question",
        "third question",
    ]
    assert saved == window.conversation and banner.isHidden()


def test_closing_with_unwritable_folders_never_raises_and_rescues(
    make_window, qtbot, isolated, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(isolated))
    window = make_window()
    config, folder = isolated / "config", isolated / "data" / "conversations"
    with unwritable(config), unwritable(folder):
        window.chat.baseline_box.setChecked(False)  # a settings change that cannot be saved
        assert "cannot save: " in window.chat.save_banner.label.text()
        assert str(config / "settings.json") in window.chat.save_banner.label.text()
        window.close()  # pytest-qt fails the test on an exception inside closeEvent
        assert not window.save_retry.isActive()
    err = capsys.readouterr().err
    assert "cannot save: " in err and "copied to" in err
    rescued = next(isolated.glob("specdeck-unsaved-*"))
    assert not SettingsStore(rescued).load().baseline
    assert SettingsStore().load().baseline  # the real file was never half-written


def test_deleting_in_a_read_only_folder_is_reported(make_window, isolated) -> None:
    folder = isolated / "data" / "conversations"
    _write_conversation(folder, "keepme", "still here")
    window = make_window()
    with unwritable(folder):
        window.conversations.delete_conversation("keepme")
        assert "Cannot delete the conversation" in window.chat.error_banner.label.text()
        assert window.conversations.ids() == ["keepme"]
    assert (folder / "keepme.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_window_layout_file_that_would_block_or_flood_is_moved_aside(
    make_window, isolated, kind: str
) -> None:
    config = isolated / "config"
    config.mkdir()
    layout = config / "window.ini"
    if kind == "fifo":
        os.mkfifo(layout)  # QSettings would wait for a writer forever
    else:
        with layout.open("wb") as handle:  # QSettings would read 2 GB
            handle.truncate(2 << 30)
    window = make_window()
    assert "window.ini" in window.chat.notes_banner.label.text()
    assert len(list(config.glob("window.ini.damaged-*"))) == 1
    window.close()
    assert layout.is_file() and layout.stat().st_size < 10_000  # a fresh one was written


@pytest.mark.skipif(sys.platform == "win32", reason="/dev/zero")
def test_stored_message_with_an_endless_image_does_not_hang_start_up(isolated: Path) -> None:
    """Markdown ``![x](/dev/zero)`` made QTextBrowser read /dev/zero forever. Run in a child
    process so that a regression fails on the timeout instead of hanging the suite."""
    _write_conversation(
        isolated / "data" / "conversations",
        "endless",
        'look: ![x](/dev/zero) <img src="/dev/urandom"> ![y](file:///dev/zero)',
    )
    child = (
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from app.ui.main_window import MainWindow\n"
        "window = MainWindow(autoload=False)\n"
        "window.show(); app.processEvents()\n"
        "print('started:', window.conversation.id, flush=True)\n"
        "window.close()\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60
    )
    assert "started: endless" in result.stdout, result.stderr[-2000:]
