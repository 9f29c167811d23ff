"""The download page: both models fetched and checked against the Hub's sha256."""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtWidgets import QProgressBar, QPushButton

from app.models.downloads import DownloadProgress
from app.models.fit import gib
from app.models.library import LibraryError
from app.ui.box_layouts import button_row, column
from app.ui.wizard.common import StoppablePage, WizardHost, error_html
from app.ui.wizard.pair_selection import download_items
from app.workers.hub_jobs import Download
from app.workers.hub_messages import Downloaded, DownloadProgressed, HubFailure


class DownloadPage(StoppablePage):
    def __init__(self, wizard: WizardHost) -> None:
        super().__init__(
            wizard,
            "Download",
            "The models are downloaded and checked against the Hub's sha256. "
            "An interrupted download resumes where it stopped.",
            "Cancel download",
        )
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.resume_button = QPushButton("Resume")
        self.resume_button.clicked.connect(self.initializePage)
        column(self, self.bar, self.status, button_row(self.cancel_button, self.resume_button))
        self._done = False

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self._done = False
        cancel = self.fresh_cancel()
        self.resume_button.setVisible(False)
        self.status.setText("Starting…")
        self._items = download_items(self.state)
        self._sizes = [item.group.size for item in self._items]
        self.submit(Download(self._items, cancel=cancel), self._downloaded, self._progressed)
        self.completeChanged.emit()

    def _progressed(self, reply: DownloadProgressed) -> None:
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
            f"{gib(p.done)} of {gib(p.total)} at "
            f"{gib(p.speed_bps)}/s{eta}"
        )

    def _downloaded(self, reply: Downloaded) -> None:
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
