"""The target page: a curated pair, a search of the Hub, or a GGUF on this computer."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.models.fit import FitLabel, gib
from app.ui.plain_text import tooltip as plain_tip
from app.ui.wizard.common import (
    FIT_COLOURS,
    LocalFiles,
    OfflineNote,
    Page,
    WizardHost,
    error_html,
    status_label,
)
from app.ui.wizard.pair_selection import (
    TargetChoices,
    choose_hub_target,
    choose_local_target,
    local_fit,
    where_text,
)
from app.ui.wizard.words import head_text
from app.workers.hub_jobs import ScanLocal, Search
from app.workers.hub_messages import HubFailure, LocalModel, LocalScanned, SearchResults


class TargetPage(LocalFiles, Page):
    BROWSE_TITLE = "Target model (GGUF)"

    def __init__(self, wizard: WizardHost) -> None:
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
        self.choices = TargetChoices(wizard.library, wizard.catalog, wizard.models_root)
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
            methods = catalog.drafting_words(entry)
            drafting = f"  ·  {methods}" if methods else ""
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
        self.submit(ScanLocal(self._library_paths(), tuple(self._extra)), self._fill_local)

    def _search(self) -> None:
        query = self.query.text().strip()
        self.forget_requests()
        self.search_status.setText(f"Searching for “{escape(query)}”…")
        self.results.clear()
        self.submit(Search(query), self._found)

    def _found(self, reply: SearchResults) -> None:
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
        self.choices.local = list(reply.models)
        self.local_list.clear()
        want = self._want
        for model in self.choices.local:
            fitted = local_fit(self.state, model)
            fit = f" — {fitted.label.value}" if fitted is not None else ""
            where = where_text(model, self.owner.models_root)
            f = model.facts
            item = QListWidgetItem(
                f"{model.name}  ·  {gib(model.size)}{fit}\n"
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
            f"{len(self.choices.local)} GGUF model(s) on this computer"
            if self.choices.local
            else "No GGUF models on this computer yet: browse to a file."
        )
        if problems:
            text += "<br>" + error_html("Not usable: ") + "<br>".join(problems[:3])
        chosen = next((m for m in self.choices.local if m.path == want), None)
        if chosen is not None and chosen.facts.drafting.is_head:
            text += "<br>" + error_html(f"{chosen.name}: {head_text(chosen.facts.drafting)}")
        self.local_status.setText(text)

    def on_failure(self, failure: HubFailure) -> None:
        self.search_status.setText(self.failure_text(failure))

    def selected_local(self) -> LocalModel | None:
        if self.tabs.currentIndex() != self.local_tab:
            return None
        return self.choices.selectable(self.local_list.currentRow())

    def selected_repo(self) -> str | None:
        if self.tabs.currentIndex() == self.local_tab:
            return None
        source = self.catalog_list if self.tabs.currentIndex() == 0 else self.results
        item = source.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def chosen_local(self) -> LocalModel | None:
        """The target on this computer that Next goes on with (``TargetChoices.chosen_local``)."""
        return self.choices.chosen_local(
            self.selected_local(), self.selected_repo(), self.state.online
        )

    def blocked_reason(self) -> str:
        """Why Next is off while a target is chosen, in words; empty otherwise."""
        return self.choices.blocked_reason(
            self.selected_local(), self.selected_repo(), self.state.online
        )

    def _show_reason(self) -> None:
        reason = self.blocked_reason()
        self.reason.setText(reason)
        self.reason.setVisible(bool(reason))

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.choices.complete(self.selected_local(), self.selected_repo(), self.state.online)

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        local = self.chosen_local()
        if local is not None:
            choose_local_target(self.state, local)
            self.show_context()
            return True
        return choose_hub_target(self.state, self.selected_repo(), self.owner.catalog)

    def nextId(self) -> int:  # noqa: N802 - Qt name
        if self.chosen_local() is not None:
            return self.owner.id_draft
        return self.owner.id_quant
