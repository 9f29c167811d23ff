"""The verification page: the calibration's steps and an honest verdict."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QCheckBox, QProgressBar, QPushButton

from app.engine.figures import speed_text
from app.ui.box_layouts import button_row, column
from app.ui.wizard.common import StoppablePage, WizardHost, error_html, note_html, status_label
from app.workers.calibration import CALIBRATION_DRAFT_LENGTHS, Calibrate
from app.workers.hub_messages import (
    DRAFT_LENGTH_SURE_MARGIN,
    Calibrated,
    CalibrationStep,
    HubFailure,
)


class VerifyPage(StoppablePage):
    """Calibration: its steps, a Cancel, and an honest verdict; a slower pair is saved only
    as active when the person says so."""

    def __init__(self, wizard: WizardHost) -> None:
        super().__init__(
            wizard,
            "Verification",
            "Both models are loaded and a short calibration prompt measures how "
            "often the target accepts the draft's tokens, and how fast it runs.",
            "Cancel calibration",
            "Stopping after the current step…",
        )
        self.bar = QProgressBar()
        self.steps = status_label()
        self.retry = QPushButton("Run the calibration again")
        self.retry.clicked.connect(self.initializePage)
        self.activate = QCheckBox("Make this the active pair")
        self.activate.toggled.connect(self._activate_toggled)
        self.use_ngram = QPushButton("Save with n-gram drafting instead")
        self.use_ngram.setToolTip(
            "Keep the target, draft from repeats of the conversation "
            "(no draft model); try it on your own prompts"
        )
        self.use_ngram.clicked.connect(self._use_ngram)
        buttons = button_row(self.cancel_button, self.retry, self.use_ngram)
        column(self, self.bar, self.steps, self.status, self.activate, buttons)
        self._skipped = False
        self._done_steps: list[str] = []

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()  # cancels a calibration still running from a previous visit
        self.state.calibration = None
        self.state.draft_ngram = self.state.draft_ngram and self.state.draft_model_id is None
        self._skipped = False
        self._done_steps = []
        self.retry.setVisible(False)
        self.use_ngram.setVisible(False)
        self.activate.setVisible(False)
        self.cancel_button.setVisible(True)
        self.bar.setRange(0, 4 + len(CALIBRATION_DRAFT_LENGTHS))
        self.bar.setValue(0)
        self.bar.setVisible(True)
        self.steps.setText("")
        self.status.setText("Starting the calibration…")
        target = self.owner.library.models[self.state.target_model_id or ""]
        draft = self.owner.library.models[self.state.draft_model_id or ""]
        cancel = self.fresh_cancel()
        self.submit(
            Calibrate(target.path, draft.path, min(self.state.n_ctx, 2048), cancel=cancel),
            self.show_calibration,
            self._step_started,
            worker=self.owner.calibration,
        )
        self.completeChanged.emit()

    def _step_started(self, reply: CalibrationStep) -> None:
        self.bar.setRange(0, reply.total)
        self.bar.setValue(reply.index - 1)
        done = "".join(f"✓ {escape(t)}<br>" for t in self._done_steps)
        self._done_steps.append(reply.text)
        self.steps.setText(
            f"{done}▶ <b>{escape(reply.text)}</b> (step {reply.index} of {reply.total})"
        )
        self.status.setText("")

    def show_calibration(self, reply: Calibrated) -> None:
        self.state.calibration = reply
        self.bar.setVisible(False)
        self.cancel_button.setVisible(False)
        self.steps.setText("".join(f"✓ {escape(t)}<br>" for t in self._done_steps))
        percent = abs(reply.speedup - 1) * 100
        if reply.speedup >= 1.05:
            verdict = f"{reply.speedup:.2f}× — {percent:.0f} % faster with the draft."
        elif reply.speedup >= 1.0:
            verdict = (
                f"{reply.speedup:.2f}× — about as fast as the target alone "
                f"({percent:.0f} % faster, within run-to-run noise)."
            )
        else:
            verdict = (
                f"{reply.speedup:.2f}× — {percent:.0f} % slower with the draft on this computer."
            )
        lines = [
            f"<b>Speed:</b> {speed_text(reply.spec_tok_s)} with the draft, "
            f"{speed_text(reply.base_tok_s)} target alone: <b>{escape(verdict)}</b>",
            f"<b>Acceptance:</b> {reply.acceptance:.0%} of drafted tokens",
            f"<b>Draft length:</b> {escape(draft_length_text(reply))}",
            f"Both models loaded in {reply.load_s:.1f} s.",
        ]
        if reply.slower:
            lines.append(
                note_html(
                    "This pair is slower than the target alone here. Alternatives: save it with "
                    "n-gram drafting instead, run the wizard again with a smaller draft or "
                    "quantization, or save it anyway without making it active."
                )
            )
        self.status.setText("<br>".join(lines))
        self.activate.blockSignals(True)
        self.activate.setChecked(not reply.slower)
        self.activate.blockSignals(False)
        self.activate.setText(
            "Make this the active pair"
            if not reply.slower
            else "Make this the active pair anyway (it is slower)"
        )
        self.activate.setVisible(True)
        self.use_ngram.setVisible(reply.slower)
        self.retry.setVisible(True)
        self.state.activate = self.activate.isChecked()

    def _activate_toggled(self, on: bool) -> None:
        self.state.activate = on

    def _use_ngram(self) -> None:
        self.state.draft_ngram = True
        self.state.draft_model_id = None
        self.state.activate = True
        self.owner.next()

    def on_failure(self, failure: HubFailure) -> None:
        self.bar.setVisible(False)
        self.cancel_button.setVisible(False)
        self.retry.setVisible(True)
        self.use_ngram.setVisible(True)
        self.status.setText(
            escape("Calibration cancelled.") if failure.cancelled else error_html(failure.message)
        )

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.calibration is not None or self.state.draft_ngram


def draft_length_text(cal: Calibrated) -> str:
    """What the calibration found about the draft length, and the longest draft the pair is
    saved with (``Calibrated.saved_draft_max``), in the same words as the setting."""
    trials = ", ".join(f"{n} tokens: {speed_text(t)}" for n, t in cal.trials)
    noise = f"two runs of the target alone differed by {cal.noise:.0%}"
    saved = cal.saved_draft_max
    if cal.length_sure:
        return (
            f"up to {saved} tokens per pass: {cal.draft_max} tokens was clearly the faster one "
            f"({trials}; {noise}). With adaptive drafting (the default) a draft stops earlier "
            "when the draft model is unsure."
        )
    margin = cal.length_margin
    close = margin < DRAFT_LENGTH_SURE_MARGIN
    apart = f"ran within {margin:.0%} of each other" if close else f"differed by {margin:.0%}"
    return (
        f"adaptive, up to {saved} tokens per pass. The lengths tried {apart} ({trials}) "
        f"{'and' if close else 'but'} {noise}, so one run each cannot tell them apart (not "
        "sure which is faster): adaptive drafting settles the length while you chat."
    )
