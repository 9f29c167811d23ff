"""The engine process's protocol: typed requests and replies, and the errors they become.

Requests go parent -> child as ``(sequence number, request)``; replies come back tagged with
the number of the request they answer, so replies to an abandoned request are dropped.
Every payload is a frozen dataclass (pickled by ``multiprocessing.connection``).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from app.engine.config import DraftSource, GenerationRequest, ModelSpec
from app.engine.events import Event
from app.engine.process.logs import ChildLog
from app.engine.thread_fit import ThreadFit
from app.errors import SpecDeckError

BATCH_SECONDS = 0.015  # events cross the pipe, and reach the UI thread, at most ~65 times a second
TEMPLATE_SECONDS = 5.0  # a chat template that compiles and renders longer is broken
STOP_GRACE_SECONDS = 10.0  # an engine process that ignores Cancel/Stop this long is ended
CLOSE_SECONDS = 10.0
LOG_TAIL_BYTES = 4096
PROGRESS_STEP = 0.01  # send load progress when it moved by 1 %
PROCESS_NAME = "specdeck-engine"
RENDERING = "rendering the chat template"  # the stage bounded by TEMPLATE_SECONDS
BENCHMARKING = "benchmarking"

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
class TokenizeRequest:
    """Raw text (an OpenAI ``/v1/completions`` prompt) to target tokens, no chat template."""

    text: str


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
    """``app.engine.bench.run_bench`` in the engine process: its own Engine, its own timings."""

    target: ModelSpec
    draft: ModelSpec | None
    prompts: tuple[dict[str, str], ...]
    settings: Any  # app.engine.bench.BenchSettings (imported lazily: it loads llama.cpp)
    source: DraftSource


@dataclass(frozen=True)
class PeakMemoryRequest:
    """The engine process's peak resident memory in bytes (None where the OS does not say)."""


@dataclass(frozen=True)
class CloseRequest:
    pass


Request = (
    LoadRequest
    | ChatPromptRequest
    | TokenizeRequest
    | PlainChatRequest
    | GenerateRequest
    | CompareRequest
    | BenchRequest
    | PeakMemoryRequest
    | CloseRequest
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
    threads: ThreadFit | None = None  # the CPU threads the load chose and why (None: remote)


@dataclass(frozen=True)
class LoadProgress:
    path: str
    fraction: float  # 0..1 of this file


@dataclass(frozen=True)
class RowReply:
    row: dict[str, Any]


@dataclass(frozen=True)
class StageReply:
    """The child moved on to ``stage`` within a long request (a benchmark): while it is
    ``RENDERING`` the parent holds it to ``TEMPLATE_SECONDS``."""

    stage: str


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
        said = f' llama.cpp said: "{_last_line(log)}".' if _last_line(log) else ""
        hint = (
            " The file is damaged or not supported by this llama.cpp build."
            if stage == "loading"
            else ""
        )
        super().__init__(
            f"the engine process (llama.cpp) died while {_stage_words(stage)} "
            f"{model}: {how}.{said}{hint}"
        )


class EngineUnresponsive(EngineCrashed):
    """SpecDeck ended an engine process that ignored Cancel or Stop (stuck in native code,
    or stopped by a debugger or SIGSTOP) for ``STOP_GRACE_SECONDS``."""

    def __init__(
        self, stage: str, model: str, seconds: float, exit_code: int | None, log: str
    ) -> None:
        self.stage, self.model, self.exit_code, self.log = stage, model, exit_code, log
        request = "Stop" if stage in ("prefill", "generating") else "Cancel"
        self.reason = (
            f"did not respond to {request} within {seconds:.0f} s while "
            f"{_stage_words(stage)} {model}, so SpecDeck ended it"
        )
        self.how = f"ended by SpecDeck after ignoring {request} for {seconds:.0f} s"
        SpecDeckError.__init__(self, f"the engine process {self.reason}")


class ChatTemplateHung(SpecDeckError):
    def __init__(self, model: str, seconds: float) -> None:
        self.model = model
        super().__init__(
            f"broken chat template in {model}: rendering did not finish within {seconds:.0f} s"
        )


class EngineNotRunning(SpecDeckError):
    pass


def _stage_words(stage: str) -> str:
    return {
        "loading": "loading",
        "prefill": "reading the prompt (prefill) with",
        "generating": "generating with",
        "comparing": "checking exactness with",
        RENDERING: "rendering the chat template of",
        "idle": "idle, holding",
        BENCHMARKING: "benchmarking",
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


def rebuild_error(reply: FailedReply) -> BaseException:
    """The child's exception as the same class in the parent, or a SpecDeckError saying it."""
    if reply.payload is not None:
        try:
            cls, message, attributes = pickle.loads(reply.payload)  # noqa: S301 - our own child
            error = cls.__new__(cls)
            Exception.__init__(error, message)
            error.__dict__.update(attributes)
            if not message or _text(error):
                return error
            # a class that keeps its words in fields of its own (UnicodeEncodeError) reads
            # empty when rebuilt from its message: the CLI said "error: " and nothing more
        except Exception:  # noqa: BLE001 - fall through to the plain message
            pass
    return SpecDeckError(f"{reply.kind}: {reply.message}")


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - a half-built exception may not say anything
        return ""


def portable_failure(error: BaseException) -> FailedReply:
    payload: bytes | None
    try:
        payload = pickle.dumps((type(error), str(error), dict(vars(error))))
        pickle.loads(payload)  # noqa: S301 - proves the parent can rebuild it
    except Exception:  # noqa: BLE001
        payload = None
    return FailedReply(type(error).__name__, str(error), traceback.format_exc(), payload)


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


@dataclass(frozen=True)
class ChildLaunch:
    """What the engine process starts with: ``EngineHost`` builds it, ``child_main`` reads it.

    Pickled by the start method, which hands the pipe end, the shared cancel byte and the open
    log over to the child. A forkserver's child is forked from a process started earlier, so
    it also gets the environment and working directory the parent has now, as a spawned one
    would.
    """

    conn: Connection  # the child's end of the duplex pipe
    cancel: CancelFlag  # written by the parent only
    log: ChildLog  # the child's stderr (native messages) goes here; the parent reads its tail
    environ: tuple[tuple[str, str], ...] = ()
    cwd: str = ""
    app_pid: int | None = None  # the process that started it (a fork server's child's parent
    # is the server): its CPU time is SpecDeck's own when threads are fitted
