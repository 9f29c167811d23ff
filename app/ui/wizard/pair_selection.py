"""The pair wizard's selection, without Qt: what the person has chosen so far
(``WizardState``), and the rules each page applies to it.

A page reads its widgets (which tab, which row, which box is ticked), asks this module what
that choice means (may Next go on, which quantization to preselect, which download is left)
and stores it with one of the ``choose_*`` functions; the pages after it read the state.
Everything here runs without a display, and ``tests/wizard/test_pair_selection.py`` checks it
without Qt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.engine.llama.hardware import Hardware
from app.gguf.facts import ModelFacts, SelfDrafting
from app.models.catalog import Catalog, CatalogModel
from app.models.fit import (
    FitResult,
    PairEstimate,
    assess,
    best_fit,
    draft_speed_rank,
    estimate_pair,
    gib,
)
from app.models.hub import QuantGroup
from app.models.library import Library, Profile
from app.ui.wizard.words import mismatch_in_words
from app.workers.hub_messages import (
    Calibrated,
    DownloadItem,
    DraftOption,
    LocalModel,
    RepoInspected,
)

# A draft costs about its size per token; above this fraction of the target's size it rarely
# pays for itself.
DRAFT_SIZE_WARNING = 0.35


@dataclass
class WizardState:
    """What the person has chosen so far: each page stores its choice here, and the pages
    after it read it."""

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


# --- the context size ---------------------------------------------------------------------


def lower_context(state: WizardState, trained: int) -> str:
    """Lower the context size to the model's trained length; says so when it did."""
    if trained <= 0 or state.n_ctx <= trained:
        return ""
    asked, state.n_ctx = state.n_ctx, trained
    return (
        f"Context size lowered from {asked:,} to {trained:,} tokens: the model was "
        "trained on no more, and answers badly past that."
    )


# --- the target ---------------------------------------------------------------------------


def local_fit(state: WizardState, model: LocalModel) -> FitResult | None:
    """How a model on this computer would fit as the target alone; None for a head, which is
    no target, or before the hardware is known."""
    hardware = state.hardware
    if hardware is None or model.facts.drafting.is_head:
        return None
    trained = model.facts.context_length
    n_ctx = min(state.n_ctx, trained) if trained > 0 else state.n_ctx
    est = estimate_pair(model.facts, model.size, None, 0, n_ctx, state.kv_type)
    return assess(est, hardware)


def where_text(model: LocalModel, models_root: Path) -> str:
    """Where a model on this computer lies, in words (its path when nowhere SpecDeck keeps
    models)."""
    if model.in_library:
        return "in your library"
    if model.in_cache:
        return "in SpecDeck's model cache"
    if Path(model.path).is_relative_to(models_root):
        return "in SpecDeck's models folder"
    return model.path


@dataclass
class TargetChoices:
    """The target page's models on this computer, and what a selection on the page means:
    ``selected`` is the model chosen under “Models on this computer”, ``repo`` the Hub
    repository chosen in the curated list or the search results (one of them, or neither)."""

    library: Library
    catalog: Catalog
    models_root: Path
    local: list[LocalModel] = field(default_factory=list)

    def selectable(self, row: int) -> LocalModel | None:
        """The model on this computer in ``row``; None for a head, which is no target."""
        if not 0 <= row < len(self.local) or self.local[row].facts.drafting.is_head:
            return None
        return self.local[row]

    def local_copy(self, repo: str) -> LocalModel | None:
        """A file of Hub repository ``repo`` already on this computer (downloaded into the
        models folder, or in the library under that repository), preferring the curated
        quantization; None when there is none."""
        folder = self.models_root / repo.replace("/", "--")
        known = {m.path for m in self.library.models.values() if m.repo_id == repo and m.available}
        entry = self.catalog.by_repo(repo)
        copies = [m for m in self.local if m.path in known or Path(m.path).is_relative_to(folder)]
        copies.sort(key=lambda m: entry is None or m.facts.quantization != entry.quant)
        return copies[0] if copies else None

    def chosen_local(
        self, selected: LocalModel | None, repo: str | None, online: bool | None
    ) -> LocalModel | None:
        """The target on this computer that Next goes on with: the one selected, or offline,
        the local copy of the chosen Hub repository."""
        if selected is None and repo is not None and online is False:
            return self.local_copy(repo)
        return selected

    def complete(self, selected: LocalModel | None, repo: str | None, online: bool | None) -> bool:
        """Whether Next may go on: with a target on this computer, or with a Hub repository
        unless the Hub is known to be out of reach."""
        if self.chosen_local(selected, repo, online) is not None:
            return True
        return repo is not None and online is not False

    def blocked_reason(
        self, selected: LocalModel | None, repo: str | None, online: bool | None
    ) -> str:
        """Why Next is off while a target is chosen, in words; empty otherwise."""
        if repo is None or self.complete(selected, repo, online):
            return ""
        return (
            f"{repo} is not on this computer, and the Hugging Face Hub cannot be reached to "
            "download it. Choose a model under “Models on this computer”, or click Retry "
            "when you are online."
        )


