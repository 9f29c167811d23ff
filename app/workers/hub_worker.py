"""Hub, download and calibration jobs for the pair wizard, off the UI thread.

``HubWorker`` is one QObject moved to a QThread. The UI submits frozen request dataclasses
(``app.workers.hub_messages``) through ``HubClient.submit`` (a queued signal) and gets
frozen reply dataclasses back through ``Signal(object)``, tagged with the request id so stale
replies can be ignored. Every exception becomes a ``HubFailure`` with a message a person can
act on. Long jobs poll a ``threading.Event`` to stop early; the thread is asked to quit and
joined, never terminated.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

import httpx2
from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.engine.llama.hardware import detect_hardware
from app.errors import GenerationCancelled
from app.gguf.compat import VocabInfo, first_mismatch
from app.gguf.facts import model_facts, vocab_info
from app.gguf.reader import GGUFFormatError, read_local_header
from app.models.catalog import DraftCandidate, parse_family
from app.models.downloads import (
    DownloadCancelled,
    Downloader,
    DownloadProgress,
    HashMismatchError,
    save_token,
)
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
from app.models.hub_http import (
    DEFAULT_HEADER_DEADLINE_S,
    TransferCancelled,
    TransferLimits,
    TransferStalled,
    TransferTimedOut,
)
from app.models.library import split_parts
from app.models.split_names import split_name
from app.workers.hub_messages import (
    Calibrate,
    Calibrated,
    CalibrationStep,
    CheckDraftRepo,
    DetectHardware,
    Download,
    Downloaded,
    DownloadProgressed,
    DraftChecked,
    DraftOption,
    DraftsDone,
    FindDrafts,
    HardwareFound,
    HubFailure,
    HubProbed,
    InspectRepo,
    LocalModel,
    LocalScanned,
    ProbeHub,
    RepoInspected,
    SaveToken,
    ScanLocal,
    Search,
    SearchResults,
    TokenSaved,
)

CALIBRATION_PROMPT = (
    "Write a Python function that returns the n-th Fibonacci number, "
    "then explain in two sentences how it works."
)
CALIBRATION_TOKENS = 64
CALIBRATION_DRAFT_LENGTHS = (4, 8)
MAX_DRAFT_CANDIDATES = 6
# Offline must be known within 3 s: one small request, cut at this deadline.
PROBE_DEADLINE_S = 2.5
MAX_LOCAL_FILES = 200  # GGUF files read from the models folder and the library
# A smaller quantization of the target itself drafts only when it is at most this fraction
# of the target's file: a draft must be much cheaper than the model it drafts for.
SAME_MODEL_DRAFT_RATIO = 0.5


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


_UNREACHABLE = (
    TransferTimedOut,
    TransferStalled,
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    httpx2.NetworkError,
    httpx2.ConnectTimeout,
    httpx2.ReadTimeout,
    httpx2.PoolTimeout,
    httpx2.RemoteProtocolError,
)


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` means the Hub could not be reached (no network, refused, silent)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # huggingface_hub's OfflineModeIsEnabled is a ConnectionError
        if isinstance(current, _UNREACHABLE):
            return True
        current = current.__cause__ or current.__context__
    return False


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


class HubWorker(QObject):
    result = Signal(object)
    progress = Signal(object)
    failed = Signal(object)

    def __init__(
        self,
        models_root: Path,
        *,
        endpoint: str | None = None,
        token: Token = None,
        offline: bool = False,
        model_cache: Path | None = None,
    ) -> None:
        super().__init__()
        self.models_root = models_root
        self.model_cache = model_cache  # its top level only: below it are build trees
        self.endpoint = endpoint
        self.token = token
        self.offline = offline
        # The calibration engine stays loaded between calibrations of the same pair, so
        # Back and Next on the Verify page do not load both models again.
        self._engine: object | None = None
        self._engine_key: tuple[str, str, int] | None = None

    @Slot(int, object)
    def handle(self, request_id: int, request: object) -> None:
        try:
            reply = self._dispatch(request_id, request)
        except (DownloadCancelled, TransferCancelled) as exc:
            self.failed.emit(HubFailure(request_id, str(exc), cancelled=True))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message
            self.failed.emit(
                HubFailure(
                    request_id,
                    _message(exc),
                    detail=traceback.format_exc(),
                    unreachable=is_unreachable(exc),
                    corrupt=isinstance(exc, HashMismatchError),
                )
            )
        else:
            if reply is not None:
                self.result.emit(reply)

    @Slot()
    def close_engine(self) -> None:
        engine, self._engine, self._engine_key = self._engine, None, None
        if engine is not None:
            engine.close()  # type: ignore[attr-defined]

    def _dispatch(self, rid: int, request: object) -> object:
        if isinstance(request, DetectHardware):
            return HardwareFound(rid, detect_hardware())
        if isinstance(request, ProbeHub):
            return self._probe(rid)
        if isinstance(request, ScanLocal):
            return self._scan_local(rid, request)
        if isinstance(request, SaveToken):
            save_token(request.token)
            self.token = None  # from now on the stored token is used
            return TokenSaved(rid)
        if isinstance(request, Search):
            hits = search_models(
                request.query,
                endpoint=self.endpoint,
                token=self.token,
                limits=TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=request.cancel),
            )
            return SearchResults(rid, request.query, tuple(hits))
        if isinstance(request, CheckDraftRepo):
            return self._check_typed_draft(rid, request)
        if isinstance(request, InspectRepo):
            return self._inspect(
                rid,
                request.repo_id,
                TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=request.cancel),
            )
        if isinstance(request, FindDrafts):
            return self._find_drafts(rid, request)
        if isinstance(request, Download):
            return self._download(rid, request)
        if isinstance(request, Calibrate):
            return self._calibrate(rid, request)
        raise TypeError(f"unknown request {type(request).__name__}")

    def _probe(self, rid: int) -> HubProbed:
        began = time.monotonic()
        if self.offline:
            return HubProbed(rid, False, "offline mode is on", 0.0)
        limits = TransferLimits(stall_timeout_s=PROBE_DEADLINE_S, deadline_s=PROBE_DEADLINE_S)
        try:
            search_models("", limit=1, endpoint=self.endpoint, token=self.token, limits=limits)
        except HubError as exc:
            if is_unreachable(exc):
                return HubProbed(rid, False, _probe_reason(exc), time.monotonic() - began)
        # Any answer, even an error status, means the Hub is reachable.
        return HubProbed(rid, True, "", time.monotonic() - began)

    def _scan_local(self, rid: int, request: ScanLocal) -> LocalScanned:
        library = {str(Path(p).resolve()) for p in request.library_paths}
        cached = local_gguf_files(self.model_cache, recursive=False) if self.model_cache else []
        cache = {str(p.resolve()) for p in cached}
        paths: dict[str, Path] = {}
        for raw in (
            *request.extra,
            *request.library_paths,
            *map(str, local_gguf_files(self.models_root)),
            *map(str, cached),
        ):
            path = Path(raw)
            key = str(path.resolve())
            if key not in paths and len(paths) < MAX_LOCAL_FILES:
                paths[key] = path
        models, unreadable = [], []
        for key, path in paths.items():
            if request.target_path and key == str(Path(request.target_path).resolve()):
                continue
            try:
                models.append(
                    read_local_model(
                        path,
                        request.target_vocab,
                        in_library=key in library,
                        in_cache=key in cache and key not in library,
                    )
                )
            except (GGUFFormatError, OSError) as exc:
                # the path is said once, beside the reason
                unreadable.append((str(path), str(exc).removeprefix(f"{path}: ")))
        models.sort(key=lambda m: (m.mismatch is not None, m.size))
        return LocalScanned(rid, tuple(models), tuple(unreadable))

    def _check_typed_draft(self, rid: int, request: CheckDraftRepo) -> DraftChecked:
        limits = TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=request.cancel)
        target = vocab_info(
            read_remote_header(
                request.target_repo,
                request.target_file,
                endpoint=self.endpoint,
                token=self.token,
                limits=limits,
            )
        )
        family, size = parse_family(request.repo_id)
        candidate = DraftCandidate(request.repo_id, None, size, "typed by you")
        option = self._check_draft(candidate, target, limits)
        if option.error is not None:
            raise HubError(f"{request.repo_id}: {option.error}")
        return DraftChecked(rid, option)

    def _inspect(self, rid: int, repo_id: str, limits: TransferLimits) -> RepoInspected:
        listed = list_gguf_files(repo_id, endpoint=self.endpoint, token=self.token, limits=limits)
        if not listed:
            raise HubError(f"{repo_id} has no GGUF model files; choose a GGUF repository")
        groups, heads = split_heads(listed)  # a head file beside the model is no target quant
        header = read_remote_header(
            repo_id, groups[0].first.path, endpoint=self.endpoint, token=self.token, limits=limits
        )
        return RepoInspected(
            rid, repo_id, tuple(groups), model_facts(header), vocab_info(header), tuple(heads)
        )

    def _find_drafts(self, rid: int, request: FindDrafts) -> DraftsDone:
        def limits() -> TransferLimits:  # one deadline per header, one cancel for all
            return TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S, cancel=request.cancel)

        target = vocab_info(
            read_remote_header(
                request.target_repo,
                request.target_file,
                endpoint=self.endpoint,
                token=self.token,
                limits=limits(),
            )
        )
        family, _ = parse_family(request.target_repo)
        try:
            hub_repos = [
                h.repo_id
                for h in search_models(family, limit=40, endpoint=self.endpoint, token=self.token)
            ]
        except HubError:
            hub_repos = []  # the catalog alone still gives candidates
        candidates = request.catalog.draft_candidates(request.target_repo, hub_repos)
        options = []
        for candidate in candidates[:MAX_DRAFT_CANDIDATES]:
            option = self._check_draft(candidate, target, limits())
            options.append(option)
            self.progress.emit(DraftChecked(rid, option))
        same = self._same_model_draft(request, limits())
        if same is not None:
            options.append(same)
            self.progress.emit(DraftChecked(rid, same))
        options.sort(key=lambda o: not o.compatible)  # stable: keeps the ranking otherwise
        return DraftsDone(rid, tuple(options))

    def _same_model_draft(self, request: FindDrafts, limits: TransferLimits) -> DraftOption | None:
        """A much smaller quantization of the target itself: the same vocabulary by
        construction, so it always drafts (the demo pair is F32 drafted by Q2_K)."""
        groups = list_gguf_files(
            request.target_repo, endpoint=self.endpoint, token=self.token, limits=limits
        )
        target = next((g for g in groups if g.first.path == request.target_file), None)
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
        header = read_remote_header(
            request.target_repo,
            group.first.path,
            endpoint=self.endpoint,
            token=self.token,
            limits=limits,
        )
        _family, size = parse_family(request.target_repo)
        candidate = DraftCandidate(
            request.target_repo,
            group.quant,
            size,
            "same model, smaller quantization",
            "The target's own weights at fewer bits: it agrees with "
            "the target very often, but costs more per token than a "
            "smaller model.",
        )
        return DraftOption(candidate, group, model_facts(header), None, groups=smaller)

    def _check_draft(
        self, candidate: DraftCandidate, target: VocabInfo, limits: TransferLimits
    ) -> DraftOption:
        try:
            groups = list_gguf_files(
                candidate.repo, endpoint=self.endpoint, token=self.token, limits=limits
            )
            named = [g for g in groups if any(f.path == candidate.file for f in g.files)]
            if candidate.file is not None and not named:
                return DraftOption(candidate, None, None, None, f"no file {candidate.file}")
            # the catalog's file when it names one (a repository may hold a target too)
            group = named[0] if named else choose_draft_group(groups, candidate.quant)
            if group is None:
                return DraftOption(candidate, None, None, None, "no GGUF files")
            header = read_remote_header(
                candidate.repo,
                group.first.path,
                endpoint=self.endpoint,
                token=self.token,
                limits=limits,
            )
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

    def _download(self, rid: int, request: Download) -> Downloaded:
        downloader = Downloader(
            self.models_root, endpoint=self.endpoint, token=self.token, offline=self.offline
        )
        paths = []
        for index, item in enumerate(request.items):

            def report(progress: DownloadProgress, index: int = index) -> None:
                self.progress.emit(DownloadProgressed(rid, index, progress))

            got = downloader.download_files(
                item.repo_id, list(item.group.files), cancel=request.cancel, on_progress=report
            )
            paths.append(tuple(str(p) for p in got))
        return Downloaded(rid, tuple(paths))

    def _calibrate(self, rid: int, request: Calibrate) -> Calibrated | None:
        """Load the pair in an engine process and time it: a llama.cpp crash on a freshly
        downloaded file becomes a message, not the end of the app. A cancelled run keeps the
        process and its models, so Back and Next reuse them."""
        from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
        from app.engine.events import RunSummary
        from app.engine.process.host import EngineHost, LoadRequest

        def check_cancel() -> None:
            if request.cancel.is_set():
                raise DownloadCancelled("calibration cancelled")

        total = 4 + len(CALIBRATION_DRAFT_LENGTHS)

        def step(index: int, text: str) -> None:
            check_cancel()
            self.progress.emit(CalibrationStep(rid, index, total, text))

        step(1, "Loading both models")
        began = time.perf_counter()
        key = (request.target_path, request.draft_path, request.n_ctx)
        try:
            if self._engine_key != key:
                self.close_engine()
                fresh = EngineHost()
                self._engine = fresh
                fresh.load(
                    LoadRequest(
                        ModelSpec(request.target_path, n_ctx=request.n_ctx),
                        ModelSpec(request.draft_path, n_ctx=request.n_ctx),
                    ),
                    on_progress=lambda _path, _fraction: (
                        fresh.cancel() if request.cancel.is_set() else None
                    ),
                )
                self._engine_key = key
            host = self._engine
            assert isinstance(host, EngineHost)
            load_s = time.perf_counter() - began
            prompt = host.tokenize_chat([{"role": "user", "content": CALIBRATION_PROMPT}])

            def run(speculative: bool, draft_max: int) -> RunSummary:
                check_cancel()
                # the draft drafts every step: the guard would pause a pair that cannot
                # pay, and the run would time the target alone under the draft's name
                spec = SpecConfig(draft_max=draft_max, adaptive=False, collapse_guard=False)
                # every run writes all its tokens: an early end-of-answer would time a
                # handful of tokens against 64
                job = GenerationRequest(
                    prompt,
                    max_tokens=CALIBRATION_TOKENS,
                    spec=spec,
                    speculative=speculative,
                    ignore_eos=True,
                )
                last = [e for batch in host.generate(job, stream=False) for e in batch][-1]
                check_cancel()
                assert isinstance(last, RunSummary)
                return last

            step(2, "Warming up (the first answer pays one-off costs)")
            run(False, 1)
            step(3, f"Target alone: {CALIBRATION_TOKENS} tokens")
            first = run(False, 1)
            step(4, "Target alone again (how much two runs differ)")
            second = run(False, 1)
            trials = []
            for index, n in enumerate(CALIBRATION_DRAFT_LENGTHS):
                step(5 + index, f"With the draft, {n} tokens per draft")
                trials.append(run(True, n))
        except (DownloadCancelled, GenerationCancelled) as exc:
            if self._engine_key != key:  # cancelled while loading: nothing worth keeping
                self.close_engine()
            raise DownloadCancelled("calibration cancelled") from exc
        except BaseException:
            self.close_engine()  # after a failure (or a crash) the engine is not trusted again
            raise
        best_index = max(range(len(trials)), key=lambda i: trials[i].tok_s)
        best = trials[best_index]
        base_tok_s = (first.tok_s + second.tok_s) / 2
        noise = abs(first.tok_s - second.tok_s) / max(first.tok_s, second.tok_s, 1e-9)
        speedup = best.tok_s / base_tok_s if base_tok_s > 0 else 0.0
        return Calibrated(
            rid,
            best.acceptance_rate,
            best.tok_s,
            base_tok_s,
            speedup,
            CALIBRATION_DRAFT_LENGTHS[best_index],
            load_s,
            tuple((n, t.tok_s) for n, t in zip(CALIBRATION_DRAFT_LENGTHS, trials, strict=True)),
            noise,
        )


def _probe_reason(exc: BaseException) -> str:
    text = str(exc)
    if "cannot reach" in text or "Connect" in text or "refused" in text.lower():
        return "the connection was refused or the network is down"
    if "did not deliver" in text or "stalled" in text:
        return f"it did not answer within {PROBE_DEADLINE_S:g} s"
    return text


def _message(exc: BaseException) -> str:
    if isinstance(exc, HubError):
        return str(exc)
    try:
        from app.workers.messages import describe_error
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

    def __init__(
        self,
        models_root: Path,
        *,
        endpoint: str | None = None,
        token: Token = None,
        offline: bool = False,
        model_cache: Path | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._cancels: set[threading.Event] = set()
        self._thread = QThread()
        self._thread.setObjectName("hub-worker")
        self.worker = HubWorker(
            models_root, endpoint=endpoint, token=token, offline=offline, model_cache=model_cache
        )
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
        """Stop running jobs, free the calibration engine, quit the thread and wait for it."""
        for cancel in self._cancels:
            cancel.set()
        if self._thread.isRunning():
            self._thread.quit()
            self._thread.wait(timeout_ms)
        if not self._thread.isRunning():  # the worker's thread is gone: free its models here
            self.worker.close_engine()
