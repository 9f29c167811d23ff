"""The chat column: transcript, banners, the two answer panes, verdict line and prompt box.

Tokens from the worker are queued in the answer's message in the transcript and in the
panes, and painted on a 40 ms timer, so the UI thread paints at most 25 times a second
however fast the engine streams. The panes (the token stream beside the target-only answer)
are folded away unless the person opens them with Compare, or the two answers part.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.engine.events import RunSummary, TextTail, TokenEvent
from app.engine.exactness import Judgement
from app.engine.figures import speed_text
from app.models.drafting import PairDrafting
from app.models.guard_words import AGREEMENT_MEANS, GuardHistory
from app.remote.chat import RemoteAnswer, describe
from app.store.conversations import ChatMessage
from app.ui.answer_verdict import guard_text
from app.ui.banner import Banner
from app.ui.chat_input import MAX_HEIGHT as INPUT_MAX_HEIGHT
from app.ui.chat_input import ChatInput
from app.ui.palette import STYLE_LABELS, STYLES, legend_html
from app.ui.plain_text import markup, plain_label, tooltip
from app.ui.theme import BANNERS
from app.ui.token_view import TokenView
from app.ui.transcript import ANSWERING, Transcript, char_kinds
from app.workers.live_figures import LiveRate, tokens_text
from app.workers.messages import TIMING_RULE, EventBatch

CONTINUE_TIP = (
    "The last answer was stopped or cut off at the token limit (Max tokens): write more of it"
)
REGENERATE_TIP = "Answer the last question again"
REMEASURE_TIP = (
    "The two runs did not get the same share of the CPU, so their speeds cannot be "
    "compared: regenerate this answer and its target-only run to time both again"
)

FLUSH_MS = 40
COMPACT_HEIGHT = 600  # px of chat: below it banners and buttons give way to the answer
MESSAGE_MIN_PX = 120  # the message being written, in a small window (it was ~65 px)
FIRST_TOKEN = "waiting for the first token…"  # the speculative pane before an answer starts
# Of a reopened answer and its baseline, the comparison panes show this many characters
# (painting 50,000 coloured characters takes Qt about 0.3 s); the chat has the rest.
COMPARISON_CHARS = 50_000


def _figures(tokens: object, tok_s: object) -> str:
    """ " · N tokens · R tok/s" from stored figures, each only when it is a number."""
    text = ""
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        text += f" · {tokens} tokens"
    if isinstance(tok_s, int | float) and not isinstance(tok_s, bool):
        text += f" · {speed_text(tok_s)}"
    return text


def _cut_note(length: int) -> str:
    """What a comparison pane leaves out of a long stored text, for its header."""
    if length <= COMPARISON_CHARS:
        return ""
    return f" · the first {COMPARISON_CHARS:,} of {length:,} characters"


def _word_end(text: str, start: int, longest: int = 40) -> int:
    """Where the word at ``start`` ends (at most ``longest`` characters on)."""
    end = start + 1
    while end < min(len(text), start + longest) and not text[end].isspace():
        end += 1
    return end


def _pane(title: str, view: TokenView, note: QLabel | None = None) -> tuple[QWidget, QLabel]:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(2)
    header = QLabel(f"<b>{title}</b>")
    header.setWordWrap(True)  # long figures wrap instead of widening the pane
    layout.addWidget(header)
    layout.addWidget(view, 1)
    if note is not None:
        layout.addWidget(note)
    return box, header


class ChatPanel(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    regenerate_requested = Signal()
    continue_requested = Signal()
    new_chat_requested = Signal()
    style_changed = Signal(str)
    baseline_toggled = Signal(bool)

    def __init__(self, style: str, baseline: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec_view = TokenView(style=style)
        self.spec_view.setObjectName("specView")
        self.base_view = TokenView(style="off")
        self.base_view.setObjectName("baseView")
        self.transcript = Transcript()
        self.transcript.set_style(style)
        self.error_banner = Banner("errorBanner", BANNERS[False]["error"])
        self.guard_banner = Banner("guardBanner", BANNERS[False]["guard"])
        self.guard_banner.setToolTip(tooltip(AGREEMENT_MEANS))  # not the answer's acceptance
        self._dark = False
        # Stored-state banners outlive an answer: begin_answer leaves them as they are.
        self.save_banner = Banner("saveBanner", "background: #FBE3E4; color: #7A0010;")
        self.notes_banner = Banner("notesBanner", "background: #E8F0FB; color: #0B3A6E;")
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self.flush)
        self._generating = False
        self._has_messages = False
        self._last_answer = ""
        self._comparison_cut = False  # the pane shows only part of a stored answer
        self._live_note = ""  # figures of the answer being written, under its message
        self._waiting = False  # the answer waits behind requests served to other programs
        self._spec_summary: RunSummary | None = None  # the speculative run's, once it ended
        self._baseline = False  # the answer being written is followed by the target alone
        self.live_rate = LiveRate()  # each run's speed from its first token on
        self.guard_history = GuardHistory()  # the guard's pauses and resumes in this answer
        self.drafting: PairDrafting | None = None  # how the loaded pair drafts (its words)
        self._can_continue = False
        self._refusal = ""
        self._no_pair = ""  # why no answer can start: no pair loaded ("" when one is)

        self.legend = QLabel(legend_html(style))
        self.legend.setObjectName("legend")
        self.legend.setWordWrap(True)
        self.legend.setStyleSheet("font-size: 11px;")
        spec_box, self.spec_header = _pane("Speculative", self.spec_view, self.legend)
        rule = QLabel("Timing: runs one after the other, each tok/s from its own compute.")
        rule.setToolTip(TIMING_RULE)
        rule.setWordWrap(True)
        rule.setStyleSheet("font-size: 11px; color: palette(mid);")
        self.base_box, self.base_header = _pane("Baseline — target only", self.base_view, rule)
        self.panes = QSplitter(Qt.Orientation.Horizontal)
        self.panes.setObjectName("answerSplitter")
        self.panes.addWidget(spec_box)
        self.panes.addWidget(self.base_box)
        self.panes.setChildrenCollapsible(False)
        self.panes.setStretchFactor(0, 1)
        self.panes.setStretchFactor(1, 1)

        self.verdict = plain_label()  # a stored verdict is text from a file
        self._remote: RemoteAnswer | None = None  # this answer's, when a server wrote it
        self.verdict.setObjectName("verdict")
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict.setStyleSheet("padding: 2px 0;")
        self.verdict.setWordWrap(True)  # the verdict wraps; it never widens the window
        self.verdict.setTextFormat(Qt.TextFormat.PlainText)  # stored verdicts come from files
        self.verdict.hide()  # until there is one
        # offered when the two runs did not get the same machine: their speeds are no speedup
        self.remeasure = QPushButton("Measure again")
        self.remeasure.setObjectName("remeasureButton")
        self.remeasure.clicked.connect(self.regenerate_requested)
        self.remeasure.hide()
        self.style_box = QComboBox()
        self.style_box.setObjectName("colourStyle")
        for key in STYLES:
            self.style_box.addItem(STYLE_LABELS[key], key)
        self.style_box.setCurrentIndex(STYLES.index(style) if style in STYLES else 0)
        self.style_box.setToolTip("How token kinds are shown in the speculative pane")
        self.style_box.currentIndexChanged.connect(self._style_picked)
        self.baseline_box = QCheckBox("Baseline side-by-side")
        self.baseline_box.setObjectName("baselineToggle")
        self.baseline_box.setToolTip("Also answer with the target alone, to compare speed and text")
        self.baseline_box.setChecked(baseline)
        self.baseline_box.toggled.connect(self._baseline_picked)
        verdict_row = QVBoxLayout()  # the verdict gets the full width to wrap in
        verdict_row.setSpacing(2)
        verdict_line = QHBoxLayout()
        verdict_line.addWidget(self.verdict, 1)
        verdict_line.addWidget(self.remeasure, 0, Qt.AlignmentFlag.AlignTop)
        verdict_row.addLayout(verdict_line)
        self.compare = QToolButton()
        self.compare.setObjectName("compareToggle")
        self.compare.setCheckable(True)
        self.compare.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.compare.setAutoRaise(True)
        self.compare.setText("Compare")
        self.compare.setToolTip("The token stream of the answer beside the target-only answer")
        self.compare.toggled.connect(self._compare_toggled)
        self._auto_opened = False
        options = QHBoxLayout()
        options.addWidget(self.compare)
        options.addStretch(1)
        options.addWidget(self.style_box)
        options.addWidget(self.baseline_box)
        verdict_row.addLayout(options)

        self.input = ChatInput()
        self.input.submitted.connect(self.send_requested)
        self.send = QPushButton("Send")
        self.send.setObjectName("sendButton")
        self.send.setDefault(True)
        self.send.clicked.connect(self._send_or_stop)
        self.continue_button = QPushButton("Continue")
        self.continue_button.setObjectName("continueButton")
        self.continue_button.clicked.connect(self.continue_requested)
        self.regenerate = QPushButton("Regenerate")
        self.regenerate.clicked.connect(self.regenerate_requested)
        self.copy = QPushButton("Copy")
        self.copy.setToolTip("Copy the last answer")
        self.copy.clicked.connect(self.copy_answer)
        self.new_chat = QPushButton("New chat")
        self.new_chat.clicked.connect(self.new_chat_requested)
        self._buttons = QGridLayout()
        self._buttons.setAlignment(Qt.AlignmentFlag.AlignTop)
        self._compact: bool | None = None
        input_row = QHBoxLayout()
        input_row.addWidget(self.input, 1)
        input_row.addLayout(self._buttons)

        self.answer_box = QWidget()  # the comparison under the answer, collapsible
        answer_layout = QVBoxLayout(self.answer_box)
        answer_layout.setContentsMargins(0, 0, 0, 0)
        answer_layout.addWidget(self.panes, 1)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.setObjectName("chatSplitter")
        self.split.addWidget(self.transcript)
        self.split.addWidget(self.answer_box)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.save_banner)
        layout.addWidget(self.notes_banner)
        layout.addWidget(self.error_banner)
        layout.addWidget(self.split, 1)
        layout.addWidget(self.guard_banner)
        layout.addLayout(verdict_row)
        layout.addLayout(input_row)
        self.base_box.setVisible(baseline)
        self.set_comparison_open(False)
        self.set_generating(False)
        self._set_compact(False)
        self._room_timer = QTimer(self)  # after a layout change: the message keeps its room
        self._room_timer.setSingleShot(True)
        self._room_timer.setInterval(0)
        self._room_timer.timeout.connect(self.keep_message_room)

    # --- small windows -------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._set_compact(self.height() < COMPACT_HEIGHT)
        self._room_timer.start()

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # a banner, the verdict or a pane
            self._room_timer.start()
        return super().event(event)

    def keep_message_room(self) -> None:
        """In a small window the message being written keeps ``MESSAGE_MIN_PX``: the answer
        panes under it yield first, then an expanded banner (More) shows what room is left,
        its whole text on hover."""
        layout = self.layout()
        if not self._compact or layout is None or not self.transcript.isVisible():
            return
        layout.activate()
        self._give_panes_way()
        short = MESSAGE_MIN_PX - self.transcript.height()
        banners = (self.save_banner, self.notes_banner, self.error_banner, self.guard_banner)
        expanded = [b for b in banners if b.isVisible() and b.expanded]
        if short <= 0 or not expanded:
            return
        for banner in expanded:
            before = banner.label.height()
            banner.limit(before - short)
            short -= before - min(before, banner.label.maximumHeight())
        layout.activate()
        self._give_panes_way()

    def _give_panes_way(self) -> None:
        if self.answer_box.isVisible() and self.transcript.height() < MESSAGE_MIN_PX:
            total = sum(self.split.sizes())
            self.split.setSizes([MESSAGE_MIN_PX, max(total - MESSAGE_MIN_PX, 0)])

    def _set_compact(self, compact: bool) -> None:
        """In a small window the banners and buttons give way to the answer: a long banner
        shows its first lines (More shows the rest) and the buttons stand in two columns."""
        if compact == self._compact:
            return
        self._compact = compact
        for banner in (self.save_banner, self.notes_banner, self.error_banner, self.guard_banner):
            banner.set_compact(compact)
        order = (self.send, self.regenerate, self.copy, self.new_chat, self.continue_button)
        columns = 2 if compact else 1
        for index, button in enumerate(order):
            self._buttons.removeWidget(button)
            self._buttons.addWidget(button, index // columns, index % columns)
        self.input.setMaximumHeight(80 if compact else INPUT_MAX_HEIGHT)

    # --- streaming -----------------------------------------------------------------------

    def set_comparison_open(self, shown: bool, *, auto: bool = False) -> None:
        self.compare.blockSignals(True)
        self.compare.setChecked(shown)
        self.compare.blockSignals(False)
        self._compare_toggled(shown)
        self._auto_opened = auto and shown

    def _compare_toggled(self, shown: bool) -> None:
        self._auto_opened = False
        self.compare.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.answer_box.setVisible(shown)

    def answer_done(self, diverged: bool) -> None:
        """The answer streamed into the chat; the comparison opens when it has news (the
        answers part), and folds again for the next answer unless the person opened it."""
        if diverged and not self.compare.isChecked():
            self.set_comparison_open(True, auto=True)
        elif not diverged and self._auto_opened:
            self.set_comparison_open(False)

    def begin_answer(self, baseline: bool, remote: bool = False) -> None:
        """A new answer: ``baseline`` when a target-only run follows it, ``remote`` when a
        server writes it (no token kinds: no colour legend)."""
        if self._auto_opened:  # opened for the last answer's news, not by the person
            self.set_comparison_open(False)
        self._comparison_cut = False
        self._live_note = ""
        self._spec_summary = None
        self._baseline = baseline
        self._waiting = False
        self.spec_view.clear_tokens(FIRST_TOKEN)
        self.base_view.clear_tokens("runs after the speculative answer" if baseline else "")
        self.base_box.setVisible(baseline)
        self.legend.setVisible(not remote)
        self._set_verdict("")
        self.remeasure.hide()
        self._remote = None
        self.guard_banner.hide()
        self.guard_history.clear()
        self.live_rate.clear()
        self.error_banner.hide()
        self.spec_header.setText("<b>Speculative</b>")
        self.base_header.setText("<b>Baseline — target only</b>")

    def show_waiting(self, text: str) -> None:
        """Why the answer has not started (the engine serves other programs first), under
        the pending message and in the speculative pane; "" when its turn came."""
        if not text and not self._waiting:
            return
        self._waiting = bool(text)
        self.spec_view.setPlaceholderText(text or FIRST_TOKEN)
        self._live_note = text or ANSWERING
        self._start_flush()

    def ingest(self, batch: EventBatch) -> None:
        speculative = batch.run == "speculative"
        view = self.spec_view if speculative else self.base_view
        view.queue(batch.events)
        if speculative:
            self.transcript.stream(batch.events)
            if self.guard_history.add(batch.events):
                self.guard_banner.show_text(guard_text(self.guard_history, self.drafting))
        header = self.spec_header if speculative else self.base_header
        name = "Speculative" if speculative else "Baseline — target only"
        for event in batch.events:
            if isinstance(event, RemoteAnswer):
                self._remote = event if batch.run == "speculative" else self._remote
                base = event if batch.run == "baseline" else None
                if self._remote is not None:
                    pending = self._baseline and base is None  # the baseline server is next
                    self._set_verdict(describe(self._remote, base, baseline_pending=pending))
            elif isinstance(event, RunSummary):  # final figure: generation time, no prefill
                header.setText(
                    f"<b>{name}</b> · {tokens_text(event.tokens)} · {speed_text(event.tok_s)}"
                    f" · TTFT {event.ttft_ms:.0f} ms"
                )
                if speculative:
                    self._spec_summary = event
                    then = " · now the target alone answers, to compare" if self._baseline else ""
                    self._live_note = f"{tokens_text(event.tokens)} written{then}"
                return self._start_flush()
        if batch.tokens and batch.elapsed_s > 0:  # no rate until a second token came
            figures = self.live_rate.text(batch.run, batch.tokens, batch.elapsed_s)
            header.setText(f"<b>{name}</b> · {figures}")
            if speculative:
                self._live_note = f"answering… {figures}"
        self._start_flush()

    def _start_flush(self) -> None:
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def flush(self) -> None:
        painted = self.spec_view.flush() + self.base_view.flush()
        painted += self.transcript.flush(self._live_note)
        if not painted and not self._generating:
            self._flush_timer.stop()

    def set_generating(self, generating: bool) -> None:
        self._generating = generating
        self.send.setText("Stop" if generating else "Send")
        self._update_buttons()
        self.new_chat.setEnabled(not generating)
        if not generating:
            self.flush()
            self._flush_timer.stop()

    def set_conversation_state(
        self, has_messages: bool, last_answer: str, can_continue: bool = False
    ) -> None:
        """Regenerate needs a question, Copy an answer: both are off in an empty chat.
        Continue is shown only while the last answer is one cut off at the token limit."""
        self._has_messages, self._last_answer = has_messages, last_answer
        self._can_continue = can_continue
        self._update_buttons()

    def set_refusal(self, reason: str) -> None:
        """A refused settings value blocks Send (not Stop) and says why."""
        self._refusal = reason
        self._update_buttons()

    def set_no_pair(self, reason: str) -> None:
        """No pair is loaded (nor loading): Send is off and says why; "" when one is."""
        self._no_pair = reason
        self._update_buttons()

    def _update_buttons(self) -> None:
        idle = not self._generating
        blocked = bool(self._refusal or self._no_pair)
        self.send.setEnabled(self._generating or not blocked)
        if self._generating:
            self.send.setToolTip("Stop the answer (within one speculative step)")
        else:
            refused = f"Fix the settings first — {self._refusal}" if self._refusal else ""
            self.send.setToolTip(tooltip(self._no_pair or refused))  # quotes what was typed
        # what answers again is refused for the same reasons as Send, and says so
        why_not = self._no_pair or (f"Fix the settings first — {self._refusal}" if blocked else "")
        self.regenerate.setEnabled(idle and self._has_messages and not blocked)
        self.regenerate.setToolTip(tooltip(why_not or REGENERATE_TIP))
        self.continue_button.setVisible(self._can_continue and idle)
        self.continue_button.setEnabled(idle and not blocked)
        self.continue_button.setToolTip(tooltip(why_not or CONTINUE_TIP))
        self.copy.setEnabled(idle and bool(self._last_answer or self.spec_view.text()))
        self.remeasure.setEnabled(idle and not blocked)
        self.remeasure.setToolTip(tooltip(why_not or REMEASURE_TIP))

    def baseline_not_run(self, reason: str) -> None:
        self.base_view.clear_tokens(reason)
        self.base_header.setText("<b>Baseline — target only</b> · not run")
        if self._remote is not None:  # no longer "the baseline server is still answering"
            self._set_verdict(describe(self._remote))

    def _set_verdict(self, text: str) -> None:
        """The verdict line, hidden while there is none (its empty line is room for the
        answer in a small window)."""
        self.verdict.setText(text)
        self.verdict.setVisible(bool(text))

    def show_verdict(self, text: str, divergence: int | None) -> None:
        self.flush()
        self._set_verdict(text)
        self.verdict.setToolTip(tooltip(text))
        self.spec_view.mark_divergence(divergence)
        self.base_view.mark_divergence(divergence)

    def show_judgement(self, judgement: Judgement) -> None:
        """The verdict, with Measure again where the two runs' speeds cannot be compared."""
        self.show_verdict(judgement.text, judgement.divergence)
        self.remeasure.setVisible(judgement.uneven_machine)

    def set_dark(self, dark: bool) -> None:
        self._dark = dark
        self.spec_view.set_dark(dark)
        self.base_view.set_dark(dark)
        self.legend.setText(legend_html(str(self.style_box.currentData()), dark))
        self.error_banner.set_colours(BANNERS[dark]["error"])
        self.guard_banner.set_colours(BANNERS[dark]["guard"])
        self.transcript.set_dark(dark)

    def stop_timers(self) -> None:
        self._flush_timer.stop()

    # --- what the window shows through the panel -----------------------------------------

    def show_error(self, title: str, detail: str = "") -> None:
        """``title`` in bold, then ``detail``: both plain text (escaped here)."""
        self.error_banner.show_text(markup(title, detail))

    def hide_error(self) -> None:
        self.error_banner.hide()

    def add_error_action(self, button: QPushButton) -> None:
        """A button in the error banner, before its close button (e.g. Reload pair)."""
        layout = self.error_banner.layout()
        assert isinstance(layout, QHBoxLayout)
        layout.insertWidget(layout.count() - 1, button)

    def show_notes(self, html_text: str) -> None:
        self.notes_banner.show_text(html_text)

    def show_save_failure(self, html_text: str) -> None:
        self.save_banner.show_text(html_text)

    def clear_save_failure(self) -> bool:
        """Hide the save banner; True when it was showing (the saves caught up)."""
        shown = not self.save_banner.isHidden()
        self.save_banner.hide()
        return shown

    def show_stored_answer(self, message: ChatMessage | None) -> None:
        """A reopened answer's comparison, as it was after the live answer: the answer
        coloured by its stored token kinds beside the stored target-only answer, the verdict,
        and where the two part. Folded away unless they part."""
        self.guard_banner.hide()
        self.remeasure.hide()
        self.spec_header.setText("<b>Speculative</b>")
        self.base_header.setText("<b>Baseline — target only</b>")
        if message is None:
            self._comparison_cut = False
            self.spec_view.clear_tokens()
            self.base_view.clear_tokens()
            self._set_verdict("")
            self.base_box.setVisible(self.baseline_box.isChecked())
            self.set_comparison_open(False)
            return
        stats = message.stats
        content = message.content
        self._comparison_cut = len(content) > COMPARISON_CHARS
        kinds = None if self._comparison_cut else char_kinds(stats.get("kinds"), len(content))
        self.spec_view.show_text(content[:COMPARISON_CHARS], kinds)
        figures = _figures(stats.get("tokens"), stats.get("spec_tok_s"))
        self.spec_header.setText(f"<b>Speculative</b>{figures}{_cut_note(len(content))}")
        verdict = stats.get("verdict")
        self._set_verdict(verdict if isinstance(verdict, str) else "")
        self.verdict.setToolTip(tooltip(self.verdict.text()))
        baseline = stats.get("baseline")
        diverged = False
        if isinstance(baseline, dict) and isinstance(baseline.get("text"), str):
            text = baseline["text"]
            self.base_view.show_text(text[:COMPARISON_CHARS])
            part = " (of the answer before Continue)" if stats.get("continued") else ""
            figures = _figures(baseline.get("tokens"), baseline.get("tok_s")) + _cut_note(len(text))
            self.base_header.setText(f"<b>Baseline — target only</b>{figures}{part}")
            self.base_box.setVisible(True)
            at = baseline.get("diverged_at")
            if isinstance(at, int) and not isinstance(at, bool):
                diverged = True
                for view in (self.spec_view, self.base_view):
                    view.mark_characters(at, _word_end(view.text(), at))
        else:
            self.base_view.clear_tokens("Not kept: this answer ran without the baseline.")
            self.base_box.setVisible(False)
        self.set_comparison_open(diverged)

    def answer_stream(self) -> list[TokenEvent | TextTail]:
        """The tokens of the answer just streamed, in order, queued ones included."""
        self.flush()
        return self.spec_view.stream()

    @property
    def speculative_summary(self) -> RunSummary | None:
        """The speculative run's summary, once it has ended (the baseline may still run)."""
        return self._spec_summary

    def clear_input(self) -> None:
        self.input.clear()

    def clear_placeholders(self) -> None:
        self.spec_view.setPlaceholderText("")
        self.base_view.setPlaceholderText("")

    def show_stopped(self, text: str, before_first_token: str = "") -> None:
        """Why an answer has no verdict (stopped, the engine crashed); an answer stopped
        before its first token says so in its pane instead of still waiting for it."""
        self._set_verdict(text)
        if before_first_token and not self.spec_view.text():
            self.spec_view.setPlaceholderText(before_first_token)

    def splitters(self) -> dict[str, QSplitter]:
        """The splitters whose sizes the window keeps between sessions."""
        return {"chat": self.split, "answer": self.panes}

    # --- actions -------------------------------------------------------------------------

    def _send_or_stop(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            self.input.submit()

    def copy_answer(self) -> None:
        shown = "" if self._comparison_cut else self.spec_view.text()
        text = shown or self._last_answer
        if text:
            QGuiApplication.clipboard().setText(text)

    def _style_picked(self, _index: int) -> None:
        style = str(self.style_box.currentData())
        self.spec_view.set_style(style)
        self.transcript.set_style(style)
        self.legend.setText(legend_html(style, self._dark))
        self.style_changed.emit(style)

    def _baseline_picked(self, on: bool) -> None:
        self.base_box.setVisible(on)
        self.baseline_toggled.emit(on)
