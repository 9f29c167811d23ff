"""Issue 33 §2 in the window: the pair's method named where the pair is, the guard banner's
words for the loaded drafter and its history, figures that mean something from the first
token, and a status bar that shows only the current answer and the current pair."""

from __future__ import annotations

from dataclasses import replace
from html import unescape
from pathlib import Path

from app.devtools.test_models.synthetic import write_tiny_qwen35
from app.engine.config import DraftSource
from app.engine.events import GuardEvent, GuardReason, StepEvent, TokenEvent, TokenKind
from app.store.conversations import ConversationStore
from app.store.settings import Settings
from app.workers.messages import EventBatch
from tests.ui.conftest import ask, load

FAST = Settings(max_tokens=12, n_ctx=1024, temperature=0.0, seed=1, n_threads=1, baseline=False)
PAUSE = GuardEvent(
    True, 0.875, 0.95, 2, reason=GuardReason.COST, draft_cost_fraction=0.5, probe_in=64,
    window=8, lookups_go_on=True,
)  # fmt: skip
RESUME = GuardEvent(False, 0.9, 0.95, 50, reason=GuardReason.PROBE)


def _step(step: int, drafted: int, accepted: int, break_even: float = 0.9) -> StepEvent:
    return StepEvent(step, drafted, accepted, 1.0, 5.0, 0.0, 4, 0.5, break_even)


def _load_mtp(window, qtbot, path: Path) -> None:  # noqa: ANN001
    with qtbot.waitSignal(window.pair_loaded, timeout=60_000):
        window.load_pair(str(path), None, DraftSource.MTP)


def test_an_mtp_answer_is_saved_and_shown_with_its_heads_not_ngram_drafting(
    make_window,
    qtbot,
    isolated: Path,  # noqa: ANN001
) -> None:
    """Seen: "qwen35-mtp.gguf + n-gram drafting" under an MTP answer and in its file."""
    mtp = write_tiny_qwen35(isolated / "qwen35-mtp.gguf")
    window = make_window(FAST)
    _load_mtp(window, qtbot, mtp)
    ask(window, qtbot, "hello")
    label = "qwen35-mtp.gguf + its own heads (MTP, 1 head)"
    assert window.conversation.messages[-1].stats["pair"] == label
    assert label in window.chat.transcript.toPlainText()
    saved = ConversationStore().load(window.conversation.id).messages[-1]
    assert saved.stats["pair"] == label and "n-gram" not in str(saved.stats)


def test_the_banner_speaks_of_the_heads_and_keeps_why_it_paused(
    make_window,
    qtbot,
    isolated: Path,  # noqa: ANN001
) -> None:
    """Seen: "Try a smaller draft (a lower quantization…)" for MTP heads, "the target answers
    alone" while lookups drafted, and only "Drafting resumed at step 50" at the end."""
    window = make_window(FAST)
    _load_mtp(window, qtbot, write_tiny_qwen35(isolated / "heads.gguf"))
    window.chat.begin_answer(False)
    window.chat.ingest(EventBatch(1, "speculative", (_step(0, 3, 3), PAUSE), 1.0, 4))
    text = unescape(window.chat.guard_banner.label.text())
    assert text.startswith("<b>Drafting paused at step 2</b>: ")
    assert "smaller draft" not in text and "lower quantization" not in text
    assert "lower the draft length" in text and "turn speculation off" in text
    assert "Prompt lookups still draft" in text and "target answers alone" not in text
    assert "the target's own MTP heads are probed again in 64 tokens" in text
    window.chat.ingest(EventBatch(1, "speculative", (_step(9, 4, 2), RESUME), 2.0, 60))
    text = unescape(window.chat.guard_banner.label.text())
    assert text.startswith("<b>Drafting paused at step 2 (cost)</b>: ")
    assert "prompt lookups kept drafting (4 tokens), resumed at step 50" in text
    assert "a draft pass costs 50 % of a target pass" in text  # why it paused is kept
    assert "acceptance" in window.chat.guard_banner.toolTip()  # the two figures told apart


