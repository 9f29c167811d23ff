"""The pair wizard's Hub and download jobs: each request is a typed job that does its own work.

Qt-free. Each job runs on the Hub worker thread (``app.workers.hub_worker.HubClient``) against
a ``HubSession``, the connection the wizard was opened with, and returns its own reply
(``app.workers.hub_messages``). Jobs that wait on the network are ``Stoppable``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.llama.hardware import detect_hardware
from app.gguf.compat import VocabInfo, first_mismatch
from app.gguf.facts import model_facts, vocab_info
from app.gguf.reader import GGUFFormatError, GGUFHeader, read_local_header
from app.models.catalog import Catalog, DraftCandidate, parse_family
from app.models.downloads import Downloader, DownloadProgress, save_token
from app.models.fit import draft_speed_rank
from app.models.hub import (
    HubError,
    QuantGroup,
    Token,
    is_head_file,
    list_gguf_files,
    read_remote_header,
    search_models,
    split_heads,
)
from app.models.hub_http import DEFAULT_HEADER_DEADLINE_S, TransferCancelled, TransferLimits
from app.models.library import split_parts
from app.models.split_names import split_name
from app.workers.hub_messages import (
    Downloaded,
    DownloadItem,
    DownloadProgressed,
    DraftChecked,
    DraftOption,
    DraftsDone,
    HardwareFound,
    HubProbed,
    LocalModel,
    LocalScanned,
    RepoInspected,
    SearchResults,
    TokenSaved,
)
from app.workers.jobs import Stoppable, is_unreachable

MAX_DRAFT_CANDIDATES = 6
# Offline must be known within 3 s: one small request, cut at this deadline.
PROBE_DEADLINE_S = 2.5
MAX_LOCAL_FILES = 200  # GGUF files read from the models folder and the library
# A smaller quantization of the target itself drafts only when it is at most this fraction
# of the target's file: a draft must be much cheaper than the model it drafts for.
SAME_MODEL_DRAFT_RATIO = 0.5

NoProgress = Callable[[object], None]


@dataclass
class HubSession:
    """Where the wizard's Hub jobs go and where downloads land. ``token`` is ``None`` once a
    token has been saved: from then on the stored one is used."""

    models_root: Path
    endpoint: str | None = None
    token: Token = None
    offline: bool = False
    model_cache: Path | None = None  # its top level only: below it are build trees

    def vocab(self, repo_id: str, path: str, limits: TransferLimits) -> VocabInfo:
        """The vocabulary of a file on the Hub, read from its header."""
        return vocab_info(self.read_header(repo_id, path, limits))

    def read_header(self, repo_id: str, path: str, limits: TransferLimits) -> GGUFHeader:
        return read_remote_header(
            repo_id, path, endpoint=self.endpoint, token=self.token, limits=limits
        )

    def list_groups(self, repo_id: str, limits: TransferLimits) -> list[QuantGroup]:
        return list_gguf_files(repo_id, endpoint=self.endpoint, token=self.token, limits=limits)


def header_limits(cancel: threading.Event) -> TransferLimits:
    """One header's deadline, stopped by ``cancel``."""
    return TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=cancel)


# --- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DetectHardware:
    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> HardwareFound:
        return HardwareFound(request_id, detect_hardware())


@dataclass(frozen=True)
class SaveToken:
    token: str

    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> TokenSaved:
        save_token(self.token)
        hub.token = None  # from now on the stored token is used
        return TokenSaved(request_id)


@dataclass(frozen=True)
class ProbeHub:
    """Is the Hub reachable? Answered within ``PROBE_DEADLINE_S``."""

    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> HubProbed:
        began = time.monotonic()
        if hub.offline:
            return HubProbed(request_id, False, "offline mode is on", 0.0)
        limits = TransferLimits(stall_timeout_s=PROBE_DEADLINE_S, deadline_s=PROBE_DEADLINE_S)
        try:
            search_models("", limit=1, endpoint=hub.endpoint, token=hub.token, limits=limits)
        except HubError as exc:
            if is_unreachable(exc):
                return HubProbed(request_id, False, _probe_reason(exc), time.monotonic() - began)
        # Any answer, even an error status, means the Hub is reachable.
        return HubProbed(request_id, True, "", time.monotonic() - began)


@dataclass(frozen=True)
class Search(Stoppable):
    query: str

    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> SearchResults:
        hits = search_models(
            self.query, endpoint=hub.endpoint, token=hub.token, limits=header_limits(self.cancel)
        )
        return SearchResults(request_id, self.query, tuple(hits))


