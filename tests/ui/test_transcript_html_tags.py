"""An HTML tag that is never closed no longer hides the rest of a message.

Qt's Markdown import holds back the text after an HTML tag until as many tags have closed as
opened, and drops what it holds at the end. An answer saying "declare a List<String>", one
with a ``<br>``, an ``<img …>`` written without its slash or a stray ``</div>`` showed only
what came before it once it was rendered (while it streamed, as plain text, it was whole).
Such a tag is now shown as text, or written self-closing when HTML has it empty; tags that
pair up stay HTML, and code keeps its characters.
"""

from __future__ import annotations

import pytest

from app.engine.events import TokenKind
from app.store.conversations import ChatMessage
from app.ui.message_text import balanced_html
from app.ui.transcript import Transcript

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

REST = "The rest of the answer.\n\nA second paragraph."


def _shown(qapp, text: str, kinds: list | None = None) -> tuple[Transcript, str]:  # noqa: ANN001
    transcript = Transcript()
    transcript.resize(800, 600)
    transcript.show()
    stats: dict = {"tokens": 9}
    if kinds is not None:
        stats["kinds"] = kinds
    answer = ChatMessage("assistant", text, stats=stats)
    transcript.show_messages([ChatMessage("user", "a question"), answer])
    qapp.processEvents()
    return transcript, transcript.toPlainText().split("Assistant", 1)[1]


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("In Java, declare a List<String> for the names.", "declare a List<String> for the"),
        ("Put your code in a <script> tag.", "in a <script> tag."),
        ("A <textarea> holds many lines.", "A <textarea> holds"),
        ("Everything goes in <body>.", "goes in <body>."),
        ("Close it with </body> and </html>.", "with </body> and </html>."),
        ("Text </div> more.", "Text </div> more."),
        ("A <span> left open.", "A <span> left open."),
        ("- the <select> element\n- the second item", "the <select> element"),
        ("Line one<br>line two.", "Line one\nline two."),
        ('An <img src="/nowhere/x.png" alt="a cat"> here.', "An [image: a cat] here."),
        ("<div>\n<p>open inside a block\n</div>", "open inside a block"),
    ],
)
def test_a_tag_left_open_hides_nothing_after_it(qapp, said: str, shown: str) -> None:  # noqa: ANN001
    transcript, text = _shown(qapp, f"{said}\n\n{REST}")
    assert shown in text, text
    assert "The rest of the answer." in text and "A second paragraph." in text, text
    transcript.close()


def test_tags_that_pair_up_stay_html_and_code_keeps_its_characters(qapp) -> None:  # noqa: ANN001
    code = "```html\n<textarea>\n<div>\n```"
    said = f"A <b>bold</b> word, `<input>` and `` <br> `` in code.\n\n{code}\n\n{REST}"
    transcript, text = _shown(qapp, said)
    assert "A bold word, <input> and <br> in code." in text, text
    assert "<textarea>\n<div>" in text and "A second paragraph." in text, text
    assert balanced_html(said) == said  # nothing here needed a change
    transcript.close()


def test_the_words_after_a_tag_keep_their_token_colours(qapp) -> None:  # noqa: ANN001
    head, tail = "Declare a List<String> first, ", "then the accepted words."
    kinds = [["t", len(head)], ["a", len(tail)]]
    transcript, _ = _shown(qapp, head + tail, kinds)
    text = transcript.toPlainText()
    start = text.index("then the accepted")
    for offset, char in enumerate(tail):
        if char != " ":
            found = transcript.kind_at(start + offset)
            assert found is not None and found[0] is TokenKind.ACCEPTED, (offset, char)
    found = transcript.kind_at(text.index("<String>") + 1)
    assert found is not None and found[0] is TokenKind.TARGET
    transcript.close()


def test_what_is_changed_in_the_source() -> None:
    assert balanced_html("a List<String> b") == "a List&lt;String> b"
    assert balanced_html("a<br>b <hr> c") == "a<br/>b <hr/> c"
    assert balanced_html("<div><span>x</div>") == "<div>&lt;span>x</div>"
    assert balanced_html("x </div> y") == "x &lt;/div> y"
    assert balanced_html("<https://example.com> and <a@b.example>") == (
        "<https://example.com> and <a@b.example>"
    )
    assert balanced_html("`` a ` <b> ``, <i>") == "`` a ` <b> ``, &lt;i>"
    assert balanced_html("<p>one\n\ntwo</p>") == "<p>one\n\ntwo</p>"
    titled = "[a link](https://example.com \"<img src='x'>\") and <br>"  # a title is no HTML
    assert balanced_html(titled) == titled.replace("<br>", "<br/>")
