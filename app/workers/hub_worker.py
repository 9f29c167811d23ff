"""Hub, download and calibration jobs for the pair wizard, off the UI thread.

``HubWorker`` is one QObject moved to a QThread. The UI submits frozen request dataclasses
through ``HubClient.submit`` (a queued signal) and gets frozen reply dataclasses back through
``Signal(object)``, tagged with the request id so stale replies can be ignored. Every
exception becomes a ``HubFailure`` with a message a person can act on. Long jobs poll a
``threading.Event`` to stop early; the thread is asked to quit and joined, never terminated.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.errors import GenerationCancelled
from app.models.catalog import Catalog, DraftCandidate, parse_family
from app.models.compat import VocabInfo, first_mismatch
from app.models.downloads import DownloadCancelled, Downloader, DownloadProgress, save_token
from app.models.fit import quality_rank
from app.models.gguf_header import GGUFFormatError, ModelFacts, model_facts, vocab_info
from app.models.hardware import Hardware, detect_hardware
from app.models.hub import (
    HubError,
    ModelHit,
    QuantGroup,
    Token,
    list_gguf_files,
    read_remote_header,
    search_models,
)
from app.models.hub_http import DEFAULT_HEADER_DEADLINE_S, TransferCancelled, TransferLimits

CALIBRATION_PROMPT = (
    "Write a Python function that returns the n-th Fibonacci number, "
    "then explain in two sentences how it works."
)
CALIBRATION_TOKENS = 64
CALIBRATION_DRAFT_LENGTHS = (4, 8)
MAX_DRAFT_CANDIDATES = 6

# --- requests -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DetectHardware:
    pass


@dataclass(frozen=True)
class SaveToken:
    token: str


@dataclass(frozen=True)
class Search:
    query: str


@dataclass(frozen=True)
class InspectRepo:
    """List a repo's GGUF models and read one header for the model facts."""

    repo_id: str
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True)
class FindDrafts:
    target_repo: str
    target_file: str
    catalog: Catalog
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True)
class DownloadItem:
    repo_id: str
    group: QuantGroup


@dataclass(frozen=True)
class Download:
    items: tuple[DownloadItem, ...]
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True)
class Calibrate:
    target_path: str
    draft_path: str
    n_ctx: int
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


# --- replies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HardwareFound:
    request_id: int
    hardware: Hardware


@dataclass(frozen=True)
class TokenSaved:
    request_id: int


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


@dataclass(frozen=True)
class DraftOption:
    candidate: DraftCandidate
    group: QuantGroup | None
    facts: ModelFacts | None
    mismatch: str | None  # None: compatible
    error: str | None = None  # the candidate could not be checked

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
class Calibrated:
    request_id: int
    acceptance: float
    spec_tok_s: float
    base_tok_s: float
    speedup: float
    draft_max: int
    load_s: float


@dataclass(frozen=True)
class HubFailure:
    request_id: int
    message: str
    cancelled: bool = False
    detail: str = ""


def choose_draft_group(groups: list[QuantGroup], preferred: str | None) -> QuantGroup | None:
    """A draft is small, so prefer its recommended or best quantization over the smallest."""
    if not groups:
        return None
    if preferred:
        for group in groups:
            if group.quant.upper() == preferred.upper():
                return group
    return min(groups, key=lambda g: quality_rank(g.quant))


