"""What the wizard's jobs answer: typed replies, the values in them, and ``HubFailure``.

Qt-free, so the wizard's selection model (``app.ui.wizard.pair_selection``) and the tests can
use them without a display. The jobs themselves are in ``app.workers.hub_jobs`` and
``app.workers.calibration``. Each reply is a frozen dataclass tagged with the id of the
request it answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.engine.llama.hardware import Hardware
from app.gguf.compat import VocabInfo
from app.gguf.facts import ModelFacts
from app.models.catalog import DraftCandidate
from app.models.downloads import DownloadProgress
from app.models.hub import ModelHit, QuantGroup
from app.store.settings import Settings

# Two draft lengths whose speeds differ by less than this are a toss-up on one run each.
DRAFT_LENGTH_SURE_MARGIN = 0.10
# The longest draft a saved pair allows when the calibration could not tell the lengths
# apart: the chat's own default, under which adaptive drafting settles the length.
ADAPTIVE_DRAFT_MAX = Settings().draft_max


@dataclass(frozen=True)
class DownloadItem:
    repo_id: str
    group: QuantGroup


# --- replies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HardwareFound:
    request_id: int
    hardware: Hardware


@dataclass(frozen=True)
class TokenSaved:
    request_id: int


@dataclass(frozen=True)
class HubProbed:
    request_id: int
    online: bool
    reason: str  # why it is offline; empty when online
    elapsed_s: float


@dataclass(frozen=True)
class LocalModel:
    """A GGUF on this computer, read from its header."""

    path: str
    parts: tuple[str, ...]
    size: int
    facts: ModelFacts
    vocab: VocabInfo = field(repr=False, compare=False)
    in_library: bool = False
    mismatch: str | None = None  # against ScanLocal.target_vocab; None: compatible or unchecked
    in_cache: bool = False  # in SpecDeck's model cache (the demo pair and what it is made of)

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass(frozen=True)
class LocalScanned:
    request_id: int
    models: tuple[LocalModel, ...]
    unreadable: tuple[tuple[str, str], ...]  # (path, why) for files that are not usable


@dataclass(frozen=True)
class SearchResults:
    request_id: int
    query: str
    hits: tuple[ModelHit, ...]


@dataclass(frozen=True)
class RepoInspected:
    request_id: int
    repo_id: str
    groups: tuple[QuantGroup, ...]
    facts: ModelFacts
    vocab: VocabInfo
    heads: tuple[QuantGroup, ...] = ()  # head files beside the model (``hub.is_head_file``)


@dataclass(frozen=True)
class DraftOption:
    candidate: DraftCandidate
    group: QuantGroup | None
    facts: ModelFacts | None
    mismatch: str | None  # None: compatible
    error: str | None = None  # the candidate could not be checked
    groups: tuple[QuantGroup, ...] = ()  # every quantization the person may choose instead

    @property
    def compatible(self) -> bool:
        return self.group is not None and self.mismatch is None and self.error is None


@dataclass(frozen=True)
class DraftChecked:
    """One candidate checked (sent as each finishes, so the page fills progressively)."""

    request_id: int
    option: DraftOption


@dataclass(frozen=True)
class DraftsDone:
    request_id: int
    options: tuple[DraftOption, ...]


@dataclass(frozen=True)
class DownloadProgressed:
    request_id: int
    item: int  # index into Download.items
    progress: DownloadProgress


@dataclass(frozen=True)
class Downloaded:
    request_id: int
    paths: tuple[tuple[str, ...], ...]  # per item, all parts


@dataclass(frozen=True)
class CalibrationStep:
    """Progress of a calibration: step ``index`` of ``total`` has started."""

    request_id: int
    index: int
    total: int
    text: str


@dataclass(frozen=True)
class Calibrated:
    request_id: int
    acceptance: float
    spec_tok_s: float
    base_tok_s: float
    speedup: float
    draft_max: int
    load_s: float
    trials: tuple[tuple[int, float], ...] = ()  # (draft length, tok/s) of each trial
    noise: float = 0.0  # how much two runs of the target alone differed (0.05: 5 %)

    @property
    def slower(self) -> bool:
        return self.speedup < 1.0

    @property
    def length_margin(self) -> float:
        """How much faster the chosen draft length ran than the runner-up (0.08: 8 %)."""
        speeds = sorted((s for _n, s in self.trials), reverse=True)
        if len(speeds) < 2 or speeds[0] <= 0:
            return 1.0
        return (speeds[0] - speeds[1]) / speeds[0]

    @property
    def length_sure(self) -> bool:
        """Whether the chosen length beat the other by more than the run-to-run noise."""
        return self.length_margin >= max(DRAFT_LENGTH_SURE_MARGIN, 2 * self.noise)

    @property
    def saved_draft_max(self) -> int:
        """The longest draft the saved pair allows (adaptive drafting stops earlier when the
        draft is unsure): the measured length when it clearly won; else the chat's default,
        so that adaptive drafting settles the length while you chat."""
        return self.draft_max if self.length_sure else max(ADAPTIVE_DRAFT_MAX, self.draft_max)


@dataclass(frozen=True)
class HubFailure:
    request_id: int
    message: str
    cancelled: bool = False
    detail: str = ""
    unreachable: bool = False  # the Hub could not be reached at all (offline)
    corrupt: bool = False  # a download failed its sha256 check
