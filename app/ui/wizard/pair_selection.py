"""The pair wizard's selection, without Qt: what the person has chosen so far."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.hardware import Hardware
from app.gguf.header import ModelFacts, SelfDrafting
from app.models.catalog import CatalogModel
from app.models.hub import QuantGroup
from app.workers.hub_messages import Calibrated, DraftOption, LocalModel, RepoInspected


@dataclass
class WizardState:
    hardware: Hardware | None = None
    n_ctx: int = 4096
    kv_type: str = "f16"
    target_repo: str | None = None
    target_entry: CatalogModel | None = None
    inspected: RepoInspected | None = None
    target_group: QuantGroup | None = None
    draft: DraftOption | None = None
    profile_name: str = ""
    target_model_id: str | None = None
    draft_model_id: str | None = None
    calibration: Calibrated | None = None
    online: bool | None = None  # None: not probed yet; cached for the wizard's session
    offline_reason: str = ""
    target_local: LocalModel | None = None  # a target on this computer instead of the Hub
    draft_local: LocalModel | None = None
    draft_ngram: bool = False  # no draft model: prompt-lookup drafting
    # the target drafts for itself with its next-token layers; None: not decided yet (the
    # draft page makes it the first choice for a target that has them)
    draft_mtp: bool | None = None
    activate: bool = True  # make the saved pair the active one
    context_note: str = ""  # said when the context size was lowered to the trained length

    @property
    def target_facts(self) -> ModelFacts | None:
        if self.target_local is not None:
            return self.target_local.facts
        return self.inspected.facts if self.inspected is not None else None

    @property
    def target_size(self) -> int:
        if self.target_local is not None:
            return self.target_local.size
        return self.target_group.size if self.target_group is not None else 0

    @property
    def target_name(self) -> str:
        if self.target_local is not None:
            return self.target_local.path
        group = self.target_group.label if self.target_group else ""
        return f"{self.target_repo} · {group}"

    @property
    def no_draft_model(self) -> bool:
        """n-gram drafting or the target's own heads: nothing to download or calibrate."""
        return self.draft_ngram or bool(self.draft_mtp)

    @property
    def target_drafting(self) -> SelfDrafting | None:
        facts = self.target_facts
        return facts.drafting if facts is not None else None

    @property
    def draft_facts(self) -> ModelFacts | None:
        if self.draft_ngram or self.draft_mtp:
            return None
        if self.draft_local is not None:
            return self.draft_local.facts
        return self.draft.facts if self.draft is not None else None

    @property
    def draft_size(self) -> int:
        if self.draft_ngram or self.draft_mtp:
            return 0
        if self.draft_local is not None:
            return self.draft_local.size
        return self.draft.group.size if self.draft is not None and self.draft.group else 0

    @property
    def draft_name(self) -> str:
        if self.draft_ngram:
            return "n-gram drafting (prompt lookup, no draft model)"
        if self.draft_mtp:
            own = self.target_drafting
            heads = own.name if own is not None else "MTP"
            return f"the target's own next-token layers ({heads}), no draft model"
        if self.draft_local is not None:
            return self.draft_local.path
        if self.draft is not None and self.draft.group is not None:
            return f"{self.draft.candidate.repo} · {self.draft.group.label}"
        return "—"