@dataclass(frozen=True)
class ScanLocal:
    """GGUF models on this computer: the library's, the models folder's and the model
    cache's (the demo pair), plus ``extra`` files the person browsed to; each read from its
    header and checked against ``target_vocab`` when given."""

    library_paths: tuple[str, ...]
    extra: tuple[str, ...] = ()
    target_path: str | None = None
    target_vocab: VocabInfo | None = field(default=None, compare=False)

    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> LocalScanned:
        library = {str(Path(p).resolve()) for p in self.library_paths}
        cached = local_gguf_files(hub.model_cache, recursive=False) if hub.model_cache else []
        cache = {str(p.resolve()) for p in cached}
        paths: dict[str, Path] = {}
        for raw in (
            *self.extra,
            *self.library_paths,
            *map(str, local_gguf_files(hub.models_root)),
            *map(str, cached),
        ):
            path = Path(raw)
            key = str(path.resolve())
            if key not in paths and len(paths) < MAX_LOCAL_FILES:
                paths[key] = path
        models, unreadable = [], []
        for key, path in paths.items():
            if self.target_path and key == str(Path(self.target_path).resolve()):
                continue
            try:
                models.append(
                    read_local_model(
                        path,
                        self.target_vocab,
                        in_library=key in library,
                        in_cache=key in cache and key not in library,
                    )
                )
            except (GGUFFormatError, OSError) as exc:
                # the path is said once, beside the reason
                unreadable.append((str(path), str(exc).removeprefix(f"{path}: ")))
        models.sort(key=lambda m: (m.mismatch is not None, m.size))
        return LocalScanned(request_id, tuple(models), tuple(unreadable))


@dataclass(frozen=True)
class CheckDraftRepo(Stoppable):
    """A draft repository the person typed, checked against the target's vocabulary."""

    repo_id: str
    target_repo: str
    target_file: str

    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> DraftChecked:
        limits = header_limits(self.cancel)
        target = hub.vocab(self.target_repo, self.target_file, limits)
        _family, size = parse_family(self.repo_id)
        candidate = DraftCandidate(self.repo_id, None, size, "typed by you")
        option = check_draft(hub, candidate, target, limits)
        if option.error is not None:
            raise HubError(f"{self.repo_id}: {option.error}")
        return DraftChecked(request_id, option)


@dataclass(frozen=True)
class InspectRepo(Stoppable):
    """List a repo's GGUF models and read one header for the model facts."""

    repo_id: str

    def run(self, hub: HubSession, request_id: int, report: NoProgress) -> RepoInspected:
        limits = header_limits(self.cancel)
        listed = hub.list_groups(self.repo_id, limits)
        if not listed:
            raise HubError(f"{self.repo_id} has no GGUF model files; choose a GGUF repository")
        groups, heads = split_heads(listed)  # a head file beside the model is no target quant
        header = hub.read_header(self.repo_id, groups[0].first.path, limits)
        return RepoInspected(
            request_id,
            self.repo_id,
            tuple(groups),
            model_facts(header),
            vocab_info(header),
            tuple(heads),
        )


@dataclass(frozen=True)
class FindDrafts(Stoppable):
    """Draft candidates for the target, each checked against its vocabulary; each is
    reported as it is checked, so the page fills progressively."""

    target_repo: str
    target_file: str
    catalog: Catalog

    def run(
        self, hub: HubSession, request_id: int, report: Callable[[DraftChecked], None]
    ) -> DraftsDone:
        target = hub.vocab(self.target_repo, self.target_file, header_limits(self.cancel))
        family, _ = parse_family(self.target_repo)
        try:
            hub_repos = [
                h.repo_id
                for h in search_models(family, limit=40, endpoint=hub.endpoint, token=hub.token)
            ]
        except HubError:
            hub_repos = []  # the catalog alone still gives candidates
        candidates = self.catalog.draft_candidates(self.target_repo, hub_repos)
        options = []
        # one deadline per header, one cancel for all
        for candidate in candidates[:MAX_DRAFT_CANDIDATES]:
            option = check_draft(hub, candidate, target, header_limits(self.cancel))
            options.append(option)
            report(DraftChecked(request_id, option))
        same = self._same_model_draft(hub, header_limits(self.cancel))
        if same is not None:
            options.append(same)
            report(DraftChecked(request_id, same))
        options.sort(key=lambda o: not o.compatible)  # stable: keeps the ranking otherwise
        return DraftsDone(request_id, tuple(options))

    def _same_model_draft(self, hub: HubSession, limits: TransferLimits) -> DraftOption | None:
        """A much smaller quantization of the target itself: the same vocabulary by
        construction, so it always drafts (the demo pair is F32 drafted by Q2_K)."""
        groups = hub.list_groups(self.target_repo, limits)
        target = next((g for g in groups if g.first.path == self.target_file), None)
        if target is None:
            return None
        smaller = tuple(
            g
            for g in split_heads(groups)[0]
            if g.size <= target.size * SAME_MODEL_DRAFT_RATIO and g != target
        )
        group = choose_draft_group(smaller)
        if group is None:
            return None
        header = hub.read_header(self.target_repo, group.first.path, limits)
        _family, size = parse_family(self.target_repo)
        candidate = DraftCandidate(
            self.target_repo,
            group.quant,
            size,
            "same model, smaller quantization",
            "The target's own weights at fewer bits: it agrees with "
            "the target very often, but costs more per token than a "
            "smaller model.",
        )
        return DraftOption(candidate, group, model_facts(header), None, groups=smaller)


