"""Wizard pages that choose the pair: hardware, target, quantization, draft."""

from __future__ import annotations

from dataclasses import replace
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.gguf.header import SelfDrafting
from app.models.downloads import has_stored_token, human_bytes
from app.models.fit import (
    KV_BYTES_PER_ELEMENT,
    FitLabel,
    assess,
    best_fit,
    draft_speed_rank,
    estimate_pair,
    gib,
)
from app.models.hub import QuantGroup, unsafe_repo_id_reason
from app.ui.plain_text import tooltip as plain_tip
from app.ui.wizard.common import (
    FIT_COLOURS,
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
    DetectHardware,
    DraftChecked,
    DraftOption,
    DraftsDone,
    FindDrafts,
    HardwareFound,
    HubFailure,
    InspectRepo,
    LocalModel,
    LocalScanned,
    RepoInspected,
    SaveToken,
    ScanLocal,
    Search,
    SearchResults,
    TokenSaved,
)

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"


def head_text(drafting: SelfDrafting) -> str:
    """Why a head offered as the target is not one, and what to do instead."""
    article = "an" if drafting.name[0] in "aeiouAEIOU" else "a"
    target = f"a {drafting.target_arch} model" if drafting.target_arch else "its target model"
    return (
        f"this is {article} {drafting.name}, not a target: it drafts for {target} and cannot "
        f"answer by itself. Choose {target} as the target instead."
    )


def browse_gguf(parent: QWidget, title: str) -> str | None:
    path, _ = QFileDialog.getOpenFileName(parent, title, "", GGUF_FILTER)
    return path or None


class OfflineNote(QWidget):
    """“The Hub cannot be reached” with a Retry, shown while the wizard is offline."""

    def __init__(self, wizard: PairWizard) -> None:
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


if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


class LocalFiles:
    """Models on this computer for a wizard page: the library's files plus any the person
    browsed to; a browsed file is selected once it has been read."""

    BROWSE_TITLE = "Model (GGUF)"
    _extra: list[str]
    _want: str | None

    def _init_local_files(self) -> None:
        self._extra = []
        self._want = None

    def _library_paths(self) -> tuple[str, ...]:
        return tuple(m.path for m in self.owner.library.models.values() if m.available)  # type: ignore[attr-defined]

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


class HardwarePage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard, "Your hardware", "SpecDeck sizes the pair for the memory this machine has free."
        )
        self.devices = status_label()
        self.offline = OfflineNote(wizard)
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
        layout.addWidget(self.offline)
        layout.addWidget(self.devices)
        layout.addLayout(settings)
        layout.addWidget(box)
        layout.addStretch(1)
        self.registerField("n_ctx", self.ctx)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self._show_token_status()
        if self.state.online is None and not self.owner.probing:
            self.owner.probe_hub()
        if self.state.hardware is None:
            self.devices.setText("Detecting devices…")
            self.submit(DetectHardware())
        else:
            self._show_hardware()

    def _show_token_status(self, extra: str = "") -> None:
        stored = "A token is stored." if has_stored_token() else "No token stored."
        self.token_status.setText(
            f"{stored} It is kept in huggingface_hub's own token store, never in SpecDeck's "
            f"settings. {extra}"
        )

    def _show_hardware(self) -> None:
        hw = self.state.hardware
        assert hw is not None
        rows = [f"<b>Backend:</b> {escape(hw.backend)}"]
        for gpu in hw.gpus:
            rows.append(
                f"<b>{escape(gpu.label)}:</b> {gib(gpu.free_bytes)} free of {gib(gpu.total_bytes)}"
            )
        if not hw.gpus:
            rows.append(f"No GPU in use: the models run on the CPU ({hw.cpu_count} cores).")
        rows.append(f"<b>System RAM:</b> {gib(hw.ram_free)} available of {gib(hw.ram_total)}")
        self.devices.setText("<br>".join(rows))

    def _save_token(self) -> None:
        text = self.token.text().strip()
        if not text:
            self.token_status.setText(
                error_html("Paste a token from huggingface.co/settings/tokens first.")
            )
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
            self.token_status.setText(self.failure_text(failure))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.hardware is not None

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        self.state.n_ctx = self.ctx.value()
        self.state.kv_type = self.kv.currentText()
        return True


