"""A reopened conversation keeps its comparison: the target-only answer stored with the
message is shown under it, as after the live answer."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings
from tests.ui.conftest import ask, load

WITH_BASELINE = Settings(
    max_tokens=16, n_ctx=1024, temperature=0.0, seed=1, n_threads=1, baseline=True
)


def test_a_reopened_answer_shows_its_baseline_in_the_comparison(
    make_window, qtbot, tiny_pair
) -> None:  # noqa: ANN001
    window = make_window(WITH_BASELINE)
    load(window, qtbot, *tiny_pair)
    done = ask(window, qtbot, "hello the model")
    assert done.baseline is not None and done.baseline.text
    live_verdict = window.chat.verdict.text()
    conversation_id = window.conversation.id
    stored = window.conversation.messages[-1].stats["baseline"]
    assert stored["text"] == done.baseline.text and stored["tokens"] == done.baseline.tokens

    window.new_chat()
    assert window.chat.base_view.toPlainText() == ""
    window.open_conversation(conversation_id)
    chat = window.chat
    assert chat.base_view.toPlainText() == done.baseline.text
    assert chat.spec_view.toPlainText() == done.speculative.text
    assert f"{done.baseline.tokens} tokens" in chat.base_header.text()
    assert chat.verdict.text() == live_verdict
    if not chat.compare.isChecked():  # folded unless the answers part
        qtbot.mouseClick(chat.compare, Qt.MouseButton.LeftButton)
    assert chat.answer_box.isVisible() and chat.base_box.isVisible()
    window.close()

    again = make_window()  # a new session opens the last conversation the same way
    assert again.conversation.id == conversation_id
    assert again.chat.base_view.toPlainText() == done.baseline.text
    assert again.chat.spec_view.toPlainText() == done.speculative.text


def test_where_the_answers_part_is_marked_in_both_and_the_comparison_opens(
    make_window, isolated
) -> None:  # noqa: ANN001
    answer = ChatMessage(
        "assistant",
        "The cat sat",
        stats={
            "tokens": 3,
            "kinds": [["a", 4], ["t", 7]],
            "verdict": "differs at token 1",
            "baseline": {"text": "The dog sat", "tokens": 3, "tok_s": 2.0, "diverged_at": 4},
        },
    )
    question = ChatMessage("user", "Q")
    ConversationStore().save(Conversation("parted", "Parted", 1.0, 2.0, (question, answer)))
    window = make_window()
    chat = window.chat
    assert chat.compare.isChecked() and chat.answer_box.isVisible()
    for dark in (False, True):  # a theme change repaints the stored text, marks and all
        window.set_theme("dark" if dark else "light")
        for view, word in ((chat.spec_view, "cat"), (chat.base_view, "dog")):
            marks = view.extraSelections()
            assert len(marks) == 1 and marks[0].cursor.selectedText() == word
            assert view.toPlainText().startswith("The ")
    assert chat.verdict.text() == "differs at token 1"


def test_an_answer_without_a_stored_baseline_says_it_was_not_kept(make_window, isolated) -> None:  # noqa: ANN001
    answer = ChatMessage("assistant", "Hello", stats={"tokens": 1})
    question = ChatMessage("user", "Q")
    ConversationStore().save(Conversation("nobase", "No base", 1.0, 2.0, (question, answer)))
    window = make_window(WITH_BASELINE)
    assert window.chat.spec_view.toPlainText() == "Hello"
    assert window.chat.base_view.toPlainText() == ""
    assert "Not kept" in window.chat.base_view.placeholderText()
    assert window.chat.base_box.isHidden() and not window.chat.compare.isChecked()
