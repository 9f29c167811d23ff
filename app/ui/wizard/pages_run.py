"""Wizard pages that act on the chosen pair: review, download, verification, finish."""

from __future__ import annotations

import threading
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from app.engine.figures import speed_text
from app.models.downloads import DownloadProgress, free_bytes, human_bytes
from app.models.fit import assess, estimate_pair, memory_text
from app.models.library import LibraryError, Profile
from app.ui.wizard.common import FIT_COLOURS, Page, error_html, note_html, status_label
from app.workers.hub_messages import (
    DRAFT_LENGTH_SURE_MARGIN,
    Calibrate,
    Calibrated,
    CalibrationStep,
    Download,
    Downloaded,
    DownloadItem,
    DownloadProgressed,
    HubFailure,
    LocalModel,
)
from app.workers.hub_worker import CALIBRATION_DRAFT_LENGTHS

# A draft costs about its size per token; above this fraction of the target's size it rarely
# pays for itself.
DRAFT_SIZE_WARNING = 0.35

if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


def _repo_name(repo: str) -> str:
    return repo.rsplit("/", 1)[-1].removesuffix("-GGUF").removesuffix("-gguf")


def _local_name(model: LocalModel) -> str:
    return Path(model.path).stem


def still_to_download(root: Path, item: DownloadItem) -> int:
    """Bytes still to fetch for ``item``: complete files count 0, partial ones what is left."""
    missing = 0
    for f in item.group.files:
        final = root / item.repo_id.replace("/", "--") / f.path
        if final.is_file():
            continue
        part = final.with_name(final.name + ".part")
        have = part.stat().st_size if part.is_file() else 0
        missing += max(0, f.size - have)
    return missing


class ReviewPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard, "Review", "Check the pair, its download size and its memory estimate."
        )
        self.summary = status_label()
        self.name = QLineEdit()
        self.name.textChanged.connect(self.completeChanged)
        form = QFormLayout()
        form.addRow("Name of the pair", self.name)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(form)
        layout.addStretch(1)
        self.setCommitPage(True)
        self.setButtonText(self.owner.WizardButton.CommitButton, "Download")
        self._suggested = ""

    def items(self) -> tuple[DownloadItem, ...]:
        s = self.state
        items = []
        if s.target_local is None:
            assert s.target_repo and s.target_group
            items.append(DownloadItem(s.target_repo, s.target_group))
        if s.draft is not None and s.draft.group is not None and not s.no_draft_model:
            items.append(DownloadItem(s.draft.candidate.repo, s.draft.group))
        return tuple(items)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        s = self.state
        target_facts = s.target_facts
        assert target_facts is not None and s.hardware is not None
        est = estimate_pair(
            target_facts,
            s.target_size,
            s.draft_facts,
            s.draft_size,
            s.n_ctx,
            s.kv_type,
            mtp=bool(s.draft_mtp),
        )
        fit = assess(est, s.hardware)
        root = self.owner.models_root
        items = self.items()
        missing = sum(still_to_download(root, item) for item in items)
        free = free_bytes(root)
        rows = [
            f"<b>Target:</b> {escape(s.target_name)} ({human_bytes(s.target_size)})",
            f"<b>Draft:</b> {escape(s.draft_name)}"
            + (f" ({human_bytes(s.draft_size)})" if s.draft_size else ""),
            (
                f"<b>To download:</b> {human_bytes(missing)} into {escape(str(root))} "
                f"({human_bytes(free)} free)"
            )
            if items
            else "<b>To download:</b> nothing; "
            + ("the model is" if s.draft_mtp or s.draft_ngram else "both models are")
            + " on this computer",
            f"<b>Memory at {s.n_ctx:,} tokens:</b> {escape(memory_text(est))}",
            f"<b>Fit:</b> <span style='color:{FIT_COLOURS[fit.label]}'>{fit.label.value}"
            f"</span> — {escape(fit.message)}",
        ]
        if s.context_note:
            rows.append(note_html(s.context_note))
        warning = self.draft_size_warning()
        if warning:
            rows.append(note_html(warning))
        self.summary.setText("<br>".join(rows))
        self.setButtonText(self.owner.WizardButton.CommitButton, "Download" if items else "Next")
        # A name the person typed is kept; the suggestion follows the pair.
        if not self.name.text() or self.name.text() == self._suggested:
            self._suggested = self.owner.library.unique_profile_name(self._default_name())
            self.name.setText(self._suggested)

    def draft_size_warning(self) -> str:
        s = self.state
        if s.draft_ngram or not s.draft_size or not s.target_size:
            return ""
        ratio = s.draft_size / s.target_size
        if ratio <= DRAFT_SIZE_WARNING:
            return ""
        return (
            f"Warning: the draft is {ratio:.0%} of the target's size "
            f"({human_bytes(s.draft_size)} beside {human_bytes(s.target_size)}). A draft "
            "costs about its size per token, so this one will likely make answers slower. "
            "Go Back and choose a smaller draft or quantization."
        )

    def _default_name(self) -> str:
        s = self.state
        target = (
            _local_name(s.target_local)
            if s.target_local is not None
            else _repo_name(s.target_repo or "")
        )
        if s.draft_ngram:
            return f"{target} + n-gram"
        if s.draft_mtp:
            return f"{target} + MTP"
        if s.draft_local is not None:
            return f"{target} + {_local_name(s.draft_local)}"
        assert s.draft is not None
        draft = _repo_name(s.draft.candidate.repo)
        if draft == target and s.draft.group is not None:
            draft = s.draft.group.quant
        return f"{target} + {draft}"

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return bool(self.name.text().strip())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        s = self.state
        s.profile_name = self.name.text().strip()
        try:  # models on this computer join the library now; downloads once they arrive
            if s.target_local is not None:
                s.target_model_id = self._library_id(s.target_local)
            if s.draft_local is not None:
                s.draft_model_id = self._library_id(s.draft_local)
            elif s.draft_ngram or s.draft_mtp:
                s.draft_model_id = None
        except LibraryError as exc:
            self.summary.setText(error_html(str(exc)))
            return False
        return True

    def _library_id(self, model: LocalModel) -> str:
        library = self.owner.library
        known = library.find_by_path(model.path)
        return known.id if known is not None else library.import_gguf(Path(model.path)).id

    def nextId(self) -> int:  # noqa: N802 - Qt name
        if self.items():
            return self.owner.id_download
        return self.owner.id_finish if self.state.no_draft_model else self.owner.id_verify


class DownloadPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard,
            "Download",
            "The models are downloaded and checked against the Hub's sha256. "
            "An interrupted download resumes where it stopped.",
        )
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.status = status_label()
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.clicked.connect(self.cancel)
        self.resume_button = QPushButton("Resume")
        self.resume_button.clicked.connect(self.initializePage)
        buttons = QHBoxLayout()
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.resume_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.bar)
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        layout.addStretch(1)
        self._cancel = threading.Event()
        self._done = False

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self._done = False
        self._cancel = threading.Event()
        self.cancel_button.setEnabled(True)
        self.resume_button.setVisible(False)
        self.status.setText("Starting…")
        self._items = self.owner.page_review.items()
        self._sizes = [item.group.size for item in self._items]
        self.submit(Download(self._items, self._cancel))
        self.completeChanged.emit()

    def cancel(self) -> None:
        self._cancel.set()
        self.cancel_button.setEnabled(False)
        self.status.setText("Stopping…")

    def on_progress(self, reply: object) -> None:
        if not isinstance(reply, DownloadProgressed):
            return
        p: DownloadProgress = reply.progress
        before = sum(self._sizes[: reply.item])
        total = sum(self._sizes)
        self.bar.setValue(int(1000 * (before + p.done) / total) if total else 0)
        eta = f", about {p.eta_s:.0f} s left" if p.eta_s is not None else ""
        part = f" (part {p.part} of {p.parts})" if p.parts > 1 else ""
        item = self._items[reply.item]
        which = (
            "target"
            if item.repo_id == self.state.target_repo and item.group == self.state.target_group
            else "draft"
        )
        self.status.setText(
            f"Downloading the {which}: {escape(Path(p.filename).name)}{part}<br>"
            f"{human_bytes(p.done)} of {human_bytes(p.total)} at "
            f"{human_bytes(p.speed_bps)}/s{eta}"
        )

    def on_result(self, reply: object) -> None:
        if not isinstance(reply, Downloaded):
            return
        s = self.state
        try:
            for item, paths in zip(self._items, reply.paths, strict=True):
                model = self.owner.library.add_downloaded(
                    item.repo_id,
                    [Path(p) for p in paths],
                    item.group.first.sha256,
                    models_root=self.owner.models_root,
                )
                if (
                    item.repo_id == s.target_repo
                    and item.group == s.target_group
                    and s.target_local is None
                    and s.target_model_id is None
                ):
                    s.target_model_id = model.id
                else:
                    s.draft_model_id = model.id
        except LibraryError as exc:
            self.status.setText(error_html(str(exc)))
            return
        self._done = True
        self.bar.setValue(1000)
        self.cancel_button.setEnabled(False)
        self.status.setText("Downloaded and verified.")

    def on_failure(self, failure: HubFailure) -> None:
        self.cancel_button.setEnabled(False)
        self.resume_button.setVisible(True)
        # A corrupt file was deleted, so nothing is resumed: the download starts over.
        self.resume_button.setText(
            "Download again" if failure.corrupt else "Retry" if not failure.cancelled else "Resume"
        )
        if failure.cancelled:
            self.status.setText(escape("Download paused. Resume continues from where it stopped."))
        else:
            self.status.setText(
                self.failure_text(failure) if failure.unreachable else error_html(failure.message)
            )

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self._done

    def nextId(self) -> int:  # noqa: N802 - Qt name
        return self.owner.id_finish if self.state.no_draft_model else self.owner.id_verify

    def shutdown(self) -> None:
        self._cancel.set()


