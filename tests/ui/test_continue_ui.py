"""Continue in the window: offered only under an answer cut off at the token limit, and it
writes more of that same message."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.store.conversations import ChatMessage, Conversation, ConversationStore
from app.store.settings import Settings
from tests.ui.conftest import ask, load

CUT = Settings(max_tokens=8, n_ctx=1024, temperature=0.0, seed=1, n_threads=1, baseline=True)
OFFSCREEN_SHOT = Path("/tmp/session-continue.png")


def test_continue_extends_the_cut_off_answer_and_saves_it(make_window, qtbot, tiny_pair) -> None:  # noqa: ANN001
    window = make_window(CUT)
    button = window.chat.continue_button
    assert button.isHidden()  # an empty chat has nothing to continue
    load(window, qtbot, *tiny_pair)
    done = ask(window, qtbot, "hello the model")
    assert done.speculative.stop_reason.value == "max_tokens"
    first = window.conversation.messages[-1]
    assert first.stats["stop_reason"] == "max_tokens" and first.stats["tokens"] == 8
    assert not button.isHidden() and button.isEnabled()
    shown = window.chat.transcript.toPlainText()
    assert "cut off at Max tokens" in shown and "Continue writes more" in shown
    window.grab().save(str(OFFSCREEN_SHOT))

    with qtbot.waitSignal(window.answer_finished, timeout=60_000) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        assert button.isHidden()  # not offered again while it writes
        shown = window.chat.transcript.toPlainText()
        assert "continuing…" in shown and "Continue writes more" not in shown
        assert "answering…" not in shown  # the same message grows; no new one below it
    more = blocker.args[0].speculative
    assert more.tokens > 0
    assert [m.role for m in window.conversation.messages] == ["user", "assistant"]
    message = window.conversation.messages[-1]
    assert message.content == first.content + more.text and len(message.content) > len(
        first.content
    )
    assert message.stats["tokens"] == 8 + more.tokens and message.stats["continued"] == 1
    assert message.stats["stop_reason"] == more.stop_reason.value
    kinds = message.stats["kinds"]
    assert sum(count for _, count in kinds) == len(message.content)  # colours cover it all
    assert message.created == first.created
    assert "continued" in window.chat.transcript.toPlainText()
    stored = ConversationStore().load(window.conversation.id)
    assert stored.messages[-1].content == message.content
    assert stored.messages[-1].stats["tokens"] == message.stats["tokens"]
    # cut again (8 more tokens at most): still offered; finished: not offered
    assert button.isHidden() is (more.stop_reason.value != "max_tokens")


def test_continue_is_offered_only_for_an_unfinished_last_answer(make_window, isolated) -> None:  # noqa: ANN001
    store = ConversationStore()
    cut = ChatMessage("assistant", "Once upon", stats={"stop_reason": "max_tokens"})
    finished = ChatMessage("assistant", "The end.", stats={"stop_reason": "eog"})
    stopped = ChatMessage("assistant", "Once", stats={"stop_reason": "max_tokens", "stopped": True})
    # issue 20: an answer the person stopped can be continued like one cut off at Max tokens
    halted = ChatMessage("assistant", "Once", stats={"stop_reason": "cancelled", "stopped": True})
    # stopped while the baseline ran: the answer itself had finished
    done_first = ChatMessage("assistant", "The end.", stats={"stop_reason": "eog", "stopped": True})
    question = ChatMessage("user", "Tell a story")
    cases = {
        "cut": ((question, cut), True),
        "finished": ((question, finished), False),
        "stopped": ((question, stopped), True),
        "halted": ((question, halted), True),
        "donefirst": ((question, done_first), False),
        "cutthenasked": ((question, cut, ChatMessage("user", "and?")), False),
        "cutbeforefinished": ((question, cut, question, finished), False),
    }
    for name, (messages, _) in cases.items():
        store.save(Conversation(name, name, 1.0, 2.0, messages))
    window = make_window()
    for name, (_, offered) in cases.items():
        window.open_conversation(name)
        assert window.conversation.id == name
        assert window.chat.continue_button.isHidden() is not offered, name
        said = "Continue writes more" in window.chat.transcript.toPlainText()
        assert said is offered, name
    window.open_conversation("cut")
    window.new_chat()
    assert window.chat.continue_button.isHidden()
