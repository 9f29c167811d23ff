"""The engine in a child process: a native crash in llama.cpp ends the child, not the app.

llama.cpp aborts the whole process on some inputs (``GGML_ASSERT``, segfaults, the OOM
killer). ``EngineHost`` runs the ``Engine`` in a child started with the "spawn" method (the
only safe one on macOS and Windows and in the frozen bundle) and talks to it over a pipe
with the typed requests below. Events come back in batches of about ``BATCH_SECONDS``, so
the boundary costs a few microseconds per token. Cancelling is a lock-free shared flag
(``CancelFlag``): ``generate()`` polls it between speculative steps, llama.cpp's abort
callback polls it inside long prefills, and model loads poll it through the progress
callback.

When the child dies the parent raises ``EngineCrashed``, which says which model, at which
stage and how it died, in words. A chat template that renders for longer than
``TEMPLATE_SECONDS`` is killed the same way and reported as ``ChatTemplateHung``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from app.core.config import DraftSource, GenerationRequest, ModelSpec
from app.core.errors import GenerationCancelled, SpecDeckError
from app.core.events import Event, PrefillEvent, RunSummary, TokenEvent

BATCH_SECONDS = 0.015  # events cross the pipe at most ~65 times a second
TEMPLATE_SECONDS = 5.0  # a chat template that renders longer than this is broken
CLOSE_SECONDS = 10.0
LOG_TAIL_BYTES = 4096
PROGRESS_STEP = 0.01  # send load progress when it moved by 1 %

# --- requests (parent -> child) -----------------------------------------------------------


@dataclass(frozen=True)
class LoadRequest:
    target: ModelSpec
    draft: ModelSpec | None
    draft_source: DraftSource = DraftSource.MODEL
    plain_chat: bool = False  # ignore the model's chat template


@dataclass(frozen=True)
class ChatPromptRequest:
    messages: tuple[tuple[str, str], ...]  # (role, content)


@dataclass(frozen=True)
class PlainChatRequest:
    """Use the plain chat format from now on (the model's template is broken)."""


@dataclass(frozen=True)
class GenerateRequest:
    request: GenerationRequest
    stream: bool = True  # False: only the RunSummary comes back (benchmarks)


@dataclass(frozen=True)
class CompareRequest:
    prompt: tuple[int, ...]
    speculative: tuple[int, ...]
    baseline: tuple[int, ...]


@dataclass(frozen=True)
class BenchRequest:
    """``app.core.bench.run_bench`` in the engine process: its own Engine, its own timings."""

    target: ModelSpec
    draft: ModelSpec | None
    prompts: tuple[dict[str, str], ...]
    settings: Any  # app.core.bench.BenchSettings (imported lazily: it loads llama.cpp)
    source: DraftSource


@dataclass(frozen=True)
class CloseRequest:
    pass


Request = (
    LoadRequest | ChatPromptRequest | PlainChatRequest | GenerateRequest | CompareRequest
    | BenchRequest | CloseRequest
)

# --- replies (child -> parent) ------------------------------------------------------------


@dataclass(frozen=True)
class PairInfo:
    target_path: str
    draft_path: str | None
    draft_source: DraftSource
    device: str
    weights_bytes: int
    n_ctx: int
    repacking: str
    plain_chat: bool


@dataclass(frozen=True)
class LoadProgress:
    path: str
    fraction: float  # 0..1 of this file


@dataclass(frozen=True)
class RowReply:
    row: dict[str, Any]


@dataclass(frozen=True)
class EventsReply:
    events: tuple[Event, ...]


@dataclass(frozen=True)
class DoneReply:
    value: Any


@dataclass(frozen=True)
class FailedReply:
    kind: str
    message: str
    detail: str  # the child's traceback
    payload: bytes | None  # (class, message, attributes) pickled, when that round-trips


# --- errors the parent raises ---------------------------------------------------------------


class EngineCrashed(SpecDeckError):
    """The engine process died: a llama.cpp abort, a segfault, the OOM killer."""

    def __init__(self, stage: str, model: str, how: str, exit_code: int | None, log: str) -> None:
        self.stage = stage  # "loading", "prefill", "generating", "rendering the chat template"…
        self.model = model  # file name(s)
        self.how = how  # the signal or exit code, in words
        self.exit_code = exit_code
        self.log = log  # the last lines the child wrote to stderr
        said = f" llama.cpp said: \"{_last_line(log)}\"." if _last_line(log) else ""
        hint = (" The file is damaged or not supported by this llama.cpp build."
                if stage == "loading" else "")
        super().__init__(f"the engine process (llama.cpp) died while {_stage_words(stage)} "
                         f"{model}: {how}.{said}{hint}")


class ChatTemplateHung(SpecDeckError):
    def __init__(self, model: str, seconds: float) -> None:
        self.model = model
        super().__init__(f"broken chat template in {model}: rendering did not finish within "
                         f"{seconds:.0f} s")


class EngineNotRunning(SpecDeckError):
    pass


def _stage_words(stage: str) -> str:
    return {
        "loading": "loading",
        "prefill": "reading the prompt (prefill) with",
        "generating": "generating with",
        "comparing": "checking exactness with",
        "rendering the chat template": "rendering the chat template of",
        "idle": "idle, holding",
        "benchmarking": "benchmarking",
    }.get(stage, f"{stage} with")


def _last_line(log: str) -> str:
    """llama.cpp's last words before the crash (faulthandler's Python stack that follows
    them is left out; source paths are shortened to the file name)."""
    native = log.split("Fatal Python error", 1)[0]
    lines = [line.strip() for line in native.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    for candidate in reversed(lines):
        if "GGML_ASSERT" in candidate or "error" in candidate.lower():
            line = candidate
            break
    head, sep, tail = line.partition(": ")
    if sep and ("/" in head or "\\" in head):
        line = f"{head.replace(chr(92), '/').rsplit('/', 1)[-1]}: {tail}"
    return line[:300]


_SIGNAL_WORDS = {
    "SIGSEGV": "SIGSEGV (segmentation fault)",
    "SIGABRT": "SIGABRT (llama.cpp assertion)",
    "SIGKILL": "killed (out of memory?)",
    "SIGBUS": "SIGBUS (bus error: the model file changed or could not be read)",
    "SIGILL": "SIGILL (illegal instruction: the CPU lacks a feature this llama.cpp build uses)",
    "SIGFPE": "SIGFPE (arithmetic fault)",
    "SIGTERM": "terminated (SIGTERM)",
}
_WINDOWS_CODES = {
    0xC0000005: "access violation (segmentation fault)",
    0xC0000409: "fail-fast abort (llama.cpp assertion)",
    0xC00000FD: "stack overflow",
    0xC000001D: "illegal instruction (the CPU lacks a feature this llama.cpp build uses)",
    3: "abort (llama.cpp assertion)",
}


def describe_exit(code: int | None) -> str:
    """How a child ended, in words: the signal or the exit code."""
    if code is None:
        return "ended without an exit code"
    number = -code if code < 0 else code - 128 if 128 < code < 160 and os.name != "nt" else 0
    if number:
        try:
            name = signal.Signals(number).name
        except ValueError:
            return f"signal {number}"
        return _SIGNAL_WORDS.get(name, f"{name} (signal {number})")
    if (code & 0xFFFFFFFF) in _WINDOWS_CODES and os.name == "nt":
        return _WINDOWS_CODES[code & 0xFFFFFFFF]
    return f"exit code {code}"


def _rebuild(reply: FailedReply) -> BaseException:
    """The child's exception as the same class in the parent, or a SpecDeckError saying it."""
    if reply.payload is not None:
        try:
            cls, message, attributes = pickle.loads(reply.payload)  # noqa: S301 - our own child
            error = cls.__new__(cls)
            Exception.__init__(error, message)
            error.__dict__.update(attributes)
            return error
        except Exception:  # noqa: BLE001 - fall through to the plain message
            pass
    return SpecDeckError(f"{reply.kind}: {reply.message}")


# --- the parent side ------------------------------------------------------------------------


class CancelFlag:
    """A cancel flag in shared memory, without a lock.

    ``multiprocessing.Event`` guards its flag with a semaphore: a child killed while it
    polls the event (thousands of times a second) dies holding that semaphore, and the
    parent's next ``set()`` blocks forever. One byte that only the parent writes cannot be
    left locked by a dead child.
    """

    def __init__(self) -> None:
        self._byte = multiprocessing.get_context("spawn").RawValue(ctypes.c_byte, 0)

    def set(self) -> None:
        self._byte.value = 1

    def clear(self) -> None:
        self._byte.value = 0

    def is_set(self) -> bool:
        return bool(self._byte.value)


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
        self._context = multiprocessing.get_context("spawn")
        self._cancel = cancel if cancel is not None else CancelFlag()
        self._process: Any = None
        self._conn: Connection | None = None
        self._log_path: Path | None = None
        self._seq = 0
        self._stage = "idle"
        self._model = ""
        self.info: PairInfo | None = None
        self._loaded: LoadRequest | None = None

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
        handle, log_name = tempfile.mkstemp(prefix="specdeck-engine-", suffix=".log")
        os.close(handle)
        self._log_path = Path(log_name)
        parent_end, child_end = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=child_main, args=(child_end, self._cancel, log_name), name="specdeck-engine"
        )
        process.start()
        child_end.close()  # so that the child's death reads as end-of-file here
        self._process, self._conn = process, parent_end
        _live_hosts.add(self)
        self._stage, self._model = "idle", ""

    def close(self, timeout_s: float = CLOSE_SECONDS) -> None:
        """Ask the child to free its models and exit; kill it if it does not."""
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
        """End the child at once (SIGKILL on POSIX)."""
        if self._process is not None and self._process.is_alive():
            self._process.kill()

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            self._process.join(5)
            with contextlib.suppress(ValueError, AttributeError):
                self._process.close()
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
        self._process = self._conn = self._log_path = None
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
        """Load a pair (restarting the child if it is gone); ``on_progress(file, 0..1)``."""
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
            tokens = self._call(ChatPromptRequest(typed), "rendering the chat template",
                                timeout_s=timeout_s)
        except TimeoutError:
            model = self._pair_name().split(" + ")[0]
            self.kill()
            self._process.join(5)
            self._discard()
            raise ChatTemplateHung(model, timeout_s) from None
        return tuple(tokens)

    def compare(
        self, prompt: Sequence[int], speculative: Sequence[int], baseline: Sequence[int]
    ) -> Any:
        """``app.core.exactness.compare`` on the child's engine (the margin needs the target)."""
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

    # --- plumbing --------------------------------------------------------------------------

    def bench(
        self, request: BenchRequest, on_row: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        self.start()
        files = [request.target.path] + ([request.draft.path] if request.draft else [])
        self._stage, self._model = "loading", Path(files[0]).name
        seq = self._send(request)
        while True:
            reply = self._receive(seq)
            if isinstance(reply, LoadProgress):
                self._model = Path(reply.path).name
                if reply.path == files[-1] and reply.fraction >= 1.0:
                    self._stage, self._model = "benchmarking", " + ".join(
                        Path(f).name for f in files
                    )
                continue
            if isinstance(reply, RowReply):
                if on_row is not None:
                    on_row(reply.row)
                continue
            result = self._finish(reply)
            assert isinstance(result, dict)
            return result

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
        try:
            self._conn.send((self._seq, request))
        except (OSError, ValueError):
            self._crashed()
        return self._seq

    def _finish(self, reply: object) -> Any:
        if isinstance(reply, DoneReply):
            return reply.value
        if isinstance(reply, FailedReply):
            raise _rebuild(reply)
        raise SpecDeckError(f"the engine process sent an unexpected {type(reply).__name__}")

    def _receive(self, seq: int, timeout_s: float | None = None) -> object:
        """The next reply to request ``seq``; replies to abandoned requests are dropped."""
        assert self._conn is not None and self._process is not None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([self._conn, self._process.sentinel], left)
            if not ready:
                raise TimeoutError(f"no answer from the engine process within {timeout_s} s")
            if self._conn in ready or self._conn.poll():
                try:
                    got, reply = self._conn.recv()
                except (EOFError, OSError):
                    self._crashed()
                if got == seq:
                    return reply
                continue
            self._crashed()  # the process ended and nothing is left to read

    def _crashed(self) -> Any:
        process = self._process
        process.join(5)
        code = process.exitcode
        log = self._log_tail()
        stage, model = self._stage, self._model or self._pair_name()
        self._discard()
        raise EngineCrashed(stage, model, describe_exit(code), code, log)

    def _log_tail(self) -> str:
        if self._log_path is None:
            return ""
        try:
            with open(self._log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - LOG_TAIL_BYTES))
                return handle.read(LOG_TAIL_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return ""


# --- the child side ---------------------------------------------------------------------


def _portable_failure(error: BaseException) -> FailedReply:
    payload: bytes | None
    try:
        payload = pickle.dumps((type(error), str(error), dict(vars(error))))
        pickle.loads(payload)  # noqa: S301 - proves the parent can rebuild it
    except Exception:  # noqa: BLE001
        payload = None
    return FailedReply(type(error).__name__, str(error), traceback.format_exc(), payload)


def _device_description(spec: ModelSpec) -> str:
    import llama_cpp

    threads = spec.threads()
    if bool(llama_cpp.llama_supports_gpu_offload()) and spec.n_gpu_layers != 0:
        layers = "all layers" if spec.n_gpu_layers < 0 else f"{spec.n_gpu_layers} layers"
        return f"GPU ({layers}) + CPU {threads} threads"
    return f"CPU · {threads} threads"


class _ChildSession:
    """Runs in the engine process: owns the Engine, answers one request at a time."""

    def __init__(self, conn: Connection, cancel: Any) -> None:
        self.conn = conn
        self.cancel = cancel
        self.engine: Any = None
        self.target_name = ""

    def reply(self, seq: int, message: object) -> None:
        self.conn.send((seq, message))

    def close_engine(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def handle(self, seq: int, request: Request) -> None:
        try:
            value = self.dispatch(seq, request)
        except BaseException as error:  # noqa: BLE001 - every failure goes back as a reply
            if isinstance(error, KeyboardInterrupt | SystemExit):
                raise
            self.reply(seq, _portable_failure(error))
        else:
            self.reply(seq, DoneReply(value))

    def dispatch(self, seq: int, request: Request) -> Any:
        if isinstance(request, LoadRequest):
            return self.load(seq, request)
        if isinstance(request, BenchRequest):
            return self.bench(seq, request)
        engine = self.engine
        if engine is None:
            raise SpecDeckError(
                "No model pair is loaded. Choose one with Change pair… or try the Demo pair."
            )
        if isinstance(request, ChatPromptRequest):
            from app.core.chat import ChatTemplateError, Message

            try:
                return engine.tokenize_chat([Message(r, c) for r, c in request.messages])
            except ChatTemplateError as error:
                raise ChatTemplateError(f"broken chat template in {self.target_name}: "
                                        f"{error}") from error
        if isinstance(request, PlainChatRequest):
            engine.formatter.use_plain()
            return None
        if isinstance(request, GenerateRequest):
            return self.generate(seq, request)
        if isinstance(request, CompareRequest):
            from app.core.exactness import compare

            return compare(request.prompt, request.speculative, request.baseline, engine)
        raise SpecDeckError(f"unknown request {type(request).__name__}")

    def load(self, seq: int, request: LoadRequest) -> PairInfo:
        from app.core.engine import Engine
        from app.core.load_hooks import observing_loads

        self.close_engine()
        last: dict[str, float] = {}

        def progress(path: Path, fraction: float) -> bool:
            key = str(path)
            if fraction <= 0.0 or fraction >= 1.0 or fraction - last.get(key, 0.0) >= PROGRESS_STEP:
                last[key] = fraction
                self.reply(seq, LoadProgress(key, fraction))
            return not self.cancel.is_set()

        use_draft = request.draft if request.draft_source is DraftSource.MODEL else None
        with observing_loads(progress):
            engine = Engine(request.target, use_draft, draft_source=request.draft_source)
        if request.plain_chat:
            engine.formatter.use_plain()
        self.engine = engine
        self.target_name = Path(request.target.path).name
        weights = engine.target.size_bytes + (engine.draft.size_bytes if engine.draft else 0)
        return PairInfo(
            request.target.path,
            use_draft.path if use_draft else None,
            engine.draft_source,
            _device_description(request.target),
            weights,
            engine.n_ctx,
            engine.target.repacking.describe(),
            engine.formatter.plain,
        )

    def bench(self, seq: int, request: BenchRequest) -> dict[str, Any]:
        from app.core.bench import run_bench
        from app.core.load_hooks import observing_loads

        self.close_engine()

        def progress(path: Path, fraction: float) -> bool:
            if fraction <= 0.0 or fraction >= 1.0:
                self.reply(seq, LoadProgress(str(path), fraction))
            return True

        with observing_loads(progress):
            return run_bench(
                request.target, request.draft, list(request.prompts), request.settings,
                source=request.source, on_row=lambda row: self.reply(seq, RowReply(row)),
            )

    def generate(self, seq: int, job: GenerateRequest) -> RunSummary:
        engine = self.engine
        request = job.request
        wanted = [engine.spec_ctx, engine.draft_ctx] if request.speculative else [engine.base_ctx]
        contexts = [c for c in wanted if c is not None]
        for ctx in contexts:  # a long prefill stops on Stop too; removed at the first token
            ctx.set_abort_check(self.cancel.is_set)
        guarded = True
        pending: list[Event] = []
        last = time.perf_counter()
        summary: RunSummary | None = None
        try:
            for event in engine.generate(request, self.cancel.is_set):
                if isinstance(event, RunSummary):
                    summary = event
                    break
                if guarded and isinstance(event, TokenEvent):
                    guarded = False
                    for ctx in contexts:
                        ctx.set_abort_check(None)
                if not job.stream:
                    continue
                pending.append(event)
                now = time.perf_counter()
                if now - last >= BATCH_SECONDS:
                    self.reply(seq, EventsReply(tuple(pending)))
                    pending = []
                    last = now
        except RuntimeError as error:
            if not self.cancel.is_set():
                raise
            for ctx in contexts:  # an aborted decode leaves batches the mirror does not know
                ctx.forget_unrecorded()
            raise GenerationCancelled("stopped while reading the prompt") from error
        finally:
            if guarded:
                for ctx in contexts:
                    ctx.set_abort_check(None)
        if pending:
            self.reply(seq, EventsReply(tuple(pending)))
        if summary is None:
            raise SpecDeckError("the engine ended a run without a summary")
        return summary


def _redirect_stderr(log_path: str) -> None:
    """Native messages (a GGML_ASSERT's text) go to a file the parent reads after a crash."""
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        pass


def child_main(conn: Connection, cancel: Any, log_path: str) -> None:
    """Entry point of the engine process."""
    import faulthandler

    os.environ.setdefault("GGML_NO_BACKTRACE", "1")  # no gdb attach on an abort
    _redirect_stderr(log_path)
    with contextlib.suppress(Exception):
        faulthandler.enable(file=sys.__stderr__ or sys.stderr)
    session = _ChildSession(conn, cancel)
    try:
        while True:
            try:
                seq, request = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                break
            if isinstance(request, CloseRequest):
                break
            session.handle(seq, request)
    finally:
        session.close_engine()


def run_bench_in_child(
    target: ModelSpec,
    draft: ModelSpec | None,
    prompts: Sequence[dict[str, str]],
    settings: Any,
    *,
    source: DraftSource = DraftSource.MODEL,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The benchmark in an engine process; a crash raises ``EngineCrashed`` naming the file."""
    host = EngineHost()
    try:
        return host.bench(BenchRequest(target, draft, tuple(prompts), settings, source), on_row)
    finally:
        host.close()