class HubWorker(QObject):
    result = Signal(object)
    progress = Signal(object)
    failed = Signal(object)

    def __init__(self, models_root: Path, *, endpoint: str | None = None,
                 token: Token = None, offline: bool = False) -> None:
        super().__init__()
        self.models_root = models_root
        self.endpoint = endpoint
        self.token = token
        self.offline = offline

    @Slot(int, object)
    def handle(self, request_id: int, request: object) -> None:
        try:
            reply = self._dispatch(request_id, request)
        except (DownloadCancelled, TransferCancelled) as exc:
            self.failed.emit(HubFailure(request_id, str(exc), cancelled=True))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message
            self.failed.emit(HubFailure(request_id, _message(exc), detail=traceback.format_exc()))
        else:
            if reply is not None:
                self.result.emit(reply)

    def _dispatch(self, rid: int, request: object) -> object:
        if isinstance(request, DetectHardware):
            return HardwareFound(rid, detect_hardware())
        if isinstance(request, SaveToken):
            save_token(request.token)
            self.token = None  # from now on the stored token is used
            return TokenSaved(rid)
        if isinstance(request, Search):
            hits = search_models(request.query, endpoint=self.endpoint, token=self.token)
            return SearchResults(rid, request.query, tuple(hits))
        if isinstance(request, InspectRepo):
            return self._inspect(rid, request.repo_id, TransferLimits(
                deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=request.cancel))
        if isinstance(request, FindDrafts):
            return self._find_drafts(rid, request)
        if isinstance(request, Download):
            return self._download(rid, request)
        if isinstance(request, Calibrate):
            return self._calibrate(rid, request)
        raise TypeError(f"unknown request {type(request).__name__}")

    def _inspect(self, rid: int, repo_id: str, limits: TransferLimits) -> RepoInspected:
        groups = list_gguf_files(repo_id, endpoint=self.endpoint, token=self.token,
                                 limits=limits)
        if not groups:
            raise HubError(f"{repo_id} has no GGUF model files; choose a GGUF repository")
        header = read_remote_header(repo_id, groups[0].first.path, endpoint=self.endpoint,
                                    token=self.token, limits=limits)
        return RepoInspected(rid, repo_id, tuple(groups), model_facts(header), vocab_info(header))

    def _find_drafts(self, rid: int, request: FindDrafts) -> DraftsDone:
        def limits() -> TransferLimits:  # one deadline per header, one cancel for all
            return TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=request.cancel)

        target = vocab_info(read_remote_header(request.target_repo, request.target_file,
                                               endpoint=self.endpoint, token=self.token,
                                               limits=limits()))
        family, _ = parse_family(request.target_repo)
        try:
            hub_repos = [h.repo_id for h in search_models(family, limit=40,
                                                          endpoint=self.endpoint,
                                                          token=self.token)]
        except HubError:
            hub_repos = []  # the catalog alone still gives candidates
        candidates = request.catalog.draft_candidates(request.target_repo, hub_repos)
        options = []
        for candidate in candidates[:MAX_DRAFT_CANDIDATES]:
            option = self._check_draft(candidate, target, limits())
            options.append(option)
            self.progress.emit(DraftChecked(rid, option))
        options.sort(key=lambda o: not o.compatible)  # stable: keeps the ranking otherwise
        return DraftsDone(rid, tuple(options))

    def _check_draft(self, candidate: DraftCandidate, target: VocabInfo,
                     limits: TransferLimits) -> DraftOption:
        try:
            groups = list_gguf_files(candidate.repo, endpoint=self.endpoint, token=self.token,
                                     limits=limits)
            group = choose_draft_group(groups, candidate.quant)
            if group is None:
                return DraftOption(candidate, None, None, None, "no GGUF files")
            header = read_remote_header(candidate.repo, group.first.path,
                                        endpoint=self.endpoint, token=self.token,
                                        limits=limits)
            return DraftOption(candidate, group, model_facts(header),
                               first_mismatch(target, vocab_info(header)))
        except TransferCancelled:
            raise
        except (HubError, GGUFFormatError) as exc:
            return DraftOption(candidate, None, None, None, str(exc))

    def _download(self, rid: int, request: Download) -> Downloaded:
        downloader = Downloader(self.models_root, endpoint=self.endpoint, token=self.token,
                                offline=self.offline)
        paths = []
        for index, item in enumerate(request.items):
            def report(progress: DownloadProgress, index: int = index) -> None:
                self.progress.emit(DownloadProgressed(rid, index, progress))

            got = downloader.download_files(item.repo_id, list(item.group.files),
                                            cancel=request.cancel, on_progress=report)
            paths.append(tuple(str(p) for p in got))
        return Downloaded(rid, tuple(paths))

    def _calibrate(self, rid: int, request: Calibrate) -> Calibrated | None:
        """Load the pair in an engine process and time it: a llama.cpp crash on a freshly
        downloaded file becomes a message, not the end of the app."""
        from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
        from app.engine.engine_host import EngineHost, LoadRequest
        from app.engine.events import RunSummary

        def check_cancel() -> None:
            if request.cancel.is_set():
                raise DownloadCancelled("calibration cancelled")

        began = time.perf_counter()
        host = EngineHost()
        try:
            host.load(
                LoadRequest(ModelSpec(request.target_path, n_ctx=request.n_ctx),
                            ModelSpec(request.draft_path, n_ctx=request.n_ctx)),
                on_progress=lambda _path, _fraction: host.cancel()
                if request.cancel.is_set() else None,
            )
            load_s = time.perf_counter() - began
            prompt = host.tokenize_chat([{"role": "user", "content": CALIBRATION_PROMPT}])

            def run(speculative: bool, draft_max: int) -> RunSummary:
                check_cancel()
                spec = SpecConfig(draft_max=draft_max, adaptive=False)
                job = GenerationRequest(prompt, max_tokens=CALIBRATION_TOKENS, spec=spec,
                                        speculative=speculative)
                last = [e for batch in host.generate(job, stream=False) for e in batch][-1]
                check_cancel()
                assert isinstance(last, RunSummary)
                return last

            run(False, 1)  # warm-up: first decode pays one-off allocation costs
            baseline = run(False, 1)
            trials = [run(True, n) for n in CALIBRATION_DRAFT_LENGTHS]
        except GenerationCancelled as exc:
            raise DownloadCancelled("calibration cancelled") from exc
        finally:
            host.close()
        best_index = max(range(len(trials)), key=lambda i: trials[i].tok_s)
        best = trials[best_index]
        speedup = best.tok_s / baseline.tok_s if baseline.tok_s > 0 else 0.0
        return Calibrated(rid, best.acceptance_rate, best.tok_s, baseline.tok_s, speedup,
                          CALIBRATION_DRAFT_LENGTHS[best_index], load_s)


