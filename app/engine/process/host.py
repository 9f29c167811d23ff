"""The engine in a child process: a native crash in llama.cpp ends the child, not the app.

llama.cpp aborts the whole process on some inputs (``GGML_ASSERT``, segfaults, the OOM
killer). ``EngineHost`` runs the ``Engine`` in a child (``engine_start_method``: forked by a
fork server on Linux, spawned elsewhere) and talks to it over a pipe
with the typed requests below. Events come back in batches of about ``BATCH_SECONDS``, so
the boundary costs a few microseconds per token. Cancelling is a lock-free shared flag
(``CancelFlag``): ``generate()`` polls it between speculative steps, llama.cpp's abort
callback polls it inside long prefills, and model loads poll it through the progress
callback. A child that ignores the flag for ``STOP_GRACE_SECONDS`` (stuck in native code, or
stopped) is killed and reported as ``EngineUnresponsive``, whatever the request: a load, an
answer, a benchmark.

Before a pair is sent to the child, ``check_before_load`` reads the files' headers here and
refuses what ``check-pair`` refuses (a head as the target, a head or an assistant made for
another target, a draft with another vocabulary), in its words: llama.cpp would crash on some
of those, or fail with a message that points elsewhere, and the child keeps what it had.

When the child dies the parent raises ``EngineCrashed``, which says which model, at which
stage and how it died, in words. A chat template that renders for longer than
``TEMPLATE_SECONDS`` is killed the same way and reported as ``ChatTemplateHung``, in the
chat, the Lab and the benchmark alike. The child ends itself when this process ends (see
``app.engine.process.child``), so a killed parent leaves no engine behind.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any, NoReturn

from app.engine.config import DraftSource, GenerationRequest, ModelSpec
from app.engine.events import Event, PrefillEvent, RunSummary, TokenEvent
from app.engine.process.child import child_main
from app.engine.process.logs import EngineLog, new_log
from app.engine.process.protocol import (
    BENCHMARKING,
    CLOSE_SECONDS,
    LOG_TAIL_BYTES,
    PROCESS_NAME,
    RENDERING,
    STOP_GRACE_SECONDS,
    TEMPLATE_SECONDS,
    BenchRequest,
    CancelFlag,
    ChatPromptRequest,
    ChatTemplateHung,
    ChildLaunch,
    CloseRequest,
    CompareRequest,
    DoneReply,
    EngineCrashed,
    EngineNotRunning,
    EngineUnresponsive,
    EventsReply,
    FailedReply,
    GenerateRequest,
    LoadProgress,
    LoadRequest,
    PairInfo,
    PeakMemoryRequest,
    PlainChatRequest,
    Request,
    RowReply,
    StageReply,
    TokenizeRequest,
    describe_exit,
    rebuild_error,
)
from app.errors import GenerationCancelled, SpecDeckError
from app.gguf.check import check_local_pair

__all__ = [
    "CancelFlag",
    "ChatTemplateHung",
    "EngineCrashed",
    "EngineHost",
    "EngineNotRunning",
    "EngineUnresponsive",
    "LoadRequest",
    "PairInfo",
    "check_before_load",
    "describe_exit",
    "run_bench_in_child",
]

WATCH_SECONDS = 0.1  # how often a waiting parent looks at the cancel flag


def check_before_load(target: ModelSpec, draft: ModelSpec | None, source: DraftSource) -> None:
    """The header check every load passes before llama.cpp sees the files
    (``check_local_pair``: what ``check-pair`` checks, in its words). Raises
    ``ModelLoadError`` or ``IncompatiblePairError``."""
    used = draft if source is DraftSource.MODEL else None
    check_local_pair(Path(target.path), Path(used.path) if used is not None else None)


_fork_server_refused = False  # set once the fork server could not start in this app


def engine_start_method() -> SpawnContext | ForkServerContext:
    """How engine processes start: on Linux, run from source, a fork server that has already
    imported llama.cpp and the engine forks each one (a start then costs a fork, not the
    half second of imports a fresh interpreter pays); "spawn" elsewhere and in the frozen
    bundle, where a fresh interpreter is the only safe start."""
    if (
        not sys.platform.startswith("linux")
        or getattr(sys, "frozen", False)
        or _fork_server_refused
    ):
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["app.engine.process.child"])
    return context


_live_hosts: weakref.WeakSet[EngineHost] = weakref.WeakSet()


@atexit.register
def _close_forgotten_hosts() -> None:
    # Registered after multiprocessing's own exit hook, so it runs first: that hook joins
    # every non-daemonic child, and an engine process waiting for requests never ends.
    for host in list(_live_hosts):
        host.close(timeout_s=2.0)


class EngineHost:
    """Parent-side handle on one engine process. Not thread-safe, except ``cancel()``."""

    def __init__(self, cancel: CancelFlag | None = None) -> None:
        self._context = engine_start_method()
        self._cancel = cancel if cancel is not None else CancelFlag()
        self._process: Any = None
        self._conn: Connection | None = None
        self._log: EngineLog | None = None
        self._seq = 0
        self._stage = "idle"
        self._model = ""
        self.info: PairInfo | None = None
        self._loaded: LoadRequest | None = None
        self.stop_grace_s = STOP_GRACE_SECONDS
        self.close_grace_s = CLOSE_SECONDS  # how long close() waits before it kills
        self._cancel_seen: float | None = None  # when a wait first saw the flag set

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def pid(self) -> int | None:
        process = self._process  # read once: the worker thread may discard it meanwhile
        try:
            return process.pid if process is not None else None
        except ValueError:  # closed in between
            return None

    def start(self) -> None:
        if self.alive:
            return
        self._discard()
        self._log = new_log()
        try:
            self._process, self._conn = self._launch(self._log)
        except OSError:
            if self._context.get_start_method() != "forkserver":
                raise
            # The fork server listens on a socket in the temporary folder, and a TMPDIR of
            # more than about 75 characters makes its path longer than a Unix socket's may
            # be ("AF_UNIX path too long"). A fresh interpreter needs no socket, as on other
            # systems: slower to start, but it starts.
            global _fork_server_refused
            _fork_server_refused = True
            self._context = engine_start_method()
            self._process, self._conn = self._launch(self._log)
        _live_hosts.add(self)
        self._stage, self._model = "idle", ""

    def _launch(self, log: EngineLog) -> tuple[Any, Connection]:
        """A started engine process and the parent's end of its pipe."""
        parent_end, child_end = self._context.Pipe(duplex=True)
        environ = tuple(os.environ.items())
        launch = ChildLaunch(
            child_end, self._cancel, log.for_child(), environ, os.getcwd(), os.getpid()
        )
        process = self._context.Process(target=child_main, args=(launch,), name=PROCESS_NAME)
        try:
            process.start()
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()  # so that the child's death reads as end-of-file here
        return process, parent_end

    def close(self, timeout_s: float | None = None) -> None:
        """Ask the child to free its models and exit; kill it if it has not within
        ``timeout_s`` (``close_grace_s``)."""
        if timeout_s is None:
            timeout_s = self.close_grace_s
        if self._process is None:
            return
        self._cancel.set()
        if self._conn is not None and self._process.is_alive():
            with contextlib.suppress(OSError, ValueError):
                self._conn.send((0, CloseRequest()))
        self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._discard()

    def kill(self) -> None:
        """End the child at once (SIGKILL on POSIX); safe from any thread."""
        process = self._process  # read once: the owning thread may discard it meanwhile
        with contextlib.suppress(ValueError, AttributeError):  # closed in between
            if process is not None and process.is_alive():
                process.kill()

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            self._process.join(5)
            with contextlib.suppress(ValueError, AttributeError):
                self._process.close()
        if self._log is not None:
            self._log.close()
        self._process = self._conn = self._log = None
        self.info = None

    # --- cancelling ------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the running load, prefill or answer (safe from any thread)."""
        self._cancel.set()

    def reset_cancel(self) -> None:
        self._cancel.clear()

    @property
    def cancelled(self) -> bool:
        return bool(self._cancel.is_set())

    # --- requests --------------------------------------------------------------------------

    def load(
        self, request: LoadRequest, on_progress: Callable[[str, float], None] | None = None
    ) -> PairInfo:
        """Load a pair (restarting the child if it is gone); ``on_progress(file, 0..1)``.
        A pair ``check_before_load`` refuses never reaches the child: it keeps what it had.
        A cancel during the load cancels it, also one the child saw too late (after the last
        file's progress): the child then ends, freeing the pair, and the next load starts
        another."""
        check_before_load(request.target, request.draft, request.draft_source)
        self.start()
        self._stage, self._model = "loading", Path(request.target.path).name
        seq = self._send(request)
        while True:
            reply = self._receive(seq)
            if isinstance(reply, LoadProgress):
                self._model = Path(reply.path).name
                if on_progress is not None:
                    on_progress(reply.path, reply.fraction)
                continue
            info = self._finish(reply)
            assert isinstance(info, PairInfo)
            if self._cancel.is_set():
                loading = self._model
                self.close(timeout_s=2.0)
                raise GenerationCancelled(f"loading {loading} was cancelled")
            self.info, self._loaded = info, request
            self._stage = "idle"
            return info

    def reload_plain(self) -> PairInfo:
        """Restart the child with the last pair and the plain chat format."""
        if self._loaded is None:
            raise EngineNotRunning("no pair was loaded")
        self.close(timeout_s=2.0)
        self.reset_cancel()  # close() cancels whatever ran; the reload must not be
        return self.load(replace(self._loaded, plain_chat=True))

    def use_plain_chat(self) -> None:
        self._call(PlainChatRequest(), "idle")
        if self.info is not None:
            self.info = replace(self.info, plain_chat=True)
        if self._loaded is not None:
            self._loaded = replace(self._loaded, plain_chat=True)

    def tokenize_chat(
        self, messages: Sequence[dict[str, str]], timeout_s: float = TEMPLATE_SECONDS
    ) -> tuple[int, ...]:
        """Render with the model's template and tokenize; a hung template kills the child."""
        typed = tuple((str(m["role"]), str(m["content"])) for m in messages)
        try:
            tokens = self._call(ChatPromptRequest(typed), RENDERING, timeout_s=timeout_s)
        except TimeoutError:
            self._template_hung(timeout_s)
        return tuple(tokens)

    def _template_hung(self, seconds: float) -> NoReturn:
        model = self._pair_name().split(" + ")[0]
        self.kill()
        self._process.join(5)
        self._discard()
        raise ChatTemplateHung(model, seconds) from None

    def tokenize(self, text: str) -> tuple[int, ...]:
        """Raw text to the target's tokens (BOS as the model wants it, special tokens parsed)."""
        return tuple(self._call(TokenizeRequest(text), "tokenizing"))

    def compare(
        self, prompt: Sequence[int], speculative: Sequence[int], baseline: Sequence[int]
    ) -> Any:
        """``app.engine.exactness.compare`` on the child's engine (the margin needs the target)."""
        request = CompareRequest(tuple(prompt), tuple(speculative), tuple(baseline))
        return self._call(request, "comparing")

    def generate(
        self, request: GenerationRequest, *, stream: bool = True
    ) -> Iterator[tuple[Event, ...]]:
        """Batches of events; the last batch ends with the ``RunSummary``.

        A Stop during the prefill raises ``GenerationCancelled``; abandoning the iterator
        cancels the run and waits for the child to finish it.
        """
        seq = self._send(GenerateRequest(request, stream))
        self._stage, self._model = "prefill", self._pair_name()
        finished = False
        try:
            while True:
                reply = self._receive(seq)
                if isinstance(reply, EventsReply):
                    if self._stage == "prefill" and any(
                        isinstance(e, PrefillEvent | TokenEvent) for e in reply.events
                    ):
                        self._stage = "generating"
                    yield reply.events
                    continue
                finished = True
                summary = self._finish(reply)
                assert isinstance(summary, RunSummary)
                yield (summary,)
                return
        finally:
            if not finished and self.alive:
                self._cancel.set()
                with contextlib.suppress(SpecDeckError, OSError):
                    while not isinstance(self._receive(seq), DoneReply | FailedReply):
                        pass
            self._stage = "idle"

    def run(self, request: GenerationRequest) -> RunSummary:
        """One request to its end, nothing streamed: its ``RunSummary``."""
        for batch in self.generate(request, stream=False):
            for event in batch:
                if isinstance(event, RunSummary):
                    return event
        raise SpecDeckError("the engine ended a run without a summary")

    def peak_rss_bytes(self) -> int | None:
        """The engine process's peak resident memory (None where the OS does not say)."""
        peak = self._call(PeakMemoryRequest(), "idle")
        return None if peak is None else int(peak)

    def bench(
        self, request: BenchRequest, on_row: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """``run_bench`` in the child; each chat template render is held to its bound."""
        check_before_load(request.target, request.draft, request.source)
        self.start()
        files = [request.target.path] + ([request.draft.path] if request.draft else [])
        self._stage, self._model = "loading", Path(files[0]).name
        seq = self._send(request)
        bound: float | None = None
        while True:
            try:
                reply = self._receive(seq, bound)
            except TimeoutError:
                self._template_hung(bound or TEMPLATE_SECONDS)
            if isinstance(reply, StageReply):
                self._stage = reply.stage
                bound = TEMPLATE_SECONDS if reply.stage == RENDERING else None
                continue
            if isinstance(reply, LoadProgress):
                self._model = Path(reply.path).name
                if reply.path == files[-1] and reply.fraction >= 1.0:
                    self._stage, self._model = (
                        BENCHMARKING,
                        " + ".join(Path(f).name for f in files),
                    )
                continue
            if isinstance(reply, RowReply):
                if on_row is not None:
                    on_row(reply.row)
                continue
            result = self._finish(reply)
            assert isinstance(result, dict)
            return result

    # --- plumbing --------------------------------------------------------------------------

    def _pair_name(self) -> str:
        info = self.info
        if info is None:
            return self._model or "the model"
        names = [Path(info.target_path).name]
        if info.draft_path:
            names.append(Path(info.draft_path).name)
        return " + ".join(names)

    def _call(self, request: Request, stage: str, timeout_s: float | None = None) -> Any:
        seq = self._send(request)
        previous, self._stage, self._model = self._stage, stage, self._pair_name()
        try:
            return self._finish(self._receive(seq, timeout_s))
        finally:
            self._stage = previous

    def _send(self, request: Request) -> int:
        if self._conn is None or self._process is None:
            raise EngineNotRunning("the engine process is not running: load the pair again")
        if not self._process.is_alive():  # died while it waited for this request
            self._crashed()
        self._seq += 1
        self._cancel_seen = None
        try:
            self._conn.send((self._seq, request))
        except (OSError, ValueError):
            self._crashed()
        return self._seq

    def _finish(self, reply: object) -> Any:
        if isinstance(reply, DoneReply):
            return reply.value
        if isinstance(reply, FailedReply):
            raise rebuild_error(reply)
        raise SpecDeckError(f"the engine process sent an unexpected {type(reply).__name__}")

    def _receive(self, seq: int, timeout_s: float | None = None) -> object:
        """The next reply to request ``seq``; replies to abandoned requests are dropped.

        The wait is also the Stop/Cancel watchdog: a child that sends nothing for
        ``stop_grace_s`` after the cancel flag was set is killed (``EngineUnresponsive``).
        """
        assert self._conn is not None and self._process is not None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            now = time.monotonic()
            if not self._cancel.is_set():
                self._cancel_seen, watch = None, WATCH_SECONDS
            elif self._cancel_seen is None:
                self._cancel_seen, watch = now, self.stop_grace_s
            else:
                watch = self._cancel_seen + self.stop_grace_s - now
                if watch <= 0:
                    self._unresponsive()
            left = watch if deadline is None else min(watch, max(0.0, deadline - now))
            ready = wait([self._conn, self._process.sentinel], left)
            if not ready:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"no answer from the engine process within {timeout_s} s")
                continue
            if self._conn in ready or self._conn.poll():
                try:
                    got, reply = self._conn.recv()
                except (EOFError, OSError):
                    self._crashed()
                if got == seq:
                    return reply
                continue
            self._crashed()  # the process ended and nothing is left to read

    def _unresponsive(self) -> NoReturn:
        stage, model = self._stage, self._model or self._pair_name()
        process = self._process
        self.kill()
        process.join(5)
        code, log = process.exitcode, self._log_tail()
        self._discard()
        raise EngineUnresponsive(stage, model, self.stop_grace_s, code, log)

    def _crashed(self) -> NoReturn:
        process = self._process
        process.join(5)
        code = process.exitcode
        log = self._log_tail()
        stage, model = self._stage, self._model or self._pair_name()
        self._discard()
        raise EngineCrashed(stage, model, describe_exit(code), code, log)

    def _log_tail(self) -> str:
        return self._log.tail(LOG_TAIL_BYTES) if self._log is not None else ""


def run_bench_in_child(
    request: BenchRequest, on_row: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """The benchmark in an engine process; a crash raises ``EngineCrashed`` naming the file."""
    host = EngineHost()
    try:
        return host.bench(request, on_row)
    finally:
        host.close()