class VerifyPage(Page):
    """Calibration: its steps, a Cancel, and an honest verdict; a slower pair is saved only
    as active when the person says so."""

    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard,
            "Verification",
            "Both models are loaded and a short calibration prompt measures how "
            "often the target accepts the draft's tokens, and how fast it runs.",
        )
        self.bar = QProgressBar()
        self.steps = status_label()
        self.status = status_label()
        self.cancel_button = QPushButton("Cancel calibration")
        self.cancel_button.clicked.connect(self.cancel)
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
        buttons = QHBoxLayout()
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.retry)
        buttons.addWidget(self.use_ngram)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.bar)
        layout.addWidget(self.steps)
        layout.addWidget(self.status)
        layout.addWidget(self.activate)
        layout.addLayout(buttons)
        layout.addStretch(1)
        self._cancel = threading.Event()
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
        self.cancel_button.setEnabled(True)
        self.bar.setRange(0, 4 + len(CALIBRATION_DRAFT_LENGTHS))
        self.bar.setValue(0)
        self.bar.setVisible(True)
        self.steps.setText("")
        self.status.setText("Starting the calibration…")
        target = self.owner.library.models[self.state.target_model_id or ""]
        draft = self.owner.library.models[self.state.draft_model_id or ""]
        self._cancel = threading.Event()
        self.submit(Calibrate(target.path, draft.path, min(self.state.n_ctx, 2048), self._cancel))
        self.completeChanged.emit()

    def cancel(self) -> None:
        self._cancel.set()
        self.cancel_button.setEnabled(False)
        self.status.setText("Stopping after the current step…")

    def on_progress(self, reply: object) -> None:
        if not isinstance(reply, CalibrationStep):
            return
        self.bar.setRange(0, reply.total)
        self.bar.setValue(reply.index - 1)
        done = "".join(f"✓ {escape(t)}<br>" for t in self._done_steps)
        self._done_steps.append(reply.text)
        self.steps.setText(
            f"{done}▶ <b>{escape(reply.text)}</b> (step {reply.index} of {reply.total})"
        )
        self.status.setText("")

    def on_result(self, reply: object) -> None:
        if not isinstance(reply, Calibrated):
            return
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

    def shutdown(self) -> None:
        self._cancel.set()


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


class FinishPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Done", "The pair is saved.")
        self.status = status_label()
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addStretch(1)
        self.saved: str | None = None
        self.activated: str | None = None  # the saved pair, when it is to be loaded now

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.activated = None
        s = self.state
        cal = None if s.no_draft_model else s.calibration
        assert s.target_model_id is not None
        calibration: dict[str, float] = {}
        draft_max = 8
        if cal is not None:
            draft_max = cal.saved_draft_max
            calibration = {
                "acceptance": cal.acceptance,
                "speedup": cal.speedup,
                "spec_tok_s": cal.spec_tok_s,
                "base_tok_s": cal.base_tok_s,
                "draft_length_margin": cal.length_margin,
            }
        profile = Profile(
            name=s.profile_name,
            target=s.target_model_id,
            draft=None if s.no_draft_model else s.draft_model_id,
            n_ctx=s.n_ctx,
            kv_type=s.kv_type,
            draft_max=draft_max,
            calibration=calibration,
            draft_source="mtp" if s.draft_mtp else "ngram" if s.draft_ngram else "model",
        )
        activate = s.activate or s.no_draft_model
        try:
            self.owner.library.save_profile(profile)
        except LibraryError as exc:
            self.status.setText(error_html(str(exc)))
            return
        self.saved = profile.name
        self.activated = profile.name if activate else None
        where = (
            "is now the active pair"
            if activate
            else "is saved but not active (you chose to keep the current pair)"
        )
        self.status.setText(
            f"The pair <b>{escape(profile.name)}</b> {where}. Its context size "
            f"({s.n_ctx:,} tokens), KV cache type ({escape(s.kv_type)}) and longest draft "
            f"({draft_max} tokens per pass) are applied when it loads. Switch, rename or delete "
            "saved pairs from Change pair… in the pair bar."
        )
        self.owner.profile_saved.emit(profile.name)
