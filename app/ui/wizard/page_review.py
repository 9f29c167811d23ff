"""The review page: the pair, its download size, its memory estimate and its name."""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtWidgets import QFormLayout, QLineEdit, QWizard

from app.models.downloads import free_bytes
from app.models.fit import assess, estimate_pair, gib, memory_text
from app.models.library import LibraryError
from app.ui.box_layouts import column
from app.ui.wizard.common import FIT_COLOURS, Page, WizardHost, error_html, note_html, status_label
from app.ui.wizard.pair_selection import (
    default_pair_name,
    download_items,
    draft_size_warning,
    still_to_download,
)
from app.workers.hub_messages import DownloadItem, LocalModel


class ReviewPage(Page):
    def __init__(self, wizard: WizardHost) -> None:
        super().__init__(
            wizard, "Review", "Check the pair, its download size and its memory estimate."
        )
        self.summary = status_label()
        self.name = QLineEdit()
        self.name.textChanged.connect(self.completeChanged)
        form = QFormLayout()
        form.addRow("Name of the pair", self.name)
        column(self, self.summary, form)
        self.setCommitPage(True)
        self.setButtonText(QWizard.WizardButton.CommitButton, "Download")
        self._suggested = ""

    def items(self) -> tuple[DownloadItem, ...]:
        return download_items(self.state)

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
            f"<b>Target:</b> {escape(s.target_name)} ({gib(s.target_size)})",
            f"<b>Draft:</b> {escape(s.draft_name)}"
            + (f" ({gib(s.draft_size)})" if s.draft_size else ""),
            (f"<b>To download:</b> {gib(missing)} into {escape(str(root))} ({gib(free)} free)")
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
        warning = draft_size_warning(s)
        if warning:
            rows.append(note_html(warning))
        self.summary.setText("<br>".join(rows))
        self.setButtonText(QWizard.WizardButton.CommitButton, "Download" if items else "Next")
        # A name the person typed is kept; the suggestion follows the pair.
        if not self.name.text() or self.name.text() == self._suggested:
            self._suggested = self.owner.library.unique_profile_name(default_pair_name(s))
            self.name.setText(self._suggested)

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
