"""What the wizard pages share: the page base, markup helpers and widgets."""

from __future__ import annotations

import threading
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any, Protocol, TypeVar

from PySide6.QtCore import SignalInstance
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
    QWizardPage,
)

from app.models.catalog import Catalog
from app.models.fit import FitLabel
from app.models.library import Library
from app.ui.plain_text import tooltip as plain_tip
from app.ui.wizard.pair_selection import WizardState
from app.workers.hub_messages import HubFailure
from app.workers.hub_worker import CalibrationClient, HubClient
from app.workers.job_thread import JobThread
from app.workers.jobs import Job, Stoppable

Progress = TypeVar("Progress")
Reply = TypeVar("Reply")

FIT_COLOURS = {FitLabel.FITS: "#2e7d32", FitLabel.TIGHT: "#b26a00", FitLabel.NO_FIT: "#c62828"}


class WizardHost(Protocol):
    """What a page needs of the wizard that holds it (``wizard.PairWizard``): the selection,
    the Hub and calibration workers, the library and the catalog, whether the Hub answers,
    and the ids of the pages a page may go on to. The pages know the wizard by this alone, so
    that the wizard imports the pages and no page imports the wizard."""

    state: WizardState
    client: HubClient
    calibration: CalibrationClient
    library: Library
    catalog: Catalog
    models_root: Path
    id_quant: int
    id_draft: int
    id_download: int
    id_verify: int
    id_finish: int

    @property
    def online_changed(self) -> SignalInstance: ...

    @property
    def profile_saved(self) -> SignalInstance: ...

    @property
    def probing(self) -> bool: ...

    def probe_hub(self) -> None: ...

    def mark_offline(self, reason: str) -> None: ...

    def currentPage(self) -> QWizardPage: ...  # noqa: N802 - Qt name

    def next(self) -> None: ...


class Page(QWizardPage):
    """A page that runs jobs on the wizard's workers and ignores replies to jobs it dropped."""

    def __init__(self, wizard: WizardHost, title: str, subtitle: str) -> None:
        super().__init__()
        self.owner = wizard
        self.setTitle(title)
        self.setSubTitle(subtitle)
        self._pending: set[int] = set()
        self._cancels: dict[int, threading.Event] = {}

    @property
    def state(self) -> WizardState:
        return self.owner.state

    def submit(
        self,
        job: Job[Any, Progress, Reply],
        on_result: Callable[[Reply], None],
        on_progress: Callable[[Progress], None] | None = None,
        *,
        worker: JobThread[Any] | None = None,
    ) -> int:
        """Run ``job`` on ``worker`` (the Hub's unless told): ``on_result`` gets its reply,
        ``on_progress`` what it reports, ``on_failure`` its failure; none of them once the
        page has forgotten the job."""
        request_id = 0

        def finished(reply: Reply) -> None:
            if self._settle(request_id):
                on_result(reply)
                self.completeChanged.emit()

        def failed(failure: HubFailure) -> None:
            if self._settle(request_id):
                self.on_failure(failure)
                self.completeChanged.emit()

        def progressed(progress: Progress) -> None:
            if on_progress is not None and request_id in self._pending:
                on_progress(progress)

        request_id = (worker or self.owner.client).submit(job, finished, failed, progressed)
        self._pending.add(request_id)
        if isinstance(job, Stoppable):
            self._cancels[request_id] = job.cancel
        return request_id

    def _settle(self, request_id: int) -> bool:
        """Whether the job is still wanted; it is no longer pending either way."""
        self._cancels.pop(request_id, None)
        if request_id not in self._pending:
            return False
        self._pending.discard(request_id)
        return True

    def forget_requests(self) -> None:
        """Drop pending requests and stop them, so a stalled Hub never blocks the next one."""
        for cancel in self._cancels.values():
            cancel.set()
        self._cancels.clear()
        self._pending.clear()

    def cleanupPage(self) -> None:  # noqa: N802 - Qt name; called when the user goes Back
        self.forget_requests()
        super().cleanupPage()

    def show_context(self) -> None:
        """Show the context size on the first page again after this page lowered it (the
        first page's spin box is the wizard's ``n_ctx`` field)."""
        if self.field("n_ctx") != self.state.n_ctx:
            self.setField("n_ctx", self.state.n_ctx)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def on_failure(self, failure: HubFailure) -> None:
        pass

    def failure_text(self, failure: HubFailure) -> str:
        """A failed request's message; an unreachable Hub is said once, by the wizard."""
        if failure.unreachable:
            self.owner.mark_offline("a request to the Hub got no answer")
            return error_html(
                "The Hugging Face Hub cannot be reached, so this needs a "
                "network. Use “Models on this computer”, or Retry."
            )
        return error_html(failure.message)


