"""The curated catalog of draft/target pairs and the ranking of draft candidates."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.llama.hardware import Hardware
from app.models.fit import MARGIN_FIXED, FitLabel, gib

CATALOG_ENV = "SPECDECK_CATALOG"
# A draft around 1/15 of the target's size is the usual sweet spot: much cheaper to run,
# yet similar enough to agree often. Candidates are ranked by distance from that ratio.
IDEAL_DRAFT_RATIO = 1 / 15
MAX_DRAFT_RATIO = 0.35
_SIZE_RE = re.compile(r"[-_ ](\d+(?:\.\d+)?)\s*([BM])(?=$|[-_ ])", re.IGNORECASE)


class CatalogError(ValueError):
    pass


# How a catalog entry drafts, in the words the wizard shows.
DRAFTING_WORDS = {
    "": "plain model",
    "mtp": "drafts for itself (MTP)",
    "assistant": "assistant draft",
    "dflash": "DFlash block drafter",
    "dspark": "DSpark block drafter",
}
# Heads that read their target's hidden states: each drafts only for the targets it is
# paired with, never for a model that merely shares its family.
PAIRED_ONLY = frozenset({"assistant", "dflash", "dspark"})


@dataclass(frozen=True)
class CatalogFile:
    """A file of a catalog entry's repository, as read from a public page."""

    name: str  # the path inside the repository
    size: int | None = None  # bytes; None where the page gave none exactly


@dataclass(frozen=True)
class CatalogModel:
    id: str
    repo: str
    family: str
    params_b: float
    quant: str
    notes: str = ""
    draft_only: bool = False
    # Where the repo and its file names were confirmed (a URL or a search reference) and when.
    confirmed: str | None = None
    # How it drafts: "mtp" (for itself, with its next-token layers), "assistant" (a head that
    # drafts for its pair's target), "dflash" / "dspark" (a block drafter beside its pair's
    # target: DFlash and DFlash2 heads, DSpark heads) or "" (a plain model).
    drafting: str = ""
    files: tuple[CatalogFile, ...] = ()  # the curated file first; () where none were read
    # When ``check-pair`` last confirmed a self-drafting entry against the real Hub; None:
    # unchecked (a pair's own check is ``CatalogPair.checked``).
    checked: str | None = None

    def __post_init__(self) -> None:
        if self.drafting not in DRAFTING_WORDS:
            kinds = ", ".join(repr(k) for k in DRAFTING_WORDS)
            raise CatalogError(
                f"catalog model {self.id!r}: drafting {self.drafting!r} is none of {kinds}"
            )
        if self.drafting in PAIRED_ONLY and not self.draft_only:
            raise CatalogError(
                f"catalog model {self.id!r} ({self.method}) drafts for a target and cannot "
                "be one: draft_only must be true"
            )

    @property
    def file(self) -> str | None:
        return self.files[0].name if self.files else None

    @property
    def method(self) -> str:
        """How it drafts, in words: "DFlash block drafter", "drafts for itself (MTP)"."""
        return DRAFTING_WORDS[self.drafting]


@dataclass(frozen=True)
class CatalogPair:
    target: str
    draft: str
    checked: str | None = None


@dataclass(frozen=True)
class DraftCandidate:
    repo: str
    quant: str | None  # recommended quantization, when known
    params_b: float | None
    source: str  # "catalog pair" or "same family"
    notes: str = ""
    file: str | None = None  # the file to use, when the catalog names one
    method: str = ""  # how a catalog pair's draft drafts, when not as a plain model

    @property
    def origin(self) -> str:
        """Where it came from and, for a head, how it drafts: "catalog pair · DFlash block
        drafter"."""
        return f"{self.source} · {self.method}" if self.method else self.source


