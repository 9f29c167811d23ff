"""Wizard pages that act on the chosen pair: review, download, verification, finish."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
)

from app.models.downloads import DownloadProgress, human_bytes
from app.models.fit import assess, estimate_pair, gib
from app.models.library import LibraryError, Profile
from app.ui.wizard.common import FIT_COLOURS, Page, error_html, escape, status_label
from app.workers.hub_worker import (
    Calibrate,
    Calibrated,
    Download,
    Downloaded,
    DownloadItem,
    DownloadProgressed,
    HubFailure,
)

if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


def _repo_name(repo: str) -> str:
    return repo.rsplit("/", 1)[-1].removesuffix("-GGUF").removesuffix("-gguf")


class ReviewPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Review",
                         "Check the pair, its download size and its memory estimate.")
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

    def items(self) -> tuple[DownloadItem, ...]:
        s = self.state
        assert s.target_repo and s.target_group and s.draft and s.draft.group
        return (DownloadItem(s.target_repo, s.target_group),
                DownloadItem(s.draft.candidate.repo, s.draft.group))

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        s = self.state
        assert s.inspected and s.target_group and s.draft and s.draft.group and s.hardware
        assert s.draft.facts is not None
        est = estimate_pair(s.inspected.facts, s.target_group.size, s.draft.facts,
                            s.draft.group.size, s.n_ctx, s.kv_type)
        fit = assess(est, s.hardware)
        root = self.owner.models_root
        missing = sum(f.size for item in self.items() for f in item.group.files
                      if not (root / item.repo_id.replace("/", "--") / f.path).is_file())
        probe = root if root.exists() else root.parent
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        rows = [
            f"<b>Target:</b> {escape(s.target_repo or '')} · {s.target_group.label} "
            f"({human_bytes(s.target_group.size)})",
            f"<b>Draft:</b> {escape(s.draft.candidate.repo)} · {s.draft.group.label} "
            f"({human_bytes(s.draft.group.size)})",
            f"<b>To download:</b> {human_bytes(missing)} into {escape(str(root))} "
            f"({human_bytes(free)} free)",
            f"<b>Memory at {s.n_ctx:,} tokens:</b> weights {gib(est.target.weights)} + "
            f"{gib(est.draft.weights if est.draft else 0)}, KV cache "
            f"{gib(est.target.kv + (est.draft.kv if est.draft else 0))}, compute "
            f"{gib(est.target.compute + (est.draft.compute if est.draft else 0))}",
            f"<b>Fit:</b> <span style='color:{FIT_COLOURS[fit.label]}'>{fit.label.value}"
            f"</span> — {escape(fit.message)}",
        ]
        self.summary.setText("<br>".join(rows))
        if not self.name.text():
            base = f"{_repo_name(s.target_repo or '')} + {_repo_name(s.draft.candidate.repo)}"
            self.name.setText(self.owner.library.unique_profile_name(base))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return bool(self.name.text().strip())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        self.state.profile_name = self.name.text().strip()
        return True


class DownloadPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Download",
                         "Both models are downloaded and checked against the Hub's sha256. "
                         "An interrupted download resumes where it stopped.")
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
        items = self.owner.page_review.items()
        self._sizes = [item.group.size for item in items]
        self.submit(Download(items, self._cancel))
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
        which = "target" if reply.item == 0 else "draft"
        self.status.setText(
            f"Downloading the {which}: {escape(Path(p.filename).name)}{part}<br>"
            f"{human_bytes(p.done)} of {human_bytes(p.total)} at "
            f"{human_bytes(p.speed_bps)}/s{eta}")

    def on_result(self, reply: object) -> None:
        if not isinstance(reply, Downloaded):
            return
        items = self.owner.page_review.items()
        try:
            ids = []
            for item, paths in zip(items, reply.paths, strict=True):
                model = self.owner.library.add_downloaded(item.repo_id,
                                                          [Path(p) for p in paths],
                                                          item.group.first.sha256,
                                                          models_root=self.owner.models_root)
                ids.append(model.id)
        except LibraryError as exc:
            self.status.setText(error_html(str(exc)))
            return
        self.state.target_model_id, self.state.draft_model_id = ids
        self._done = True
        self.bar.setValue(1000)
        self.cancel_button.setEnabled(False)
        self.status.setText("Both models are downloaded and verified.")

    def on_failure(self, failure: HubFailure) -> None:
        self.cancel_button.setEnabled(False)
        self.resume_button.setVisible(True)
        text = ("Download paused. Resume continues from where it stopped."
                if failure.cancelled else failure.message)
        self.status.setText(escape(text) if failure.cancelled else error_html(text))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self._done

    def shutdown(self) -> None:
        self._cancel.set()


class VerifyPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Verification",
                         "Both models are loaded and a short calibration prompt measures how "
                         "often the target accepts the draft's tokens.")
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)
        self.status = status_label()
        self.retry = QPushButton("Try again")
        self.retry.clicked.connect(self.initializePage)
        layout = QVBoxLayout(self)
        layout.addWidget(self.bar)
        layout.addWidget(self.status)
        layout.addWidget(self.retry)
        layout.addStretch(1)
        self._cancel = threading.Event()

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.state.calibration = None
        self.retry.setVisible(False)
        self.bar.setRange(0, 0)
        self.bar.setVisible(True)
        self.status.setText("Loading both models and running the calibration prompt…")
        target = self.owner.library.models[self.state.target_model_id or ""]
        draft = self.owner.library.models[self.state.draft_model_id or ""]
        self._cancel = threading.Event()
        self.submit(Calibrate(target.path, draft.path, min(self.state.n_ctx, 2048), self._cancel))
        self.completeChanged.emit()

    def on_result(self, reply: object) -> None:
        if not isinstance(reply, Calibrated):
            return
        self.state.calibration = reply
        self.bar.setRange(0, 1)
        self.bar.setValue(1)
        self.bar.setVisible(False)
        verdict = ("The draft pays off." if reply.speedup > 1.05 else
                   "On this machine the draft barely helps; SpecDeck pauses it automatically "
                   "when it does not pay off.")
        self.status.setText(
            f"<b>Acceptance:</b> {reply.acceptance:.0%} of drafted tokens<br>"
            f"<b>Speed:</b> {reply.spec_tok_s:.1f} tok/s with the draft, "
            f"{reply.base_tok_s:.1f} tok/s target alone "
            f"(<b>×{reply.speedup:.2f}</b>)<br>"
            f"<b>Recommended draft length:</b> {reply.draft_max} tokens<br>"
            f"Both models loaded in {reply.load_s:.1f} s. {verdict}")

    def on_failure(self, failure: HubFailure) -> None:
        self.bar.setVisible(False)
        self.retry.setVisible(True)
        self.status.setText(error_html(failure.message))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.calibration is not None

    def shutdown(self) -> None:
        self._cancel.set()


class FinishPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Done", "The pair is saved and active.")
        self.status = status_label()
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addStretch(1)
        self.saved: str | None = None

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        s = self.state
        cal = s.calibration
        assert cal is not None and s.target_model_id is not None
        profile = Profile(
            name=s.profile_name, target=s.target_model_id, draft=s.draft_model_id,
            n_ctx=s.n_ctx, kv_type=s.kv_type, draft_max=cal.draft_max,
            calibration={"acceptance": cal.acceptance, "speedup": cal.speedup,
                         "spec_tok_s": cal.spec_tok_s, "base_tok_s": cal.base_tok_s},
        )
        try:
            self.owner.library.save_profile(profile, make_active=True)
        except LibraryError as exc:
            self.status.setText(error_html(str(exc)))
            return
        self.saved = profile.name
        self.status.setText(
            f"The pair <b>{escape(profile.name)}</b> is saved and is now the active pair. "
            "You can switch pairs at any time from the pair bar.")
        self.owner.profile_saved.emit(profile.name)