def choose_local_target(state: WizardState, local: LocalModel) -> None:
    """The target is a file on this computer: a different one forgets the draft chosen for
    the last, and the context size is capped at its trained length."""
    if local != state.target_local:
        state.draft = None
        state.draft_local = None
        state.draft_mtp = None
    state.target_local = local
    state.context_note = lower_context(state, local.facts.context_length)
    state.target_repo = None
    state.target_entry = None
    state.inspected = None
    state.target_group = None


def choose_hub_target(state: WizardState, repo: str | None, catalog: Catalog) -> bool:
    """The target is Hub repository ``repo``: a different one forgets what was read of the
    last. False when there is no repository to go on with."""
    if repo != state.target_repo:
        state.inspected = None
        state.target_group = None
        state.draft_mtp = None
    state.target_local = None
    state.target_repo = repo
    state.target_entry = catalog.by_repo(repo) if repo else None
    return repo is not None


# --- the target's quantization ------------------------------------------------------------


@dataclass(frozen=True)
class QuantRow:
    """One quantization of the target, with the memory it needs and how that fits."""

    group: QuantGroup
    estimate: PairEstimate
    fit: FitResult


def inspected_current(state: WizardState) -> bool:
    """Whether the repository read last is the chosen target (going Back and Next again
    reads nothing twice)."""
    return state.inspected is not None and state.inspected.repo_id == state.target_repo


def quant_rows(state: WizardState) -> list[QuantRow]:
    """The target repository's quantizations, each sized for the context and KV cache type
    chosen on the first page (with the MTP context for a target that drafts for itself)."""
    inspected, hardware = state.inspected, state.hardware
    assert inspected is not None and hardware is not None
    f = inspected.facts
    mtp = f.drafting.method == "mtp"
    rows = []
    for group in inspected.groups:
        est = estimate_pair(f, group.size, None, 0, state.n_ctx, state.kv_type, mtp=mtp)
        rows.append(QuantRow(group, est, assess(est, hardware)))
    return rows


def preselected_quant(state: WizardState, rows: Sequence[QuantRow]) -> str | None:
    """The quantization chosen before (after Back), else the catalog's when it fits, else the
    best that fits (``fit.best_fit``)."""
    preferred = state.target_entry.quant if state.target_entry else None
    previous = state.target_group.quant if state.target_group else None
    return previous or best_fit([(row.group.quant, row.fit) for row in rows], preferred)


def heads_text(inspected: RepoInspected) -> str:
    """The head files beside a repository's models, which are not offered as targets."""
    names = ", ".join(g.label for g in inspected.heads[:3])
    more = f" and {len(inspected.heads) - 3} more" if len(inspected.heads) > 3 else ""
    return (
        f"The repository also holds {len(inspected.heads)} drafting head file(s) ({names}"
        f"{more}): heads, not target files, so they are not listed here."
    )


def choose_quant(state: WizardState, group: QuantGroup) -> None:
    """The target's file: another one forgets the draft checked against the last."""
    if group != state.target_group:
        state.draft = None
    state.target_group = group


# --- the draft ----------------------------------------------------------------------------


def offer_own_heads(state: WizardState) -> bool:
    """Whether the target drafts for itself with next-token (MTP) layers. On the first visit
    for a target, its own heads become the choice (unless n-gram drafting was chosen)."""
    own = state.target_drafting
    can = own is not None and own.method == "mtp"
    if state.draft_mtp is None:
        state.draft_mtp = can and not state.draft_ngram
    return can


