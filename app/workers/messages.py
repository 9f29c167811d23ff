"""What the window and the engine worker say to each other: typed requests and replies.

Qt-free, so the session logic above the worker (``app.workers.chat_session``) and the tests
can use them without a display. Each payload is a frozen dataclass tagged with its request
id; ``describe_error`` turns any failure into a title and a message a person can act on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from app.engine.config import DraftSource, ModelSpec
from app.engine.events import Event, RunSummary
from app.engine.exactness import Comparison
from app.engine.process.host import EngineCrashed, EngineUnresponsive, PairInfo
from app.errors import (
    ContextOverflowError,
    GenerationCancelled,
    ModelLoadError,
    SpecDeckError,
)
from app.gguf.compat import IncompatiblePairError
from app.remote.chat import RemotePair
from app.remote.client import RemoteError
from app.store.settings import Settings

TIMING_RULE = (
    "Runs one after the other: the baseline starts when the speculative answer is done, "
    "so each tok/s comes from its own compute."
)
# --- requests (UI -> worker) ---------------------------------------------------------------


@dataclass(frozen=True)
class LoadPair:
    target: ModelSpec  # with demo=True only n_ctx / n_gpu_layers are used
    draft: ModelSpec | None
    draft_source: DraftSource = DraftSource.MODEL
    demo: bool = False
    remote: RemotePair | None = None  # a server to chat with instead of the local engine


@dataclass(frozen=True)
class ChatJob:
    messages: tuple[dict[str, str], ...]
    settings: Settings
    baseline: bool = True
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)


# --- replies (worker -> UI) ----------------------------------------------------------------


@dataclass(frozen=True)
class Busy:
    request_id: int
    text: str
    progress: float | None = None  # 0..1 while a model loads


@dataclass(frozen=True)
class PairLoaded:
    request_id: int
    pair: PairInfo  # what the engine process loaded, as it reported it
    load_s: float
    restored: bool = False  # the pair that was loaded, back after a newer one failed to load
    remote: RemotePair | None = None  # the chat streams from this server


@dataclass(frozen=True)
class EventBatch:
    request_id: int
    run: str  # "speculative" | "baseline"
    events: tuple[Event, ...]
    elapsed_s: float  # since this run started
    tokens: int  # tokens produced by this run so far


@dataclass(frozen=True)
class Verdict:
    request_id: int
    comparison: Comparison | None  # None when no baseline ran to the end; text: exactness.judge


@dataclass(frozen=True)
class JobDone:
    request_id: int
    cancelled: bool
    speculative: RunSummary | None
    baseline: RunSummary | None
    prompt_tokens: int


@dataclass(frozen=True)
class WorkerError:
    request_id: int
    title: str
    message: str
    detail: str = ""
    can_reload: bool = False  # the engine process died; reloading the pair brings it back
    unloaded: bool = False  # a load failed and no pair is loaded any more


def describe_error(error: BaseException) -> tuple[str, str]:
    """A title and a message a person can act on."""
    if isinstance(error, EngineCrashed):
        return describe_crash(error)
    if isinstance(error, GenerationCancelled):
        return "Stopped", str(error)
    if isinstance(error, RemoteError):
        return "Remote server", str(error)
    if isinstance(error, IncompatiblePairError):
        return "Incompatible pair", f"{error}. {error.advice}"
    if isinstance(error, ContextOverflowError):
        return "Context full", str(error)
    if isinstance(error, ModelLoadError):
        return "Model could not be loaded", str(error)
    if isinstance(error, SpecDeckError):
        return "SpecDeck", str(error)
    if isinstance(error, MemoryError):
        return "Out of memory", (
            "The models do not fit in memory. Lower the context size or the GPU layers, "
            "or choose smaller models."
        )
    if isinstance(error, FileNotFoundError):
        return "File not found", f"{error}. Choose the model files again with Change pair…"
    return "Unexpected error", f"{type(error).__name__}: {error}"


def describe_crash(crash: EngineCrashed) -> tuple[str, str]:
    if isinstance(crash, EngineUnresponsive):
        return stopped_engine(crash.reason, loading=crash.stage == "loading")
    if crash.stage == "loading":
        return "Model crashed llama.cpp", (
            f"llama.cpp crashed while loading {crash.model} ({crash.how}). The file is damaged "
            "or not supported by this llama.cpp build; choose another one with Change pair…"
            + (f" llama.cpp said: {_said(crash)}" if _said(crash) else "")
        )
    stage = {
        "prefill": "reading the prompt",
        "generating": "generating the answer",
        "idle": "idle",
    }.get(crash.stage, crash.stage)
    return "The engine crashed", (
        f"The engine process died while {stage} with {crash.model}: {crash.how}. "
        "The window, the conversation and your typed text are kept; click Reload pair "
        "to start the engine again."
    )


def stopped_engine(reason: str, *, loading: bool = False) -> tuple[str, str]:
    """SpecDeck itself ended the engine process; ``reason`` says why."""
    then = (
        "Load the pair again, or choose another one with Change pair…"
        if loading
        else "The window, the conversation and your typed text are kept; click Reload pair "
        "to start the engine again."
    )
    return "The engine was stopped", f"The engine process {reason}. {then}"


def _said(crash: EngineCrashed) -> str:
    text = str(crash)
    return text.split("llama.cpp said: ", 1)[1] if "llama.cpp said: " in text else ""