def test_the_first_token_shows_no_rate_counting_the_wait_for_the_prompt(make_window) -> None:  # noqa: ANN001
    """Seen: "1 tokens · 0.07 tok/s" at the first token."""
    window = make_window(FAST)
    window.chat.begin_answer(False)
    token = TokenEvent(0, 5, "Hi", TokenKind.TARGET, 0)
    window._on_batch(EventBatch(1, "speculative", (token,), 14.0, 1))
    header = window.chat.spec_header.text()
    assert header.endswith("· 1 token") and "tok/s" not in header
    assert window.status["speed"].text() == "speculative 1 token"
    window._on_batch(EventBatch(1, "speculative", (), 15.0, 5))
    assert "5 tokens · 4.00 tok/s" in window.chat.spec_header.text()  # from the first token
    assert window.status["speed"].text() == "speculative 4.00 tok/s"


def test_the_break_even_legend_keeps_its_figure_and_never_shows_zero(make_window) -> None:  # noqa: ANN001
    """Seen: the legend moving between "break-even 98.2 %" and "break-even 0.0 %"."""
    window = make_window(FAST)
    charts = window.charts
    label = charts.legends[0].getLabel(charts.break_key)
    charts.ingest(EventBatch(1, "speculative", (_step(0, 2, 2, 0.982),), 1.0, 3))
    charts._redraw()
    assert label.text == "break-even 98.2 %"
    charts.ingest(EventBatch(1, "speculative", (_step(1, 2, 1, 0.0),), 2.0, 5))
    charts._redraw()
    assert label.text == "break-even 98.2 %"
    charts.reset()
    assert label.text == "break-even —"


def test_the_status_bar_shows_only_the_current_answer_and_pair(
    make_window,
    qtbot,
    tiny_pair: tuple[Path, Path],  # noqa: ANN001
) -> None:
    """Seen: the last answer's acceptance after New chat and a pair change, and beside the
    next answer's speed while it streamed; "—" while the charts already plotted it."""
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    assert window.status["acceptance"].text().startswith("acceptance")
    assert window.status["acceptance"].text() != "acceptance —"
    window.new_chat()
    assert window.status["acceptance"].text() == "acceptance —"
    assert window.status["speed"].text() == "tok/s —"

    # mid-answer: this answer's acceptance from its own steps, as the charts plot it
    window.status_fields.begin_answer()
    assert window.status["acceptance"].text() == "acceptance —"
    window._on_batch(EventBatch(2, "speculative", (_step(0, 4, 3),), 1.0, 4))
    assert window.status["acceptance"].text() == "acceptance 75 % (3/4 drafted) so far"

    ask(window, qtbot, "hello the model")
    load(window, qtbot, tiny_pair[0], None)  # another pair: n-gram drafting
    assert window.status["acceptance"].text() == "acceptance —"
    assert window.status["speed"].text() == "tok/s —"
    assert "prompt lookup" in window.statusBar().currentMessage()  # the method, named


def test_tokens_per_pass_is_never_below_one(make_window, qtbot, tiny_pair) -> None:  # noqa: ANN001
    """Seen: "0.98 tokens/pass", and "acceptance 100 % (2/2 drafted) · 1.00 tokens/pass"."""
    window = make_window(replace(FAST, max_tokens=24))
    load(window, qtbot, *tiny_pair)
    spec = ask(window, qtbot, "hello the model").speculative
    assert spec.passes > 0 and spec.tokens_per_pass >= 1.0
    assert spec.tokens_per_pass == (spec.passes + spec.accepted) / spec.passes
    if spec.accepted:
        assert "1.00 tokens/pass" not in window.status["acceptance"].text()


def test_the_pair_bar_names_an_assistant_draft_as_check_pair_does(qtbot, isolated: Path) -> None:  # noqa: ANN001
    """Seen: a Gemma 4 assistant pair shown only as "draft model"."""
    from app.devtools.test_models.synthetic_gemma4 import (
        write_tiny_gemma4,
        write_tiny_gemma4_assistant,
    )
    from app.ui.pair_bar import PairBar

    gemma = write_tiny_gemma4(isolated / "gemma4.gguf")
    helper = write_tiny_gemma4_assistant(isolated / "gemma4-assistant.gguf", gemma)
    bar = PairBar()
    qtbot.addWidget(bar)
    bar.show_pair(str(gemma), str(helper), DraftSource.MODEL)
    assert bar.source.currentText() == "assistant draft for gemma4"
    bar.show_pair(str(gemma), None, DraftSource.NGRAM)
    assert bar.source.itemText(bar.source.findData(DraftSource.MODEL.value)) == "draft model"