def default_catalog_path() -> Path:
    override = os.environ.get(CATALOG_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "resources" / "catalog.json"


@dataclass(frozen=True)
class Catalog:
    models: tuple[CatalogModel, ...]
    pairs: tuple[CatalogPair, ...]
    _by_id: dict[str, CatalogModel] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_id.update({m.id: m for m in self.models})
        for pair in self.pairs:
            for model_id in (pair.target, pair.draft):
                if model_id not in self._by_id:
                    raise CatalogError(f"catalog pair names unknown model {model_id!r}")

    @classmethod
    def load(cls, path: Path | None = None) -> Catalog:
        path = path or default_catalog_path()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            models = tuple(_model(m) for m in data["models"])
            pairs = tuple(CatalogPair(**p) for p in data["pairs"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CatalogError(f"cannot read the model catalog {path}: {exc}") from exc
        return cls(models, pairs)

    def model(self, model_id: str) -> CatalogModel:
        return self._by_id[model_id]

    def checked(self, target: CatalogModel) -> str | None:
        """When ``target`` was last confirmed against the real Hub with ``check-pair``: as a
        self-drafting model, or in its pairs (the latest of them); None: unchecked."""
        dates = [p.checked for p in self.pairs if p.target == target.id and p.checked]
        if target.drafting == "mtp" and target.checked:
            dates.append(target.checked)
        return max(dates, default=None)

    def drafting_words(self, target: CatalogModel) -> str:
        """How ``target`` can be drafted for beyond a plain draft model, in words: "drafts
        for itself (MTP) · DFlash block drafter in the catalog"; "" for none."""
        drafts = [self.model(p.draft) for p in self.pairs if p.target == target.id]
        words = [target.method] if target.drafting == "mtp" else []
        words += sorted({f"{d.method} in the catalog" for d in drafts if d.drafting})
        return " · ".join(words)

    def by_repo(self, repo: str) -> CatalogModel | None:
        return next((m for m in self.models if m.repo.lower() == repo.lower()), None)

    def targets(self) -> list[CatalogModel]:
        """Targets of the curated pairs and models that draft for themselves, smallest first:
        the pair most likely to run well."""
        paired = {p.target for p in self.pairs}
        return sorted(
            (m for m in self.models if m.id in paired or m.drafting == "mtp"),
            key=lambda m: m.params_b,
        )

    def targets_for(self, hardware: Hardware | None) -> list[tuple[CatalogModel, FitGuess | None]]:
        """Targets with a rough memory fit on ``hardware`` (from parameters and bits per
        weight; the quantization page measures the real files): those that fit first,
        smallest first."""
        rows = [
            (m, guess_fit(m, hardware) if hardware is not None else None) for m in self.targets()
        ]
        order = {FitLabel.FITS: 0, FitLabel.TIGHT: 1, FitLabel.NO_FIT: 2}
        return sorted(rows, key=lambda r: (order[r[1].label] if r[1] else 0, r[0].params_b))

    def draft_candidates(
        self, target_repo: str, hub_repos: Iterable[str] = ()
    ) -> list[DraftCandidate]:
        """Drafts worth checking for ``target_repo``: catalog pairs first, then smaller
        models of the same family (from the catalog and from ``hub_repos``), best first."""
        target = self.by_repo(target_repo)
        family, size = (target.family, target.params_b) if target else parse_family(target_repo)
        found: list[DraftCandidate] = []
        if target is not None:
            for pair in self.pairs:
                if pair.target == target.id:
                    d = self.model(pair.draft)
                    found.append(
                        DraftCandidate(
                            d.repo,
                            d.quant,
                            d.params_b,
                            "catalog pair",
                            d.notes,
                            file=d.file,
                            method=d.method if d.drafting else "",
                        )
                    )
        same_family: list[DraftCandidate] = []
        for m in self.models:
            # a head drafts only for the targets it is paired with
            if m.family == family and m.repo != target_repo and m.drafting not in PAIRED_ONLY:
                same_family.append(
                    DraftCandidate(m.repo, m.quant, m.params_b, "same family", m.notes)
                )
        for repo in hub_repos:
            hub_family, hub_size = parse_family(repo)
            if hub_family and hub_family == family and repo.lower() != target_repo.lower():
                same_family.append(DraftCandidate(repo, None, hub_size, "same family"))
        same_family = [c for c in same_family if _small_enough(c.params_b, size)]
        same_family.sort(key=lambda c: _ratio_distance(c.params_b, size))
        seen = {c.repo.lower() for c in found}
        for c in same_family:
            if c.repo.lower() not in seen:
                seen.add(c.repo.lower())
                found.append(c)
        return found


def _model(raw: dict) -> CatalogModel:
    fields = dict(raw)
    fields["files"] = tuple(CatalogFile(**f) for f in fields.get("files", ()))
    return CatalogModel(**fields)


# Bits per weight of common quantizations, for a size guess before any file is listed.
BITS_PER_WEIGHT = {
    "IQ4_XS": 4.25,
    "Q4_K_XL": 4.9,  # unsloth's dynamic Q4_K_XL: about a Q4_K_M (the quantization page measures)
    "Q8_0": 8.5,
    "Q6_K": 6.6,
    "Q5_K_M": 5.7,
    "Q4_K_M": 4.9,
    "Q4_0": 4.5,
    "Q4_1": 5.0,
    "Q3_K_M": 3.9,
    "Q2_K": 3.0,
    "F16": 16.0,
    "BF16": 16.0,
    "F32": 32.0,
}


@dataclass(frozen=True)
class FitGuess:
    label: FitLabel
    needed: int  # bytes, weights and a working margin
    message: str


def guess_fit(model: CatalogModel, hardware: Hardware) -> FitGuess:
    bits = BITS_PER_WEIGHT.get(model.quant.upper(), 8.5)
    weights = int(model.params_b * 1e9 * bits / 8)
    needed = int(weights * 1.15) + MARGIN_FIXED  # KV cache and compute at a few k tokens
    pool = hardware.gpu_free if hardware.uses_gpu else hardware.ram_free
    label = (
        FitLabel.FITS
        if needed * 1.1 <= pool
        else FitLabel.TIGHT
        if needed <= pool
        else FitLabel.NO_FIT
    )
    return FitGuess(label, needed, f"about {gib(needed)} at {model.quant}, {gib(pool)} free")


def parse_family(repo: str) -> tuple[str, float | None]:
    """Guess (family, billions of parameters) from a repo name like Qwen2.5-7B-Instruct-GGUF."""
    name = repo.rsplit("/", 1)[-1]
    name = re.sub(r"[-_]gguf$", "", name, flags=re.IGNORECASE)
    name = re.sub(r"^(google|meta|qwen|huggingfacetb)[-_]", "", name, flags=re.IGNORECASE)
    match = _SIZE_RE.search(name)
    if match is None:
        return name.lower(), None
    value = float(match.group(1)) / (1000 if match.group(2).upper() == "M" else 1)
    family = name[: match.start()].lower().replace("meta-", "")
    family = re.sub(r"[-_]coder$", "", family)  # coder and chat share a vocabulary
    return family, value


def _small_enough(draft_b: float | None, target_b: float | None) -> bool:
    if draft_b is None or target_b is None:
        return draft_b is None and target_b is None
    return draft_b <= target_b * MAX_DRAFT_RATIO


def _ratio_distance(draft_b: float | None, target_b: float | None) -> float:
    if not draft_b or not target_b:
        return math.inf
    return abs(math.log(draft_b / target_b) - math.log(IDEAL_DRAFT_RATIO))
