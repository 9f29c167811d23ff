"""The draft page: drafts from the Hub, a typed repository, GGUFs on this computer, the
target's own next-token layers, or n-gram drafting."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

from app.models.fit import gib
from app.models.hub import QuantGroup, unsafe_repo_id_reason
from app.ui.plain_text import tooltip as plain_tip
from app.ui.wizard.common import (
    LocalFiles,
    Page,
    WizardHost,
    cell,
    error_html,
    make_table,
    note_html,
    retry_button,
    status_label,
)
from app.ui.wizard.pair_selection import DraftChoices, offer_own_heads
from app.ui.wizard.words import mismatch_in_words
from app.workers.hub_jobs import CheckDraftRepo, FindDrafts, ScanLocal
from app.workers.hub_messages import (
    DraftChecked,
    DraftOption,
    DraftsDone,
    HubFailure,
    LocalScanned,
)


class DraftPage(LocalFiles, Page):
    """Drafts from the Hub (other repos, or a smaller quantization of the target), a repo the
    person types, GGUFs on this computer, or no draft model at all (n-gram drafting)."""

    BROWSE_TITLE = "Draft model (GGUF)"

    def __init__(self, wizard: WizardHost) -> None:
        super().__init__(
            wizard,
            "Draft model",
            "A small model with the same vocabulary proposes tokens for the "
            "target to check. Candidates are checked by their GGUF headers "
            "before anything is downloaded.",
        )
        self.status = status_label()
        self.retry = retry_button(self)
        self.table = make_table(["Draft", "Quantization", "Size", "Why", "Compatibility"])
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.quant = QComboBox()
        self.quant.setToolTip("Smaller is faster; below 4 bits a draft agrees less often")
        self.quant.currentIndexChanged.connect(self._quant_changed)
        self.repo = QLineEdit()
        self.repo.setPlaceholderText("owner/Name-GGUF of a draft on the Hub")
        self.repo.returnPressed.connect(self._check_repo)
        self.check_repo = QPushButton("Check")
        self.check_repo.clicked.connect(self._check_repo)
        self.browse = QPushButton("Browse for a draft…")
        self.browse.clicked.connect(self._browse)
        self.ngram = QCheckBox(
            "Continue with n-gram drafting (no draft model: drafts come "
            "from repeats of the conversation so far)"
        )
        self.ngram.toggled.connect(self._ngram_toggled)
        self.mtp = QCheckBox()  # first and ticked for a target with next-token layers
        self.mtp.setObjectName("draftMtp")
        self.mtp.toggled.connect(self._mtp_toggled)
        self.mtp.hide()
        quant_row = QFormLayout()
        quant_row.addRow("Draft quantization", self.quant)
        repo_row = QHBoxLayout()
        repo_row.addWidget(self.repo, 1)
        repo_row.addWidget(self.check_repo)
        repo_row.addWidget(self.browse)
        layout = QVBoxLayout(self)
        layout.addWidget(self.mtp)
        layout.addWidget(self.status)
        layout.addWidget(self.retry, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.table, 1)
        layout.addLayout(quant_row)
        layout.addLayout(repo_row)
        layout.addWidget(self.ngram)
        self.choices = DraftChoices()
        self._init_local_files()
        self._typed = ""
        self._hub_done = False
        self._hub_message = ""

    # --- requests ---------------------------------------------------------------------

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.choices = DraftChoices()
        self._hub_done = False
        self._hub_message = ""
        self.retry.setVisible(False)
        self.table.setRowCount(0)
        self.ngram.setChecked(self.state.draft_ngram)
        can = offer_own_heads(self.state)  # first visit for this target: its own heads first
        own = self.state.target_drafting
        if can:
            assert own is not None
            self.mtp.setText(f"This model drafts for itself ({own.name}) — no draft download")
            self.mtp.setToolTip(
                plain_tip(
                    "Its next-token (MTP) layers propose the tokens: nothing else to "
                    "download, check or fit. Untick it to choose a draft model or n-gram "
                    "drafting instead."
                )
            )
        self.mtp.setVisible(can)
        self.mtp.setChecked(can and bool(self.state.draft_mtp))
        hub_target = self.state.target_local is None
        online = self.state.online is not False
        self.repo.setEnabled(hub_target and online)
        self.check_repo.setEnabled(hub_target and online)
        self.repo.setPlaceholderText(
            "owner/Name-GGUF of a draft on the Hub"
            if hub_target and online
            else "Offline: Hub repositories cannot be checked now"
            if not online
            else "The target is a local file: browse to a draft file instead"
        )
        if hub_target and online:
            group = self.state.target_group
            assert group is not None and self.state.target_repo is not None
            self.status.setText("Looking for drafts and checking their vocabularies…")
            self.submit(
                FindDrafts(self.state.target_repo, group.first.path, self.owner.catalog),
                self._drafts_done,
                self._draft_checked,
            )
        else:
            self._hub_done = True
            self._hub_message = (
                "" if not hub_target else "Offline: only drafts on this computer can be checked."
            )
        self._scan()

    def _target_vocab(self) -> object:
        if self.state.target_local is not None:
            return self.state.target_local.vocab
        return self.state.inspected.vocab if self.state.inspected is not None else None

    def _scan(self) -> None:
        target = self.state.target_local.path if self.state.target_local else None
        self.submit(
            ScanLocal(self._library_paths(), tuple(self._extra), target, self._target_vocab()),  # type: ignore[arg-type]
            self._local_scanned,
        )

    def _check_repo(self) -> None:
        repo = self.repo.text().strip()
        reason = unsafe_repo_id_reason(repo) if repo else "is empty"
        if reason is not None or "/" not in repo:
            self.status.setText(
                error_html(f"“{repo}” is not a repository name like owner/Name-GGUF")
            )
            return
        group = self.state.target_group
        assert group is not None and self.state.target_repo is not None
        self.status.setText(f"Checking {escape(repo)}…")
        self._typed = repo
        self.submit(
            CheckDraftRepo(repo, self.state.target_repo, group.first.path), self._repo_checked
        )

    # --- replies ----------------------------------------------------------------------

    @property
    def options(self) -> list[DraftOption]:
        """The Hub's drafts, in the table's first rows."""
        return self.choices.options

    def _draft_checked(self, reply: DraftChecked) -> None:
        self.choices.add_checked(reply.option)
        self._fill()

    def _local_scanned(self, reply: LocalScanned) -> None:
        self.choices.set_local(reply.models)
        self._fill()
        want = self._want
        row = self.choices.local_row(want)
        if row is not None:
            self.table.selectRow(row)
        bad = [why for p, why in reply.unreadable if p == want]
        if bad:
            self.status.setText(error_html(f"{want}: {bad[0]}"))
        else:
            self._summarise()

    def _repo_checked(self, reply: DraftChecked) -> None:
        self.choices.put_typed(reply.option)
        self._fill()
        if reply.option.compatible:
            self.table.selectRow(0)
            self.status.setText(f"{escape(reply.option.candidate.repo)} is compatible.")
        else:
            self.status.setText(
                error_html(
                    f"{reply.option.candidate.repo} cannot draft for this target: "
                    f"{mismatch_in_words(reply.option.mismatch or '')}"
                )
            )

    def _drafts_done(self, reply: DraftsDone) -> None:
        self.choices.options = list(reply.options)
        self._hub_done = True
        self._fill()
        self._summarise()
        self._select_first()

    def on_failure(self, failure: HubFailure) -> None:
        self._hub_done = True
        self.retry.setVisible(True)
        self.status.setText(self.failure_text(failure))

    def _summarise(self) -> None:
        if not self._hub_done:
            return
        text, warning = self.choices.summary(self.mtp.isVisible(), self._hub_message)
        self.status.setText(note_html(text) if warning else escape(text))
        self._select_first()

    def _select_first(self) -> None:
        if self.table.selectedItems() or self.ngram.isChecked() or self.mtp.isChecked():
            return
        row = self.choices.first_compatible()
        if row is not None:
            self.table.selectRow(row)

    def _fill(self) -> None:
        self.table.blockSignals(True)
        self.table.setRowCount(self.choices.row_count)
        for row, draft in enumerate(self.choices.rows()):
            colour = "#2e7d32" if draft.compatible else "#c62828"
            for column, text in enumerate(draft.texts):
                item = cell(
                    text,
                    colour=colour if column == 4 else None,
                    tooltip=draft.cell_tooltip(column),
                )
                if not draft.compatible:
                    item.setFlags(
                        item.flags() & ~Qt.ItemFlag.ItemIsSelectable & ~Qt.ItemFlag.ItemIsEnabled
                    )
                self.table.setItem(row, column, item)
        self.table.blockSignals(False)
        self.table.resizeColumnsToContents()
        self._selection_changed()

    def _selection_changed(self) -> None:
        row = self.table.currentRow() if self.table.selectedItems() else -1
        self.quant.blockSignals(True)
        self.quant.clear()
        groups, index = self.choices.quant_offer(row, self.state.draft)
        for group in groups:
            self.quant.addItem(f"{group.quant} · {gib(group.size)}", group)
        if groups:
            self.quant.setCurrentIndex(index)
        self.quant.setEnabled(self.quant.count() > 1)
        self.quant.blockSignals(False)
        if row >= 0 and self.ngram.isChecked():
            self.ngram.setChecked(False)
        if row >= 0 and self.mtp.isChecked():
            self.mtp.setChecked(False)
        self.completeChanged.emit()

    def _quant_changed(self) -> None:
        group, row = self.selected_group(), self.table.currentRow()
        if group is not None and 0 <= row < len(self.choices.options):
            for column, text in ((1, group.quant), (2, gib(group.size))):
                item = self.table.item(row, column)
                if item is not None:
                    item.setText(text)
        self.completeChanged.emit()

    def _ngram_toggled(self, on: bool) -> None:
        if on:
            self.table.clearSelection()
            self.mtp.setChecked(False)
        self.completeChanged.emit()

    def _mtp_toggled(self, on: bool) -> None:
        if on:
            self.table.clearSelection()
            self.ngram.setChecked(False)
        self.completeChanged.emit()

    def selected_group(self) -> QuantGroup | None:
        data = self.quant.currentData()
        return data if isinstance(data, QuantGroup) else None

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        if self.ngram.isChecked() or self.mtp.isChecked():
            return True
        row = self.table.currentRow()
        return bool(self.table.selectedItems()) and self.choices.compatible(row)

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        self.choices.choose(
            self.state,
            self.table.currentRow(),
            self.selected_group(),
            ngram=self.ngram.isChecked(),
            mtp=self.mtp.isChecked(),
        )
        return True