class TargetPage(LocalFiles, Page):
    BROWSE_TITLE = "Target model (GGUF)"

    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard,
            "Target model",
            "The model whose answers you want: a curated pair, a search of the "
            "Hugging Face Hub, or a GGUF already on this computer.",
        )
        self.offline = OfflineNote(wizard)
        self.tabs = QTabWidget()
        self.catalog_list = QListWidget()
        self.catalog_list.setAlternatingRowColors(True)  # entries of three lines stay apart
        self.catalog_list.setSpacing(2)
        self.query = QLineEdit()
        self.query.setPlaceholderText("e.g. qwen3 gguf")
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
        self.local_list = QListWidget()
        self.local_status = status_label()
        self.browse = QPushButton("Browse for a target…")
        self.browse.clicked.connect(self._browse)
        local_tab = QWidget()
        local_layout = QVBoxLayout(local_tab)
        local_layout.addWidget(self.local_status)
        local_layout.addWidget(self.local_list)
        local_layout.addWidget(self.browse, 0, Qt.AlignmentFlag.AlignLeft)
        self.tabs.addTab(self.catalog_list, "Curated pairs")
        self.tabs.addTab(search_tab, "Search the Hub")
        self.local_tab = self.tabs.addTab(local_tab, "Models on this computer")
        self.reason = QLabel()  # why Next is off, when a choice cannot go on
        self.reason.setObjectName("targetReason")
        self.reason.setTextFormat(Qt.TextFormat.PlainText)
        self.reason.setWordWrap(True)
        self.reason.hide()
        layout = QVBoxLayout(self)
        layout.addWidget(self.offline)
        layout.addWidget(self.tabs)
        layout.addWidget(self.reason)
        self.completeChanged.connect(self._show_reason)
        for widget in (self.catalog_list, self.results, self.local_list):
            widget.currentItemChanged.connect(lambda *_: self.completeChanged.emit())
        self.tabs.currentChanged.connect(lambda *_: self.completeChanged.emit())
        self.local: list[LocalModel] = []
        self._init_local_files()
        self._shown_offline = False
        wizard.online_changed.connect(self._online_changed)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self._fill_catalog()
        self._scan()
        if self.state.online is False and not self._shown_offline:
            self._shown_offline = True
            self.tabs.setCurrentIndex(self.local_tab)
        self._online_changed()

    def _fill_catalog(self) -> None:
        self.catalog_list.clear()
        hardware = self.state.hardware
        catalog = self.owner.catalog
        for entry, fit in catalog.targets_for(hardware):
            where = f"≈ {gib(fit.needed)} at {entry.quant}" if fit else ""
            label = f" — {fit.label.value} on this computer" if fit else ""
            drafting = "  ·  drafts for itself (MTP)" if entry.drafting == "mtp" else ""
            checked = catalog.checked(entry)
            status = (
                f"checked against the Hub {checked}"
                if checked
                else "unchecked: not yet confirmed against the Hub with check-pair"
            )
            item = QListWidgetItem(
                f"{entry.repo}  ·  {entry.params_b:g}B  {where}{label}{drafting}\n"
                f"{entry.notes}\n{status}"
            )
            item.setData(Qt.ItemDataRole.UserRole, entry.repo)
            if fit is not None:
                item.setToolTip(plain_tip(f"{fit.label.value}: {fit.message}"))
            self.catalog_list.addItem(item)

    def _online_changed(self) -> None:
        offline = self.state.online is False
        self.search_button.setEnabled(not offline)
        if offline and not self._shown_offline and self.owner.currentPage() is self:
            self._shown_offline = True
            self.tabs.setCurrentIndex(self.local_tab)
        self.completeChanged.emit()

    def _scan(self) -> None:
        self.local_status.setText("Reading the GGUF models on this computer…")
        self.submit(ScanLocal(self._library_paths(), tuple(self._extra)))

    def _search(self) -> None:
        query = self.query.text().strip()
        self.forget_requests()
        self.search_status.setText(f"Searching for “{escape(query)}”…")
        self.results.clear()
        self.submit(Search(query))

    def on_result(self, reply: object) -> None:
        if isinstance(reply, LocalScanned):
            self._fill_local(reply)
            return
        if not isinstance(reply, SearchResults):
            return
        for hit in reply.hits:
            # Words, not only a lock glyph: not every system font has the emoji.
            lock = "   🔒 gated: accept its license and save an access token" if hit.gated else ""
            item = QListWidgetItem(f"{hit.repo_id}   ↓ {hit.downloads:,}{lock}")
            item.setData(Qt.ItemDataRole.UserRole, hit.repo_id)
            if hit.gated:
                item.setForeground(QColor(FIT_COLOURS[FitLabel.TIGHT]))
                item.setToolTip(
                    "A gated repository: accept its license on the Hugging Face "
                    "website, then save an access token on the first page"
                )
            self.results.addItem(item)
        self.search_status.setText(
            f"{len(reply.hits)} GGUF repositories, most downloaded first"
            if reply.hits
            else "Nothing found; try fewer words."
        )

    def _fill_local(self, reply: LocalScanned) -> None:
        self.local = [m for m in reply.models]
        self.local_list.clear()
        hardware = self.state.hardware
        want = self._want
        for model in self.local:
            fit = ""
            if hardware is not None and not model.facts.drafting.is_head:
                trained = model.facts.context_length
                n_ctx = min(self.state.n_ctx, trained) if trained > 0 else self.state.n_ctx
                est = estimate_pair(model.facts, model.size, None, 0, n_ctx, self.state.kv_type)
                fit = f" — {assess(est, hardware).label.value}"
            where = (
                "in your library"
                if model.in_library
                else "in SpecDeck's model cache"
                if model.in_cache
                else "in SpecDeck's models folder"
                if Path(model.path).is_relative_to(self.owner.models_root)
                else model.path
            )
            f = model.facts
            item = QListWidgetItem(
                f"{model.name}  ·  {human_bytes(model.size)}{fit}\n"
                f"{f.architecture}, {f.n_layer} layers, trained context "
                f"{f.context_length:,}, {f.drafting.name} · {where}"
                + (
                    f"\n{f.drafting.name}: a draft for another model, not a target"
                    if f.drafting.is_head
                    else ""
                )
            )
            item.setToolTip(plain_tip(model.path))
            if f.drafting.is_head:  # a draft for some target, not one itself
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)
                item.setForeground(QColor(FIT_COLOURS[FitLabel.NO_FIT]))
            self.local_list.addItem(item)
            if want is not None and model.path == want and not f.drafting.is_head:
                self.local_list.setCurrentItem(item)
        problems = [
            f"{escape(p)}: {escape(why)}"
            for p, why in reply.unreadable
            if want is None or p == want
        ]
        text = (
            f"{len(self.local)} GGUF model(s) on this computer"
            if self.local
            else "No GGUF models on this computer yet: browse to a file."
        )
        if problems:
            text += "<br>" + error_html("Not usable: ") + "<br>".join(problems[:3])
        chosen = next((m for m in self.local if m.path == want), None)
        if chosen is not None and chosen.facts.drafting.is_head:
            text += "<br>" + error_html(f"{chosen.name}: {head_text(chosen.facts.drafting)}")
        self.local_status.setText(text)

    def on_failure(self, failure: HubFailure) -> None:
        self.search_status.setText(self.failure_text(failure))

    def selected_local(self) -> LocalModel | None:
        if self.tabs.currentIndex() != self.local_tab:
            return None
        row = self.local_list.currentRow()
        if not 0 <= row < len(self.local) or self.local[row].facts.drafting.is_head:
            return None
        return self.local[row]

    def selected_repo(self) -> str | None:
        if self.tabs.currentIndex() == self.local_tab:
            return None
        source = self.catalog_list if self.tabs.currentIndex() == 0 else self.results
        item = source.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def local_copy(self, repo: str) -> LocalModel | None:
        """A file of Hub repository ``repo`` already on this computer (downloaded into the
        models folder, or in the library under that repository), preferring the curated
        quantization; None when there is none."""
        folder = self.owner.models_root / repo.replace("/", "--")
        known = {
            m.path for m in self.owner.library.models.values() if m.repo_id == repo and m.available
        }
        entry = self.owner.catalog.by_repo(repo)
        copies = [m for m in self.local if m.path in known or Path(m.path).is_relative_to(folder)]
        copies.sort(key=lambda m: entry is None or m.facts.quantization != entry.quant)
        return copies[0] if copies else None

    def chosen_local(self) -> LocalModel | None:
        """The target on this computer that Next goes on with: the one chosen under “Models
        on this computer”, or offline, the local copy of the chosen Hub repository."""
        local = self.selected_local()
        repo = self.selected_repo()
        if local is None and repo is not None and self.state.online is False:
            local = self.local_copy(repo)
        return local

    def blocked_reason(self) -> str:
        """Why Next is off while a target is chosen, in words; empty otherwise."""
        repo = self.selected_repo()
        if repo is None or self.isComplete():
            return ""
        return (
            f"{repo} is not on this computer, and the Hugging Face Hub cannot be reached to "
            "download it. Choose a model under “Models on this computer”, or click Retry "
            "when you are online."
        )

    def _show_reason(self) -> None:
        reason = self.blocked_reason()
        self.reason.setText(reason)
        self.reason.setVisible(bool(reason))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        if self.chosen_local() is not None:
            return True
        return self.selected_repo() is not None and self.state.online is not False

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        local = self.chosen_local()
        if local is not None:
            if local != self.state.target_local:
                self.state.draft = None
                self.state.draft_local = None
                self.state.draft_mtp = None
            self.state.target_local = local
            self.state.context_note = cap_context(self.owner, local.facts.context_length)
            self.state.target_repo = None
            self.state.target_entry = None
            self.state.inspected = None
            self.state.target_group = None
            return True
        repo = self.selected_repo()
        if repo != self.state.target_repo:
            self.state.inspected = None
            self.state.target_group = None
            self.state.draft_mtp = None
        self.state.target_local = None
        self.state.target_repo = repo
        self.state.target_entry = self.owner.catalog.by_repo(repo) if repo else None
        return repo is not None

    def nextId(self) -> int:  # noqa: N802 - Qt name
        if self.chosen_local() is not None:
            return self.owner.id_draft
        return self.owner.id_quant


class QuantPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard,
            "Quantization",
            "Smaller files run faster and fit more easily; larger ones are more "
            "accurate. The best quantization that fits is preselected.",
        )
        self.status = status_label()
        self.retry = QPushButton("Retry")
        self.retry.clicked.connect(self.initializePage)
        self.retry.setVisible(False)
        self.table = make_table(["Quantization", "File", "Size", "Memory (target)", "Fit"])
        self.table.itemSelectionChanged.connect(self.completeChanged)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.retry, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.table)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.retry.setVisible(False)
        self.table.setRowCount(0)
        if (
            self.state.inspected is not None
            and self.state.inspected.repo_id == self.state.target_repo
        ):
            self._fill()
            return
        self.status.setText(
            f"Reading {escape(self.state.target_repo or '')} (file list and model header)…"
        )
        self.submit(InspectRepo(self.state.target_repo or ""))

    def on_result(self, reply: object) -> None:
        if isinstance(reply, RepoInspected):
            self.state.inspected = reply
            self._fill()

    def on_failure(self, failure: HubFailure) -> None:
        self.retry.setVisible(True)
        self.status.setText(self.failure_text(failure))

    def _fill(self) -> None:
        inspected, hw = self.state.inspected, self.state.hardware
        assert inspected is not None and hw is not None
        f = inspected.facts
        if f.drafting.is_head:  # an assistant or a head: explained, not offered as a target
            self.table.setRowCount(0)
            self.status.setText(
                error_html(f"{inspected.repo_id}: {head_text(f.drafting)}")
                + (f"<br>{escape(self._heads_text())}" if inspected.heads else "")
            )
            return
        capped = cap_context(self.owner, f.context_length)
        self.state.context_note = capped
        mtp = f.drafting.method == "mtp"
        memory = (
            f"Memory is for the target drafting for itself ({escape(f.drafting.name)}: its MTP "
            f"context included) at {self.state.n_ctx:,} tokens of context."
            if mtp
            else f"Memory is for the target alone at {self.state.n_ctx:,} tokens of context; a "
            "draft adds a little (see Review)."
        )
        self.status.setText(
            f"<b>{escape(inspected.repo_id)}</b>: {escape(f.architecture)}, {f.n_layer} layers, "
            f"trained context {f.context_length:,} tokens. {memory}"
            + (f"<br>{capped}" if capped else "")
            + (f"<br>{escape(self._heads_text())}" if inspected.heads else "")
        )
        options = []
        self.table.setRowCount(len(inspected.groups))
        for row, group in enumerate(inspected.groups):
            est = estimate_pair(
                f, group.size, None, 0, self.state.n_ctx, self.state.kv_type, mtp=mtp
            )
            fit = assess(est, hw)
            options.append((group.quant, fit))
            self.table.setItem(row, 0, cell(group.quant))
            self.table.setItem(row, 1, cell(group.label))
            self.table.setItem(row, 2, cell(human_bytes(group.size)))
            self.table.setItem(row, 3, cell(gib(est.needed)))
            self.table.setItem(
                row, 4, cell(fit.label.value, colour=FIT_COLOURS[fit.label], tooltip=fit.message)
            )
        self.table.resizeColumnsToContents()
        preferred = self.state.target_entry.quant if self.state.target_entry else None
        previous = self.state.target_group.quant if self.state.target_group else None
        choice = previous or best_fit(options, preferred)
        for row, group in enumerate(inspected.groups):
            if group.quant == choice:
                self.table.selectRow(row)

    def _heads_text(self) -> str:
        inspected = self.state.inspected
        assert inspected is not None
        names = ", ".join(g.label for g in inspected.heads[:3])
        more = f" and {len(inspected.heads) - 3} more" if len(inspected.heads) > 3 else ""
        return (
            f"The repository also holds {len(inspected.heads)} drafting head file(s) ({names}"
            f"{more}): heads, not target files, so they are not listed here."
        )

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.inspected is not None and bool(self.table.selectedItems())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        assert self.state.inspected is not None
        group = self.state.inspected.groups[self.table.currentRow()]
        if group != self.state.target_group:
            self.state.draft = None
        self.state.target_group = group
        return True


def cap_context(wizard: PairWizard, trained: int) -> str:
    """Lower the wizard's context size to the model's trained length; says so when it did."""
    state = wizard.state
    if trained <= 0 or state.n_ctx <= trained:
        return ""
    asked, state.n_ctx = state.n_ctx, trained
    wizard.page_hardware.ctx.setValue(trained)
    return (
        f"Context size lowered from {asked:,} to {trained:,} tokens: the model was "
        "trained on no more, and answers badly past that."
    )


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
