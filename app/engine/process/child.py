"""The engine process itself: owns the ``Engine`` and answers one request at a time.

Started by ``app.engine.process.host.EngineHost`` (``engine_start_method``); ``child_main`` is
its entry point. Native messages (a ``GGML_ASSERT``'s text) go to a log file the parent reads
after a crash.

The process never outlives its parent: a watcher thread waits on the parent's sentinel (a
pipe that reads end-of-file when the parent dies, on Windows its process handle) and ends
this process at once, even in the middle of an answer or a hung chat template; on Linux the
kernel's parent-death signal backs it up. Ctrl-C in a terminal reaches the whole process
group: the parent handles it and closes this process, which ignores SIGINT.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from app.engine.config import DraftSource, ModelSpec
from app.engine.events import Event, RunSummary, TokenEvent
from app.engine.llama.hardware import gpu_offload
from app.engine.process.logs import ChildLog
from app.engine.process.protocol import (
    BATCH_SECONDS,
    PROCESS_NAME,
    PROGRESS_STEP,
    BenchRequest,
    CancelFlag,
    ChatPromptRequest,
    ChildLaunch,
    CloseRequest,
    CompareRequest,
    DoneReply,
    EventsReply,
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
    portable_failure,
)
from app.engine.thread_fit import OtherProgramsMeter
from app.errors import GenerationCancelled, SpecDeckError


def _device_description(spec: ModelSpec) -> str:
    count = spec.threads()
    threads = f"{count} thread" if count == 1 else f"{count} threads"
    if gpu_offload() and spec.n_gpu_layers != 0:
        layers = "all layers" if spec.n_gpu_layers < 0 else f"{spec.n_gpu_layers} layers"
        return f"GPU ({layers}) + CPU {threads}"
    return f"CPU · {threads}"


class _ChildSession:
    """Runs in the engine process: owns the Engine, answers one request at a time."""

    def __init__(self, conn: Connection, cancel: CancelFlag, app_pid: int | None = None) -> None:
        self.conn = conn
        self.cancel = cancel
        self.engine: Any = None
        self.target_name = ""
        # how busy other programs keep the machine, from this process's start to the first
        # load's contexts (later loads open their own window when they arrive)
        self.app_pid = app_pid
        self.window: OtherProgramsMeter | None = OtherProgramsMeter(app_pid)

    def threads_window(self) -> OtherProgramsMeter:
        """The window a load fits its threads over: open since this process started when
        this is its first request, else opened now."""
        window, self.window = self.window or OtherProgramsMeter(self.app_pid), None
        return window

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
            self.reply(seq, portable_failure(error))
        else:
            self.reply(seq, DoneReply(value))
        finally:
            self.window = None  # a later load measures the machine as it is then

    def dispatch(self, seq: int, request: Request) -> Any:
        if isinstance(request, LoadRequest):
            return self.load(seq, request)
        if isinstance(request, BenchRequest):
            return self.bench(seq, request)
        if isinstance(request, PeakMemoryRequest):
            from app.engine.bench import peak_rss_bytes

            return peak_rss_bytes()
        engine = self.engine
        if engine is None:
            raise SpecDeckError(
                "No model pair is loaded. Choose one with Change pair… or try the Demo pair."
            )
        if isinstance(request, ChatPromptRequest):
            from app.engine.chat_template import ChatTemplateError, Message

            try:
                return engine.tokenize_chat([Message(r, c) for r, c in request.messages])
            except ChatTemplateError as error:
                raise ChatTemplateError(
                    f"broken chat template in {self.target_name}: {error}"
                ) from error
        if isinstance(request, TokenizeRequest):
            # special tokens in the text are parsed, as llama-server does for a raw prompt
            return tuple(engine.target.tokenize(request.text, add_special=engine.target.add_bos))
        if isinstance(request, PlainChatRequest):
            engine.formatter.use_plain()
            return None
        if isinstance(request, GenerateRequest):
            return self.generate(seq, request)
        if isinstance(request, CompareRequest):
            from app.engine.exactness import compare

            return compare(request.prompt, request.speculative, request.baseline, engine)
        raise SpecDeckError(f"unknown request {type(request).__name__}")

    def load(self, seq: int, request: LoadRequest) -> PairInfo:
        from app.engine.engine import Engine
        from app.engine.llama.load_hooks import observing_loads

        self.close_engine()
        last: dict[str, float] = {}

        def progress(path: Path, fraction: float) -> bool:
            key = str(path)
            if fraction <= 0.0 or fraction >= 1.0 or fraction - last.get(key, 0.0) >= PROGRESS_STEP:
                last[key] = fraction
                self.reply(seq, LoadProgress(key, fraction))
            return not self.cancel.is_set()

        use_draft = request.draft if request.draft_source is DraftSource.MODEL else None
        window = self.threads_window()
        with observing_loads(progress):
            engine = Engine(
                request.target, use_draft, draft_source=request.draft_source, threads=window
            )
        if request.plain_chat:
            engine.formatter.use_plain()
        self.engine = engine
        self.target_name = Path(request.target.path).name
        weights = engine.target.size_bytes + (engine.draft.size_bytes if engine.draft else 0)
        return PairInfo(
            request.target.path,
            use_draft.path if use_draft else None,
            engine.draft_source,
            _device_description(engine.target_spec),
            weights,
            engine.n_ctx,
            engine.target.repacking.describe(),
            engine.formatter.plain,
            engine.thread_fit,
        )

    def bench(self, seq: int, request: BenchRequest) -> dict[str, Any]:
        from app.engine.bench import run_bench
        from app.engine.llama.load_hooks import observing_loads

        self.close_engine()
        window = self.threads_window()

        def progress(path: Path, fraction: float) -> bool:
            if fraction <= 0.0 or fraction >= 1.0:
                self.reply(seq, LoadProgress(str(path), fraction))
            return True

        with observing_loads(progress):
            return run_bench(
                request.target,
                request.draft,
                list(request.prompts),
                request.settings,
                source=request.source,
                on_row=lambda row: self.reply(seq, RowReply(row)),
                on_stage=lambda stage: self.reply(seq, StageReply(stage)),
                threads=window,
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


def _redirect_stderr(log: ChildLog) -> None:
    """Native messages (a GGML_ASSERT's text) go to a file the parent reads after a crash."""
    try:
        fd = log.open()
        os.dup2(fd, 2)
        os.close(fd)
    except OSError:
        pass


PARENT_GONE_EXIT = 3


def _die_with_parent() -> None:
    """End this process when its parent ends, however the parent ends (SIGKILL included)."""
    if sys.platform.startswith("linux"):
        # The signal comes when the parent *thread* that started this process ends: every
        # EngineHost is closed by the thread that started it, so it never fires early.
        with contextlib.suppress(OSError, AttributeError):
            pr_set_pdeathsig = 1
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    parent = multiprocessing.parent_process()
    if parent is None:  # started some other way (a test calling child_main directly)
        return

    def watch() -> None:
        wait([parent.sentinel])  # returns once the parent is gone (it may be already)
        os._exit(PARENT_GONE_EXIT)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _take_the_parents_place(launch: ChildLaunch) -> None:
    """The parent's environment and working directory as they are now (a forkserver's child
    starts with the server's), and the process named as the engine (``ps``, ``top``)."""
    if launch.environ:
        os.environ.clear()
        os.environ.update(launch.environ)
    if launch.cwd:
        with contextlib.suppress(OSError):
            os.chdir(launch.cwd)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            pr_set_name = 15
            name = ctypes.create_string_buffer(PROCESS_NAME.encode()[:15])
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_name, name, 0, 0, 0)


def child_main(launch: ChildLaunch) -> None:
    """Entry point of the engine process."""
    import faulthandler

    from app.engine.chat_template import limit_template_memory

    _take_the_parents_place(launch)
    _die_with_parent()
    with contextlib.suppress(ValueError, OSError):  # the parent turns Ctrl-C into a close
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")  # no gdb attach on an abort
    _redirect_stderr(launch.log)
    limit_template_memory()  # this process does nothing else while a template runs
    with contextlib.suppress(Exception):
        faulthandler.enable(file=sys.__stderr__ or sys.stderr)
    conn = launch.conn
    session = _ChildSession(conn, launch.cancel, launch.app_pid)
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