@dataclass(frozen=True)
class DraftRow:
    """One row of the draft table: its cells, whether it may be chosen, and what hovering
    over its first and last cell says."""

    texts: tuple[str, str, str, str, str]  # draft, quantization, size, why, compatibility
    compatible: bool
    tooltip: str  # the first cell's: the candidate's notes, or the file's path
    detail: str  # the raw mismatch, beside its explanation in words

    def cell_tooltip(self, column: int) -> str:
        text = self.texts[column]
        if column == 0:
            return self.tooltip
        return f"{text}\n({self.detail})" if column == 4 and self.detail else text


@dataclass
class DraftChoices:
    """The draft page's table: drafts the Hub offered (``options``) first, then models on
    this computer (``local``), one row each."""

    options: list[DraftOption] = field(default_factory=list)
    local: list[LocalModel] = field(default_factory=list)

    def add_checked(self, option: DraftOption) -> None:
        """A Hub candidate checked (they arrive one by one)."""
        self.options.append(option)

    def put_typed(self, option: DraftOption) -> None:
        """A repository the person typed goes first, replacing an earlier check of it."""
        typed = option.candidate.repo
        self.options = [o for o in self.options if o.candidate.repo != typed]
        self.options.insert(0, option)

    def set_local(self, models: Sequence[LocalModel]) -> None:
        """Models on this computer, less files without layers (a vocabulary-only GGUF)."""
        self.local = [m for m in models if m.facts.n_layer > 0]

    def local_row(self, path: str | None) -> int | None:
        """The row of the model on this computer at ``path``."""
        for index, model in enumerate(self.local):
            if path is not None and model.path == path:
                return len(self.options) + index
        return None

    def compatible(self, row: int) -> bool:
        if row < len(self.options):
            return self.options[row].compatible
        index = row - len(self.options)
        return 0 <= index < len(self.local) and self.local[index].mismatch is None

    def first_compatible(self) -> int | None:
        """The row to preselect: the first that may be chosen (the Hub's fastest sensible
        choice comes first)."""
        return next((row for row in range(self.row_count) if self.compatible(row)), None)

    @property
    def row_count(self) -> int:
        return len(self.options) + len(self.local)

    @property
    def compatible_count(self) -> int:
        return sum(o.compatible for o in self.options) + sum(m.mismatch is None for m in self.local)

    def rows(self) -> list[DraftRow]:
        rows: list[DraftRow] = []
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
            texts = (
                option.candidate.repo,
                group.quant if group else "–",
                gib(group.size) if group else "–",
                option.candidate.origin,
                verdict,
            )
            rows.append(
                DraftRow(texts, option.compatible, option.candidate.notes, option.mismatch or "")
            )
        for model in self.local:
            verdict = (
                "compatible"
                if model.mismatch is None
                else f"incompatible: {mismatch_in_words(model.mismatch)}"
            )
            texts = (
                model.name,
                model.facts.quantization,
                gib(model.size),
                "on this computer",
                verdict,
            )
            rows.append(DraftRow(texts, model.mismatch is None, model.path, model.mismatch or ""))
        return rows

    def quant_offer(self, row: int, chosen: DraftOption | None) -> tuple[list[QuantGroup], int]:
        """The quantizations a compatible Hub draft in ``row`` offers, fastest first, and the
        index of the one to show: the one chosen before for this candidate, else its own.
        Nothing for other rows."""
        if not (0 <= row < len(self.options) and self.options[row].compatible):
            return [], 0
        option = self.options[row]
        offered = option.groups or ((option.group,) if option.group is not None else ())
        groups = sorted(offered, key=lambda g: (draft_speed_rank(g.quant), g.size))
        group = option.group
        if chosen is not None and chosen.candidate == option.candidate:
            group = chosen.group
        return groups, next((i for i, g in enumerate(groups) if g == group), 0)

    def summary(self, self_drafting: bool, hub_message: str) -> tuple[str, bool]:
        """What the page says once the Hub has answered, and whether it is a warning."""
        good = self.compatible_count
        if good:
            text = f"{good} compatible draft(s), fastest sensible choice first."
            return text + (" " + hub_message if hub_message else ""), False
        if self_drafting:
            return (
                "No separate draft model was found; none is needed: the model drafts for "
                "itself. " + hub_message,
                False,
            )
        return (
            "No compatible draft model was found. "
            + hub_message
            + " Type a draft repository, browse to a file on this computer, or continue "
            "with n-gram drafting, which needs no draft model.",
            True,
        )

    def choose(
        self, state: WizardState, row: int, group: QuantGroup | None, *, ngram: bool, mtp: bool
    ) -> None:
        """Store the draft: n-gram drafting, the target's own heads, the Hub draft in
        ``row`` at quantization ``group`` (None: its own), or the model on this computer in
        ``row``."""
        state.draft, state.draft_local, state.draft_ngram = None, None, ngram
        state.draft_mtp = mtp
        if ngram or mtp:
            return
        if row < len(self.options):
            option = self.options[row]
            state.draft = replace(option, group=group or option.group)
        else:
            state.draft_local = self.local[row - len(self.options)]


