"""The last page: the pair saved, and made the active one when asked."""

from __future__ import annotations

from html import escape

from PySide6.QtWidgets import QVBoxLayout

from app.models.library import LibraryError
from app.ui.wizard.common import Page, WizardHost, error_html, status_label
from app.ui.wizard.pair_selection import activates, pair_profile


class FinishPage(Page):
    def __init__(self, wizard: WizardHost) -> None:
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
        profile = pair_profile(s)
        activate = activates(s)
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
            f"({profile.draft_max} tokens per pass) are applied when it loads. Switch, rename "
            "or delete saved pairs from Change pair… in the pair bar."
        )
        self.owner.profile_saved.emit(profile.name)
