"""The one long-lived worker that drives the engine process off the UI thread.

``EngineWorker`` is a QObject moved to a QThread. The ``Engine`` itself runs in a child
process (``app.engine.process.host``), so a llama.cpp abort or segfault ends that child, not the
window: the worker reports it as a ``WorkerError`` that offers a reload. Requests arrive
through queued slots (``load_pair``, ``run_chat``, ``shutdown``); results leave through
``Signal(object)`` as frozen dataclasses tagged with the request id, so the UI can drop
answers to requests it no longer cares about. Cancelling never goes through the event queue
(the worker is busy waiting on the child): ``cancel_running`` sets the engine process's
shared cancel event directly, which the child polls between speculative steps, inside long
prefills and while loading; an engine process that ignores it for ``STOP_GRACE_SECONDS``
is killed by ``EngineHost`` itself (``EngineUnresponsive``), during a load as during an
answer. The thread is never terminated; ``shutdown`` closes the engine process and quits the
thread's event loop.

A pair that fails to load (refused, cancelled, crashed) does not leave the window without
one: the engine process frees the old pair before loading the next, so the worker loads the
last pair that worked again and reports it as ``PairLoaded(restored=True)`` after the error.

Timing rule: the baseline (target-only) run starts only after the speculative run has
finished, on the same loaded weights, so each run's tokens/sec comes from its own compute.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from app.engine.chat_template import ChatTemplateError
from app.engine.config import DraftSource
from app.engine.events import RunSummary, StopReason, TokenEvent
from app.engine.process.host import (
    CancelFlag,
    ChatTemplateHung,
    EngineCrashed,
    EngineHost,
    LoadRequest,
    PairInfo,
)
from app.errors import GenerationCancelled, SpecDeckError
from app.remote.chat import RemotePair
from app.remote.client import RemoteError
from app.workers.messages import (
    Busy,
    ChatJob,
    EventBatch,
    JobDone,
    LoadPair,
    PairLoaded,
    Verdict,
    WorkerError,
    describe_error,
    stopped_engine,
)
from app.workers.remote_runs import remote_loaded, stream_run

CRASH_DRILL_VAR = "SPECDECK_CRASH_DRILL_TOKENS"


class EngineWorker(QObject):
    busy = Signal(object)  # Busy
    started = Signal(int)  # a chat job's request id: its turn on the engine has come
    loaded = Signal(object)  # PairLoaded
    batch = Signal(object)  # EventBatch
    verdict = Signal(object)  # Verdict
    done = Signal(object)  # JobDone
    error = Signal(object)  # WorkerError
    closed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._host: EngineHost | None = None  # created in the worker thread on first load
        self._cancel = CancelFlag()  # shared with each engine process
        self._cancelled_loads: set[int] = set()
        self._last_good: LoadRequest | None = None  # the last pair that loaded
        self.newest_load = 0  # set by the UI thread before it queues a load
        self._kill_reason = ""  # why SpecDeck itself ended the engine process
        self._remote: RemotePair | None = None  # chatting with a server instead
        self._running_job: ChatJob | None = None  # so the chat's Stop spares a served request
        # Crash drill for the frozen bundle's smoke test: SIGKILL the engine process after
        # this many streamed tokens, so the window's survival is checked end to end.
        drill = os.environ.get(CRASH_DRILL_VAR, "")
        self._drill_tokens = int(drill) if drill.isdigit() else 0

    # --- cancelling (any thread) -----------------------------------------------------------

    def cancel_running(self, request_id: int | None = None) -> None:
        """Stop the current load, prefill or answer; safe to call from the UI thread.

        With ``request_id`` the cancel also holds for a load that has not started yet.
        """
        if request_id is not None:
            self._cancelled_loads.add(request_id)
        self._cancel.set()

    def cancel_job(self, job: ChatJob) -> None:
        """Stop this chat job (any thread): the engine is stopped only when it is the one
        running, not a served request it waits behind."""
        job.cancel.set()
        if self._running_job is job:
            self._cancel.set()

    def kill_engine(self, reason: str) -> None:
        """End the engine process at once (any thread); the crash is reported with ``reason``."""
        self._kill_reason = reason
        host = self._host
        if host is not None:
            host.kill()

    @property
    def engine_pid(self) -> int | None:
        host = self._host
        return host.pid if host is not None else None

    # --- slots (run in the worker thread) ----------------------------------------------

    @Slot(int, object)
    def load_pair(self, request_id: int, request: LoadPair) -> None:
        try:
            self._load(request_id, request)
        except Exception as error:  # noqa: BLE001 - every failure becomes a message
            self._report(request_id, error)

    @Slot(int, object)
    def run_chat(self, request_id: int, job: ChatJob) -> None:
        self._running_job = job
        self.started.emit(request_id)
        try:
            self._run(request_id, job)
        except Exception as error:  # noqa: BLE001
            self._report(request_id, error)
            self.done.emit(JobDone(request_id, True, None, None, 0))
        finally:
            self._running_job = None

    @Slot(object)
    def run_task(self, task: Callable[[EngineHost | None], None]) -> None:
        """A served request (``app.workers.window_serving``), in turn with the chat's jobs: the
        local engine, or None while there is none (a remote pair, no pair, a dead process)."""
        host = self._host if self._remote is None else None
        task(host if host is not None and host.alive else None)

    @Slot()
    def shutdown(self) -> None:
        self._close_engine()
        self.closed.emit()
        thread = QThread.currentThread()
        if thread is not None:
            thread.quit()

    # --- implementation ----------------------------------------------------------------

    def _report(
        self,
        request_id: int,
        error: BaseException,
        detail: str | None = None,
        *,
        unloaded: bool = False,
    ) -> None:
        title, message = describe_error(error)
        if isinstance(error, EngineCrashed) and self._kill_reason:
            title, message = stopped_engine(self._kill_reason)
            self._kill_reason = ""
        detail = traceback.format_exc() if detail is None else detail
        if isinstance(error, EngineCrashed) and error.log:
            detail += "\n--- engine process stderr (last lines) ---\n" + error.log
        crashed = isinstance(error, EngineCrashed) and error.stage != "loading"
        self.error.emit(
            WorkerError(request_id, title, message, detail, can_reload=crashed, unloaded=unloaded)
        )

    def _close_engine(self) -> None:
        if self._host is not None:
            self._host.close()
            self._host = None

    def _load(self, request_id: int, request: LoadPair) -> None:
        from dataclasses import replace

        self._cancel.clear()
        if request_id in self._cancelled_loads:  # cancelled while it waited in the queue
            self._cancel.set()
        if request.remote is not None:
            self.busy.emit(Busy(request_id, f"Connecting to {request.remote.url}…"))
            loaded = remote_loaded(request_id, request.remote, self._cancel.is_set)
            self._close_engine()  # the server answers from now on: free the local models
            self._remote = request.remote
            self.loaded.emit(loaded)
            return
        self._remote = None
        target, draft = request.target, request.draft
        if request.demo:
            from app.models.shipped import demo_pair

            self.busy.emit(
                Busy(request_id, "Preparing the offline demo pair (first use takes a minute)…")
            )
            target_path, draft_path = demo_pair()
            target = replace(target, path=str(target_path))
            draft = replace(draft or target, path=str(draft_path))
        for spec in (target, draft):
            if spec is not None and not Path(spec.path).is_file():
                raise FileNotFoundError(f"no model file at {spec.path}")
        began = time.perf_counter()
        self.busy.emit(Busy(request_id, f"Loading {Path(target.path).name}…", 0.0))
        use_draft = draft if request.draft_source is DraftSource.MODEL else None
        files = [target.path] + ([use_draft.path] if use_draft else [])
        shown = [-1]

        def progress(path: str, fraction: float) -> None:
            # the whole pair as one bar: each file counts for its share of the files
            index = files.index(path) if path in files else 0
            percent = int(100 * (index + min(max(fraction, 0.0), 1.0)) / len(files))
            if percent != shown[0]:
                shown[0] = percent
                text = f"Loading {Path(path).name}… {percent}%"
                self.busy.emit(Busy(request_id, text, percent / 100.0))

        wanted = LoadRequest(target, use_draft, request.draft_source)
        try:
            info = self._host_load(wanted, progress)
        except Exception as error:  # noqa: BLE001 - reported below, after the old pair is back
            previous = self._last_good
            if previous is None or self.newest_load > request_id:  # nothing to go back to,
                raise  # or a newer pair is already on its way
            self._restore(request_id, previous, error, traceback.format_exc())
            return
        self._last_good = wanted
        self._emit_loaded(request_id, info, time.perf_counter() - began)

    def _host_load(
        self, request: LoadRequest, progress: Callable[[str, float], None] | None = None
    ) -> PairInfo:
        host = self._host
        if host is None or not host.alive:  # else the running process swaps its pair
            self._close_engine()
            host = self._host = EngineHost(self._cancel)
        try:
            return host.load(request, on_progress=progress)
        except BaseException:
            if not host.alive:  # a healthy process (a cancelled or refused load) is kept
                self._close_engine()
            raise

    def _restore(
        self, request_id: int, previous: LoadRequest, error: Exception, detail: str
    ) -> None:
        """The engine process freed the old pair before the failed load: load it again, then
        report the failure, then the old pair as loaded (``restored``)."""
        name = Path(previous.target.path).name
        title, _ = describe_error(error)
        self.busy.emit(Busy(request_id, f"{title}: loading {name} again…"))
        self._cancel.clear()  # the cancel that ended the failed load must not end this one
        began = time.perf_counter()
        try:
            info = self._host_load(previous)
        except Exception:  # noqa: BLE001 - the first failure is the one to explain
            self._last_good = None
            self._report(request_id, error, detail, unloaded=True)
            return
        self._report(request_id, error, detail)
        self._emit_loaded(request_id, info, time.perf_counter() - began, restored=True)

    def _emit_loaded(
        self, request_id: int, info: PairInfo, load_s: float, *, restored: bool = False
    ) -> None:
        self.loaded.emit(PairLoaded(request_id, info, load_s, restored))

    def _prompt(self, request_id: int, host: EngineHost, job: ChatJob) -> tuple[int, ...]:
        """The rendered, tokenized chat; a broken template falls back to the plain format."""
        try:
            return host.tokenize_chat(list(job.messages))
        except ChatTemplateError as error:
            host.use_plain_chat()
            reason = str(error)
        except ChatTemplateHung as error:
            reason = str(error)
            self.busy.emit(Busy(request_id, "Restarting the engine with a plain chat format…"))
            host.reset_cancel()
            host.reload_plain()
            if job.cancel.is_set():
                host.cancel()
            self.busy.emit(Busy(request_id, "", None))
        self.error.emit(
            WorkerError(
                request_id,
                "Broken chat template",
                f"{reason[:400]}. SpecDeck uses a plain chat format for this pair instead; "
                "answers may be less polished. Choose another model to use its own format.",
            )
        )
        return host.tokenize_chat(list(job.messages))

    def _run_remote(self, request_id: int, job: ChatJob, pair: RemotePair) -> None:
        """The answer from the server; the baseline from the second server, when named. No
        verdict: no server says which of its tokens were drafted, nor lets them be compared."""
        spec = stream_run(request_id, "speculative", pair.url, pair, job, self.batch.emit)
        base = None
        if spec is not None and pair.baseline_url and job.baseline and not job.cancel.is_set():
            try:
                base = stream_run(
                    request_id, "baseline", pair.baseline_url, pair, job, self.batch.emit
                )
            except RemoteError as error:  # the answer is written: keep it
                self._report(request_id, error)
        self.done.emit(JobDone(request_id, spec is None or job.cancel.is_set(), spec, base, 0))

    def _run(self, request_id: int, job: ChatJob) -> None:
        if self._remote is not None:
            return self._run_remote(request_id, job, self._remote)
        host = self._host
        if host is None:  # a dead engine process is reported as a crash by the host
            raise SpecDeckError(
                "No model pair is loaded. Choose one with Change pair… or try the Demo pair."
            )
        host.reset_cancel()
        if job.cancel.is_set():  # Stop arrived before this job started
            host.cancel()
        prompt = self._prompt(request_id, host, job)
        try:
            spec = self._stream(request_id, "speculative", host, job, prompt)
        except GenerationCancelled:
            self.done.emit(JobDone(request_id, True, None, None, len(prompt)))
            return
        try:
            base = None
            if job.baseline and not job.cancel.is_set():
                try:
                    base = self._stream(request_id, "baseline", host, job, prompt)
                except GenerationCancelled:
                    base = None
            cancelled = job.cancel.is_set() or spec.stop_reason is StopReason.CANCELLED
            if not cancelled:
                comparison = None
                if base is not None and base.stop_reason is not StopReason.CANCELLED:
                    comparison = host.compare(prompt, spec.token_ids, base.token_ids)
                self.verdict.emit(Verdict(request_id, comparison))
        except Exception as error:  # noqa: BLE001 - the answer is written: keep it
            self._report(request_id, error)
            self.done.emit(JobDone(request_id, True, spec, None, len(prompt)))
            return
        self.done.emit(JobDone(request_id, cancelled, spec, base, len(prompt)))

    def _stream(
        self, request_id: int, run: str, host: EngineHost, job: ChatJob, prompt: tuple[int, ...]
    ) -> RunSummary:
        request = job.settings.request(prompt, speculative=run == "speculative")
        began = time.perf_counter()
        tokens = 0
        summary: RunSummary | None = None
        for events in host.generate(request):  # already batched by the engine process
            for event in events:
                if isinstance(event, RunSummary):
                    summary = event
                elif isinstance(event, TokenEvent):
                    tokens += 1
            now = time.perf_counter()
            self.batch.emit(EventBatch(request_id, run, events, now - began, tokens))
            if self._drill_tokens and tokens >= self._drill_tokens:
                self._drill_tokens = 0
                host.kill()
        if summary is None:  # generate() always ends with a summary; be defensive anyway
            raise RuntimeError("the engine ended a run without a summary")
        return summary