class StoppablePage(Page):
    """A page whose one long job (a download, a calibration) its Cancel button stops."""

    def __init__(
        self,
        wizard: WizardHost,
        title: str,
        subtitle: str,
        cancel_text: str,
        stopping: str = "Stopping…",
    ) -> None:
        super().__init__(wizard, title, subtitle)
        self._stopping = stopping  # said once Cancel is pressed
        self.status = status_label()
        self.cancel_button = QPushButton(cancel_text)
        self.cancel_button.clicked.connect(self.cancel)
        self._cancel = threading.Event()

    def fresh_cancel(self) -> threading.Event:
        """The stop event for the next job, with Cancel ready to set it."""
        self._cancel = threading.Event()
        self.cancel_button.setEnabled(True)
        return self._cancel

    def cancel(self) -> None:
        self._cancel.set()
        self.cancel_button.setEnabled(False)
        self.status.setText(self._stopping)

    def shutdown(self) -> None:
        self._cancel.set()


def retry_button(page: QWizardPage) -> QPushButton:
    """A Retry, hidden until a failure shows it, that runs ``page`` again."""
    button = QPushButton("Retry")
    button.clicked.connect(page.initializePage)
    button.setVisible(False)
    return button


def status_label() -> QLabel:
    """A label for markup the page composes: every outside part (a repo id, a file name, a
    model's metadata, an error) goes in escaped (``error_html``, ``note_html``, ``escape``)."""
    label = QLabel()
    label.setWordWrap(True)
    label.setTextInteractionFlags(
        label.textInteractionFlags() | label.textInteractionFlags().TextSelectableByMouse
    )
    return label


def note_html(message: str) -> str:
    return f"<span style='color:#b26a00'>{escape(message)}</span>"


def error_html(message: str) -> str:
    return f"<span style='color:#c62828'>{escape(message)}</span>"


def make_table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
    table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def cell(text: str, *, colour: str | None = None, tooltip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if colour:
        item.setForeground(QColor(colour))
    if tooltip:
        item.setToolTip(plain_tip(tooltip))
    return item


GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"


def browse_gguf(parent: QWidget, title: str) -> str | None:
    path, _ = QFileDialog.getOpenFileName(parent, title, "", GGUF_FILTER)
    return path or None


class OfflineNote(QWidget):
    """“The Hub cannot be reached” with a Retry, shown while the wizard is offline."""

    def __init__(self, wizard: WizardHost) -> None:
        super().__init__()
        self.owner = wizard
        self.label = status_label()
        # A wrapped label inside a nested layout gets one line's height unless told otherwise.
        self.label.setMinimumHeight(2 * self.label.fontMetrics().lineSpacing() + 4)
        self.retry = QPushButton("Retry")
        self.retry.clicked.connect(wizard.probe_hub)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.retry)
        wizard.online_changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        state = self.owner.state
        if state.online is None and self.owner.probing:
            self.label.setText("Checking whether the Hugging Face Hub can be reached…")
            self.retry.setEnabled(False)
            self.setVisible(True)
            return
        self.retry.setEnabled(True)
        self.setVisible(state.online is False)
        self.label.setText(
            note_html(
                f"Offline: the Hugging Face Hub cannot be reached ({state.offline_reason}). "
                "Models on this computer still work."
            )
        )


class LocalFiles:
    """Models on this computer for a wizard page: the library's files plus any the person
    browsed to; a browsed file is selected once it has been read."""

    BROWSE_TITLE = "Model (GGUF)"
    owner: WizardHost
    _extra: list[str]
    _want: str | None

    def _init_local_files(self) -> None:
        self._extra = []
        self._want = None

    def _library_paths(self) -> tuple[str, ...]:
        return tuple(m.path for m in self.owner.library.models.values() if m.available)

    def _browse(self) -> None:
        path = browse_gguf(self, self.BROWSE_TITLE)  # type: ignore[arg-type]
        if path:
            self.add_local_file(path)

    def add_local_file(self, path: str) -> None:
        if path not in self._extra:
            self._extra.append(path)
        self._want = path
        self._scan()

    def _scan(self) -> None:
        raise NotImplementedError