# --- review, download and the saved pair --------------------------------------------------


def download_items(state: WizardState) -> tuple[DownloadItem, ...]:
    """What the chosen pair still needs from the Hub: the target unless it is on this
    computer, and a Hub draft model."""
    items = []
    if state.target_local is None:
        assert state.target_repo and state.target_group
        items.append(DownloadItem(state.target_repo, state.target_group))
    draft = state.draft
    if draft is not None and draft.group is not None and not state.no_draft_model:
        items.append(DownloadItem(draft.candidate.repo, draft.group))
    return tuple(items)


def still_to_download(root: Path, item: DownloadItem) -> int:
    """Bytes still to fetch for ``item``: complete files count 0, partial ones what is left."""
    missing = 0
    for f in item.group.files:
        final = root / item.repo_id.replace("/", "--") / f.path
        if final.is_file():
            continue
        part = final.with_name(final.name + ".part")
        have = part.stat().st_size if part.is_file() else 0
        missing += max(0, f.size - have)
    return missing


def draft_size_warning(state: WizardState) -> str:
    """A warning when the draft is too large a part of the target to pay for itself."""
    if state.draft_ngram or not state.draft_size or not state.target_size:
        return ""
    ratio = state.draft_size / state.target_size
    if ratio <= DRAFT_SIZE_WARNING:
        return ""
    return (
        f"Warning: the draft is {ratio:.0%} of the target's size "
        f"({gib(state.draft_size)} beside {gib(state.target_size)}). A draft "
        "costs about its size per token, so this one will likely make answers slower. "
        "Go Back and choose a smaller draft or quantization."
    )


def _repo_name(repo: str) -> str:
    return repo.rsplit("/", 1)[-1].removesuffix("-GGUF").removesuffix("-gguf")


def _local_name(model: LocalModel) -> str:
    return Path(model.path).stem


def default_pair_name(state: WizardState) -> str:
    """The name suggested for the pair: “target + draft”, short names of both."""
    target = (
        _local_name(state.target_local)
        if state.target_local is not None
        else _repo_name(state.target_repo or "")
    )
    if state.draft_ngram:
        return f"{target} + n-gram"
    if state.draft_mtp:
        return f"{target} + MTP"
    if state.draft_local is not None:
        return f"{target} + {_local_name(state.draft_local)}"
    assert state.draft is not None
    draft = _repo_name(state.draft.candidate.repo)
    if draft == target and state.draft.group is not None:
        draft = state.draft.group.quant
    return f"{target} + {draft}"


def pair_profile(state: WizardState) -> Profile:
    """The saved pair: the library's two models (or one, drafting without a draft model),
    the context, the KV cache type, and the calibration's longest draft and figures."""
    cal = None if state.no_draft_model else state.calibration
    assert state.target_model_id is not None
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
    return Profile(
        name=state.profile_name,
        target=state.target_model_id,
        draft=None if state.no_draft_model else state.draft_model_id,
        n_ctx=state.n_ctx,
        kv_type=state.kv_type,
        draft_max=draft_max,
        calibration=calibration,
        draft_source="mtp" if state.draft_mtp else "ngram" if state.draft_ngram else "model",
    )


def activates(state: WizardState) -> bool:
    """Whether the saved pair becomes the active one: when the person kept it so, and always
    for a pair without a draft model, which skips the calibration."""
    return state.activate or state.no_draft_model