def _message(exc: BaseException) -> str:
    if isinstance(exc, HubError):
        return str(exc)
    try:
        from app.workers.engine_worker import describe_error
    except ImportError:
        return f"{type(exc).__name__}: {exc}"
    title, message = describe_error(exc)
    return f"{title}: {message}"


class HubClient(QObject):
    """Owns the worker thread; lives in the UI thread."""

    result = Signal(object)
    progress = Signal(object)
    failed = Signal(object)
    _submit = Signal(int, object)

    def __init__(self, models_root: Path, *, endpoint: str | None = None,
                 token: Token = None, offline: bool = False,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._cancels: set[threading.Event] = set()
        self._thread = QThread()
        self._thread.setObjectName("hub-worker")
        self.worker = HubWorker(models_root, endpoint=endpoint, token=token, offline=offline)
        self.worker.moveToThread(self._thread)
        self._thread.finished.connect(self.worker.deleteLater)
        self._submit.connect(self.worker.handle)
        self.worker.result.connect(self.result)
        self.worker.progress.connect(self.progress)
        self.worker.failed.connect(self.failed)
        self._thread.start()

    def submit(self, request: object) -> int:
        request_id = next(self._ids)
        cancel = getattr(request, "cancel", None)
        if isinstance(cancel, threading.Event):
            self._cancels.add(cancel)
        self._submit.emit(request_id, request)
        return request_id

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Stop running jobs, quit the thread's event loop and wait for it."""
        for cancel in self._cancels:
            cancel.set()
        if self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(timeout_ms)
