"""The draft page: drafts from the Hub, a typed repository, GGUFs on this computer, the
target's own next-token layers, or n-gram drafting."""

from __future__ import annotations

from dataclasses import replace
from html import escape
from typing import TYPE_CHECKING

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

from app.models.downloads import human_bytes
from app.models.fit import draft_speed_rank
from app.models.hub import QuantGroup, unsafe_repo_id_reason
from app.ui.plain_text import tooltip as plain_tip
from app.ui.wizard.common import (
    LocalFiles,
    Page,
    cell,
    error_html,
    make_table,
    note_html,
    status_label,
)
from app.ui.wizard.words import mismatch_in_words
from app.workers.hub_messages import (
    CheckDraftRepo,
    DraftChecked,
    DraftOption,
    DraftsDone,
    FindDrafts,
    HubFailure,
    LocalModel,
    LocalScanned,
    ScanLocal,
)

if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


class DraftPage(LocalFiles, Page):
    BROWSE_TITLE = "Draft model (GGUF)"
    """Drafts from the Hub (other repos, or a smaller quantization of the target), a repo the
    person types, GGUFs on this computer, or no draft model at all (n-gram drafting)."""

    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard,
            "Draft model",
            "A small model with the same vocabulary proposes tokens for the "
            "target to check. Candidates are checked by their GGUF headers "
            "before anything is downloaded.",
        )
        self.status = status_label()
        self.retry = QPushButton("Retry")
        self.retry.clicked.connect(self.initializePage)
        self.retry.setVisible(False)
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
        self.options: list[DraftOption] = []
        self.local: list[LocalModel] = []
        self._init_local_files()
        self._typed = ""
        self._hub_done = False
        self._hub_message = ""

    # --- requests ---------------------------------------------------------------------

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.options, self.local = [], []
        self._hub_done = False
        self._hub_message = ""
        self.retry.setVisible(False)
        self.table.setRowCount(0)
        self.ngram.setChecked(self.state.draft_ngram)
        own = self.state.target_drafting
        can = own is not None and own.method == "mtp"
        if self.state.draft_mtp is None:  # first visit for this target: its own heads first
            self.state.draft_mtp = can and not self.state.draft_ngram
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
            self.submit(FindDrafts(self.state.target_repo, group.first.path, self.owner.catalog))
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
            ScanLocal(self._library_paths(), tuple(self._extra), target, self._target_vocab())  # type: ignore[arg-type]
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
        self.submit(CheckDraftRepo(repo, self.state.target_repo, group.first.path))

    # --- replies ----------------------------------------------------------------------

    def on_progress(self, reply: object) -> None:
        if isinstance(reply, DraftChecked):
            self.options.append(reply.option)
            self._fill()

    def on_result(self, reply: object) -> None:
        if isinstance(reply, LocalScanned):
            self.local = [m for m in reply.models if m.facts.n_layer > 0]
            self._fill()
            want = self._want
            for row, model in enumerate(self.local):
                if want is not None and model.path == want:
                    self.table.selectRow(len(self.options) + row)
            bad = [why for p, why in reply.unreadable if p == want]
            if bad:
                self.status.setText(error_html(f"{want}: {bad[0]}"))
            else:
                self._summarise()
            return
        if isinstance(reply, DraftChecked):  # a typed repository
            typed = reply.option.candidate.repo
            self.options = [o for o in self.options if o.candidate.repo != typed]
            self.options.insert(0, reply.option)
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
            return
        if not isinstance(reply, DraftsDone):
            return
        self.options = list(reply.options)
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
        good = sum(o.compatible for o in self.options) + sum(m.mismatch is None for m in self.local)
        if good:
            text = f"{good} compatible draft(s), fastest sensible choice first."
            self.status.setText(
                escape(text + (" " + self._hub_message if self._hub_message else ""))
            )
        elif self.mtp.isVisible():
            self.status.setText(
                escape(
                    "No separate draft model was found; none is needed: the model drafts for "
                    "itself. " + self._hub_message
                )
            )
        else:
            self.status.setText(
                note_html(
                    "No compatible draft model was found. "
                    + self._hub_message
                    + " Type a draft repository, browse to a file on this computer, or continue "
                    "with n-gram drafting, which needs no draft model."
                )
            )
        self._select_first()

    def _select_first(self) -> None:
        if self.table.selectedItems() or self.ngram.isChecked() or self.mtp.isChecked():
            return
        for row in range(self.table.rowCount()):
            if self._row_compatible(row):
                self.table.selectRow(row)
                return

    def _row_compatible(self, row: int) -> bool:
        if row < len(self.options):
            return self.options[row].compatible
        index = row - len(self.options)
        return 0 <= index < len(self.local) and self.local[index].mismatch is None

    def _fill(self) -> None:
        self.table.blockSignals(True)
        self.table.setRowCount(len(self.options) + len(self.local))
        rows: list[tuple[list[str], bool, str, str]] = []
        for option in self.options:
            group = option.group
            verdict = (
                "compatible"
                if option.compatible
                else (
                    f"incompatible: {mismatch_in_words(option.mismatch)}"
                    if option.mismatch
                    else f"not checked: {option.error}"
                )
            )
            rows.append(
                (
                    [
                        option.candidate.repo,
                        group.quant if group else "–",
                        human_bytes(group.size) if group else "–",
                        option.candidate.source,
                        verdict,
                    ],
                    option.compatible,
                    option.candidate.notes,
                    option.mismatch or "",
                )
            )
        for model in self.local:
            verdict = (
                "compatible"
                if model.mismatch is None
                else f"incompatible: {mismatch_in_words(model.mismatch)}"
            )
            rows.append(
                (
                    [
                        model.name,
                        model.facts.quantization,
                        human_bytes(model.size),
                        "on this computer",
                        verdict,
                    ],
                    model.mismatch is None,
                    model.path,
                    model.mismatch or "",
                )
            )
        for row, (texts, compatible, tooltip, detail) in enumerate(rows):
            colour = "#2e7d32" if compatible else "#c62828"
            for column, text in enumerate(texts):
                tip = (
                    tooltip
                    if column == 0
                    else (f"{text}\n({detail})" if column == 4 and detail else text)
                )
                item = cell(text, colour=colour if column == 4 else None, tooltip=tip)
                if not compatible:
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
        if 0 <= row < len(self.options) and self.options[row].compatible:
            option = self.options[row]
            offered = option.groups or ((option.group,) if option.group is not None else ())
            groups = sorted(offered, key=lambda g: (draft_speed_rank(g.quant), g.size))
            for group in groups:
                self.quant.addItem(f"{group.quant} · {human_bytes(group.size)}", group)
            chosen = option.group
            if self.state.draft is not None and self.state.draft.candidate == option.candidate:
                chosen = self.state.draft.group
            index = next((i for i, g in enumerate(groups) if g == chosen), 0)
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
        if group is not None and 0 <= row < len(self.options):
            for column, text in ((1, group.quant), (2, human_bytes(group.size))):
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
        return bool(self.table.selectedItems()) and self._row_compatible(row)

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        s = self.state
        s.draft, s.draft_local, s.draft_ngram = None, None, self.ngram.isChecked()
        s.draft_mtp = self.mtp.isChecked()
        if s.draft_ngram or s.draft_mtp:
            return True
        row = self.table.currentRow()
        if row < len(self.options):
            option = self.options[row]
            group = self.selected_group() or option.group
            s.draft = replace(option, group=group)
        else:
            s.draft_local = self.local[row - len(self.options)]
        return True
