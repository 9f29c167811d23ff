"""The last page: the pair saved, and made the active one when asked."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QVBoxLayout

from app.models.library import LibraryError, Profile
from app.ui.wizard.common import Page, error_html, status_label

if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


class FinishPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
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
        cal = None if s.no_draft_model else s.calibration
        assert s.target_model_id is not None
        calibration: dict[str, float] = {}
        draft_max = 8
        if cal is not None:
            draft_max = cal.saved_draft_max
            calibration = {
                "acceptance": cal.acceptance,
                "speedup": cal.speedup,
                "spec_tok_s": cal.spec_tok_s,
                "base_tok_s": cal.base_tok_s,
                "draft_length_margin": cal.length_margin,
            }
        profile = Profile(
            name=s.profile_name,
            target=s.target_model_id,
            draft=None if s.no_draft_model else s.draft_model_id,
            n_ctx=s.n_ctx,
            kv_type=s.kv_type,
            draft_max=draft_max,
            calibration=calibration,
            draft_source="mtp" if s.draft_mtp else "ngram" if s.draft_ngram else "model",
        )
        activate = s.activate or s.no_draft_model
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
            f"({draft_max} tokens per pass) are applied when it loads. Switch, rename or delete "
            "saved pairs from Change pair… in the pair bar."
        )
        self.owner.profile_saved.emit(profile.name)