@dataclass(frozen=True)
class Download(Stoppable):
    items: tuple[DownloadItem, ...]

    def run(
        self, hub: HubSession, request_id: int, report: Callable[[DownloadProgressed], None]
    ) -> Downloaded:
        downloader = Downloader(
            hub.models_root, endpoint=hub.endpoint, token=hub.token, offline=hub.offline
        )
        paths = []
        for index, item in enumerate(self.items):

            def progressed(progress: DownloadProgress, index: int = index) -> None:
                report(DownloadProgressed(request_id, index, progress))

            got = downloader.download_files(
                item.repo_id, list(item.group.files), cancel=self.cancel, on_progress=progressed
            )
            paths.append(tuple(str(p) for p in got))
        return Downloaded(request_id, tuple(paths))


# --- what the jobs share ------------------------------------------------------------------


def choose_draft_group(
    groups: Sequence[QuantGroup], preferred: str | None = None
) -> QuantGroup | None:
    """A draft is there to be fast: the smallest sensible quantization (4 bits and up, see
    ``fit.draft_speed_rank``), unless the catalog recommends one that is no larger."""
    if not groups:
        return None
    best = min(groups, key=lambda g: (draft_speed_rank(g.quant), g.size))
    if preferred:
        for group in groups:
            if group.quant.upper() == preferred.upper() and group.size <= best.size:
                return group
    return best


def check_draft(
    hub: HubSession, candidate: DraftCandidate, target: VocabInfo, limits: TransferLimits
) -> DraftOption:
    """One candidate checked against the target's vocabulary; a candidate that cannot be
    read is an option with its error, not a failure of the whole search."""
    try:
        groups = hub.list_groups(candidate.repo, limits)
        named = [g for g in groups if any(f.path == candidate.file for f in g.files)]
        if candidate.file is not None and not named:
            return DraftOption(candidate, None, None, None, f"no file {candidate.file}")
        # the catalog's file when it names one (a repository may hold a target too)
        group = named[0] if named else choose_draft_group(groups, candidate.quant)
        if group is None:
            return DraftOption(candidate, None, None, None, "no GGUF files")
        header = hub.read_header(candidate.repo, group.first.path, limits)
        if named and is_head_file(named[0].first.path):  # offer its sibling heads only
            groups = [g for g in groups if is_head_file(g.first.path)]
        return DraftOption(
            candidate,
            group,
            model_facts(header),
            first_mismatch(target, vocab_info(header)),
            groups=tuple(groups),
        )
    except TransferCancelled:
        raise
    except (HubError, GGUFFormatError) as exc:
        return DraftOption(candidate, None, None, None, str(exc))


def local_gguf_files(
    folder: Path, limit: int = MAX_LOCAL_FILES, *, recursive: bool = True
) -> list[Path]:
    """Complete GGUF models in ``folder`` or under it (first parts only; partial downloads
    left out)."""
    found: list[Path] = []
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*.gguf") if recursive else folder.glob("*.gguf")):
        if len(found) >= limit:
            break
        split = split_name(path.name)
        if split is not None and split.index != 1:
            continue
        if path.is_file() and not path.is_symlink():
            found.append(path)
    return found


def read_local_model(
    path: Path,
    target_vocab: VocabInfo | None = None,
    *,
    in_library: bool = False,
    in_cache: bool = False,
) -> LocalModel:
    """A local GGUF's facts; raises ``GGUFFormatError`` or ``OSError`` when unusable."""
    parts = split_parts(path)
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise GGUFFormatError(f"a split model; missing {', '.join(missing)}")
    header = read_local_header(path)
    vocab = vocab_info(header)
    mismatch = first_mismatch(target_vocab, vocab) if target_vocab is not None else None
    return LocalModel(
        str(path),
        tuple(str(p) for p in parts),
        sum(p.stat().st_size for p in parts),
        model_facts(header),
        vocab,
        in_library,
        mismatch,
        in_cache,
    )


def _probe_reason(exc: BaseException) -> str:
    text = str(exc)
    if "cannot reach" in text or "Connect" in text or "refused" in text.lower():
        return "the connection was refused or the network is down"
    if "did not deliver" in text or "stalled" in text:
        return f"it did not answer within {PROBE_DEADLINE_S:g} s"
    return text
