"""Wizard pages that choose the pair: hardware, target, quantization, draft."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.models.downloads import has_stored_token, human_bytes
from app.models.fit import KV_BYTES_PER_ELEMENT, assess, best_fit, estimate_pair, gib
from app.ui.wizard.common import FIT_COLOURS, Page, cell, error_html, make_table, status_label
from app.workers.hub_worker import (
    DetectHardware,
    DraftChecked,
    DraftOption,
    DraftsDone,
    FindDrafts,
    HardwareFound,
    HubFailure,
    InspectRepo,
    RepoInspected,
    SaveToken,
    Search,
    SearchResults,
    TokenSaved,
)

if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


class HardwarePage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Your hardware",
                         "SpecDeck sizes the pair for the memory this machine has free.")
        self.devices = status_label()
        self.ctx = QSpinBox()
        self.ctx.setRange(512, 262_144)
        self.ctx.setSingleStep(1024)
        self.ctx.setValue(wizard.state.n_ctx)
        self.ctx.setSuffix(" tokens")
        self.kv = QComboBox()
        self.kv.addItems(list(KV_BYTES_PER_ELEMENT))
        self.kv.setCurrentText(wizard.state.kv_type)
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("hf_… (only needed for gated models)")
        self.save_token = QPushButton("Save token")
        self.save_token.clicked.connect(self._save_token)
        self.token_status = status_label()

        settings = QFormLayout()
        settings.addRow("Context size", self.ctx)
        settings.addRow("KV cache type", self.kv)
        token_row = QHBoxLayout()
        token_row.addWidget(self.token)
        token_row.addWidget(self.save_token)
        box = QGroupBox("Hugging Face access token")
        box_layout = QVBoxLayout(box)
        box_layout.addLayout(token_row)
        box_layout.addWidget(self.token_status)
        layout = QVBoxLayout(self)
        layout.addWidget(self.devices)
        layout.addLayout(settings)
        layout.addWidget(box)
        layout.addStretch(1)
        self.registerField("n_ctx", self.ctx)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self._show_token_status()
        if self.state.hardware is None:
            self.devices.setText("Detecting devices…")
            self.submit(DetectHardware())
        else:
            self._show_hardware()

    def _show_token_status(self, extra: str = "") -> None:
        stored = "A token is stored." if has_stored_token() else "No token stored."
        self.token_status.setText(
            f"{stored} It is kept in huggingface_hub's own token store, never in SpecDeck's "
            f"settings. {extra}")

    def _show_hardware(self) -> None:
        hw = self.state.hardware
        assert hw is not None
        rows = [f"<b>Backend:</b> {hw.backend}"]
        for gpu in hw.gpus:
            rows.append(f"<b>{gpu.name}:</b> {gib(gpu.free)} free of {gib(gpu.total)}")
        if not hw.gpus:
            rows.append("No GPU in use: the models run on the CPU "
                        f"({hw.cpu_count} cores).")
        rows.append(f"<b>System RAM:</b> {gib(hw.ram_free)} available of {gib(hw.ram_total)}")
        self.devices.setText("<br>".join(rows))

    def _save_token(self) -> None:
        text = self.token.text().strip()
        if not text:
            self.token_status.setText(error_html("Paste a token from "
                                                 "huggingface.co/settings/tokens first."))
            return
        self.save_token.setEnabled(False)
        self.token_status.setText("Checking the token with the Hub…")
        self.submit(SaveToken(text))

    def on_result(self, reply: object) -> None:
        if isinstance(reply, HardwareFound):
            self.state.hardware = reply.hardware
            self._show_hardware()
        elif isinstance(reply, TokenSaved):
            self.token.clear()
            self.save_token.setEnabled(True)
            self._show_token_status("Saved.")

    def on_failure(self, failure: HubFailure) -> None:
        self.save_token.setEnabled(True)
        if self.state.hardware is None:
            self.devices.setText(error_html(failure.message))
        else:
            self.token_status.setText(error_html(failure.message))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.hardware is not None

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        self.state.n_ctx = self.ctx.value()
        self.state.kv_type = self.kv.currentText()
        return True


class TargetPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Target model",
                         "The model whose answers you want. Pick a curated pair or search "
                         "the Hugging Face Hub for GGUF models.")
        self.tabs = QTabWidget()
        self.catalog_list = QListWidget()
        for entry in wizard.catalog.targets():
            item = QListWidgetItem(f"{entry.repo}  ·  {entry.params_b:g}B\n{entry.notes}")
            item.setData(Qt.ItemDataRole.UserRole, entry.repo)
            self.catalog_list.addItem(item)
        self.query = QLineEdit()
        self.query.setPlaceholderText("e.g. qwen2.5 7b instruct")
        self.query.returnPressed.connect(self._search)
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self._search)
        self.results = QListWidget()
        self.search_status = status_label()
        search_tab = QWidget()
        search_layout = QVBoxLayout(search_tab)
        row = QHBoxLayout()
        row.addWidget(self.query)
        row.addWidget(self.search_button)
        search_layout.addLayout(row)
        search_layout.addWidget(self.search_status)
        search_layout.addWidget(self.results)
        self.tabs.addTab(self.catalog_list, "Curated pairs")
        self.tabs.addTab(search_tab, "Search the Hub")
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        for widget in (self.catalog_list, self.results):
            widget.currentItemChanged.connect(lambda *_: self.completeChanged.emit())
        self.tabs.currentChanged.connect(lambda *_: self.completeChanged.emit())

    def _search(self) -> None:
        query = self.query.text().strip()
        self.forget_requests()
        self.search_status.setText(f"Searching for “{query}”…")
        self.results.clear()
        self.submit(Search(query))

    def on_result(self, reply: object) -> None:
        if not isinstance(reply, SearchResults):
            return
        for hit in reply.hits:
            lock = "  🔒 gated" if hit.gated else ""
            item = QListWidgetItem(f"{hit.repo_id}   ↓ {hit.downloads:,}{lock}")
            item.setData(Qt.ItemDataRole.UserRole, hit.repo_id)
            self.results.addItem(item)
        self.search_status.setText(f"{len(reply.hits)} GGUF repositories, most downloaded first"
                                   if reply.hits else "Nothing found; try fewer words.")

    def on_failure(self, failure: HubFailure) -> None:
        self.search_status.setText(error_html(failure.message))

    def selected_repo(self) -> str | None:
        source = self.catalog_list if self.tabs.currentIndex() == 0 else self.results
        item = source.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.selected_repo() is not None

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        repo = self.selected_repo()
        if repo != self.state.target_repo:
            self.state.inspected = None
            self.state.target_group = None
        self.state.target_repo = repo
        self.state.target_entry = self.owner.catalog.by_repo(repo) if repo else None
        return repo is not None


class QuantPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Quantization",
                         "Smaller files run faster and fit more easily; larger ones are more "
                         "accurate. The best quantization that fits is preselected.")
        self.status = status_label()
        self.table = make_table(["Quantization", "File", "Size", "Memory (target)", "Fit"])
        self.table.itemSelectionChanged.connect(self.completeChanged)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.table)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.table.setRowCount(0)
        if self.state.inspected is not None and self.state.inspected.repo_id == \
                self.state.target_repo:
            self._fill()
            return
        self.status.setText(f"Reading {self.state.target_repo} (file list and model header)…")
        self.submit(InspectRepo(self.state.target_repo or ""))

    def on_result(self, reply: object) -> None:
        if isinstance(reply, RepoInspected):
            self.state.inspected = reply
            self._fill()

    def on_failure(self, failure: HubFailure) -> None:
        self.status.setText(error_html(failure.message))

    def _fill(self) -> None:
        inspected, hw = self.state.inspected, self.state.hardware
        assert inspected is not None and hw is not None
        f = inspected.facts
        self.status.setText(
            f"<b>{inspected.repo_id}</b>: {f.architecture}, {f.n_layer} layers, "
            f"trained context {f.context_length:,} tokens. Memory is for the target alone at "
            f"{self.state.n_ctx:,} tokens of context; a draft adds a little (see Review).")
        options = []
        self.table.setRowCount(len(inspected.groups))
        for row, group in enumerate(inspected.groups):
            est = estimate_pair(f, group.size, None, 0, self.state.n_ctx, self.state.kv_type)
            fit = assess(est, hw)
            options.append((group.quant, fit))
            self.table.setItem(row, 0, cell(group.quant))
            self.table.setItem(row, 1, cell(group.label))
            self.table.setItem(row, 2, cell(human_bytes(group.size)))
            self.table.setItem(row, 3, cell(gib(est.needed)))
            self.table.setItem(row, 4, cell(fit.label.value, colour=FIT_COLOURS[fit.label],
                                            tooltip=fit.message))
        self.table.resizeColumnsToContents()
        preferred = self.state.target_entry.quant if self.state.target_entry else None
        previous = self.state.target_group.quant if self.state.target_group else None
        choice = previous or best_fit(options, preferred)
        for row, group in enumerate(inspected.groups):
            if group.quant == choice:
                self.table.selectRow(row)

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.inspected is not None and bool(self.table.selectedItems())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        assert self.state.inspected is not None
        group = self.state.inspected.groups[self.table.currentRow()]
        if group != self.state.target_group:
            self.state.draft = None
        self.state.target_group = group
        return True


class DraftPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(wizard, "Draft model",
                         "A small model with the same vocabulary proposes tokens for the "
                         "target to check. Candidates are checked by their GGUF headers "
                         "before anything is downloaded.")
        self.status = status_label()
        self.table = make_table(["Draft", "Quantization", "Size", "Why", "Compatibility"])
        self.table.itemSelectionChanged.connect(self.completeChanged)
        self.options: list[DraftOption] = []
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.table)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.options = []
        self.table.setRowCount(0)
        group = self.state.target_group
        assert group is not None and self.state.target_repo is not None
        self.status.setText("Looking for drafts and checking their vocabularies…")
        self.submit(FindDrafts(self.state.target_repo, group.first.path, self.owner.catalog))

    def on_progress(self, reply: object) -> None:
        if isinstance(reply, DraftChecked):
            self.options.append(reply.option)
            self._fill()

    def on_result(self, reply: object) -> None:
        if not isinstance(reply, DraftsDone):
            return
        self.options = list(reply.options)
        self._fill()
        good = sum(o.compatible for o in self.options)
        self.status.setText(
            f"{good} compatible draft(s), best first." if good else error_html(
                "No compatible draft was found for this target. Go back and pick another "
                "target, or a curated pair."))
        for row, option in enumerate(self.options):
            if option.compatible:
                self.table.selectRow(row)
                break

    def on_failure(self, failure: HubFailure) -> None:
        self.status.setText(error_html(failure.message))

    def _fill(self) -> None:
        self.table.setRowCount(len(self.options))
        for row, option in enumerate(self.options):
            group = option.group
            verdict = "compatible" if option.compatible else (
                f"incompatible: {option.mismatch}" if option.mismatch else
                f"not checked: {option.error}")
            colour = "#2e7d32" if option.compatible else "#c62828"
            items = [cell(option.candidate.repo, tooltip=option.candidate.notes),
                     cell(group.quant if group else "–"),
                     cell(human_bytes(group.size) if group else "–"),
                     cell(option.candidate.source),
                     cell(verdict, colour=colour, tooltip=verdict)]
            for column, item in enumerate(items):
                if not option.compatible:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable
                                  & ~Qt.ItemFlag.ItemIsEnabled)
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        row = self.table.currentRow()
        return not self.busy and 0 <= row < len(self.options) and self.options[row].compatible \
            and bool(self.table.selectedItems())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        self.state.draft = self.options[self.table.currentRow()]
        return True
