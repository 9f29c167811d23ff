"""Event-loop latency while tokens stream: a QTimer probe around one real answer.

A 5 ms precise timer runs on the UI thread while the full main window answers a prompt
(speculative run, then the baseline). Every tick records how late it fired; the lateness
percentiles while tokens stream (both runs) are the UI's responsiveness under streaming,
with a per-phase breakdown ("other": the verdict and the final Markdown render). From a
shell::

    python -m app.devtools.latency_probe --target T.gguf [--draft D.gguf] [--max-tokens N] [PROMPT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROBE_MS = 5


def measure_ui_latency(
    target: str | Path,
    draft: str | Path | None,
    prompt: str,
    max_tokens: int = 512,
    *,
    baseline: bool = True,
    threads: int = 0,
    timeout_s: float = 600.0,
) -> dict[str, float | int | str]:
    """Answer ``prompt`` in an offscreen main window and measure the event loop's lateness."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, Qt, QTimer
    from PySide6.QtWidgets import QApplication

    from app.engine.config import DraftSource
    from app.store.conversations import ConversationStore
    from app.store.settings import Settings, SettingsStore
    from app.ui.main_window import MainWindow

    qt_app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="specdeck-probe-") as scratch:
        store = SettingsStore(Path(scratch) / "config")
        n_ctx = max(4096, max_tokens + 1024)
        store.save(
            Settings(
                max_tokens=max_tokens,
                n_ctx=n_ctx,
                n_threads=threads,
                temperature=0.0,
                baseline=baseline,
                ignore_eos=True,  # a fixed number of tokens to stream
            )
        )
        window = MainWindow(
            settings_store=store,
            conversation_store=ConversationStore(Path(scratch) / "data"),
            autoload=False,
        )
        window.show()
        loop = QEventLoop()
        outcome: dict[str, object] = {}
        gaps: dict[str, list[float]] = {"speculative": [], "baseline": [], "other": []}
        last = [0.0]
        phase = ["other"]

        def tick() -> None:
            now = time.perf_counter()
            if last[0]:
                gaps[phase[0]].append((now - last[0]) * 1000.0 - PROBE_MS)
            last[0] = now

        def streaming(batch: object) -> None:
            phase[0] = batch.run  # type: ignore[attr-defined]

        probe = QTimer()
        probe.setTimerType(Qt.TimerType.PreciseTimer)
        probe.setInterval(PROBE_MS)
        probe.timeout.connect(tick)
        guard = QTimer()
        guard.setSingleShot(True)

        def stop_with(error: str) -> None:
            outcome.setdefault("error", error)
            loop.quit()

        guard.timeout.connect(lambda: stop_with("timed out"))

        def loaded(_message: object) -> None:
            probe.start()
            window.chat.input.setPlainText(prompt)
            window.chat.input.submit()

        def finished(done: object) -> None:
            probe.stop()
            outcome["done"] = done
            loop.quit()

        window.client.batch.connect(streaming)
        window.client.verdict.connect(lambda _v: phase.__setitem__(0, "other"))
        window.pair_loaded.connect(loaded)
        window.answer_finished.connect(finished)
        window.failed.connect(lambda e: stop_with(e.message))
        guard.start(int(timeout_s * 1000))
        source = DraftSource.MODEL if draft else DraftSource.NGRAM
        window.load_pair(str(target), str(draft) if draft else None, source)
        loop.exec()
        guard.stop()
        probe.stop()
        verdict = window.chat.verdict.text()
        window.close()
        window.deleteLater()
        qt_app.processEvents()
    if "error" in outcome:
        raise RuntimeError(f"latency probe failed: {outcome['error']}")
    done = outcome["done"]
    spec, base = done.speculative, done.baseline  # type: ignore[attr-defined]
    streaming_gaps = gaps["speculative"] + gaps["baseline"]
    late = np.maximum(np.array(streaming_gaps or [0.0]), 0.0)
    result: dict[str, float | int | str] = {
        "p50_ms": round(float(np.percentile(late, 50)), 2),
        "p95_ms": round(float(np.percentile(late, 95)), 2),
        "max_ms": round(float(late.max()), 2),
        "samples": len(streaming_gaps),
        "tokens": int(spec.tokens),
        "tok_s": round(float(spec.tok_s), 1),
        "baseline_tok_s": round(float(base.tok_s), 1) if base is not None else 0.0,
        "verdict": verdict,
    }
    for name, values in gaps.items():  # per phase; "other": load end, verdict, final render
        if values:
            clipped = np.maximum(np.array(values), 0.0)
            result[f"{name}_p95_ms"] = round(float(np.percentile(clipped, 95)), 2)
            result[f"{name}_max_ms"] = round(float(clipped.max()), 2)
    return result


def measure_pipe_cost(events: list, per_batch: int = 20, rounds: int = 5) -> dict[str, float]:
    """The pipe's own cost per token, free of the machine's load: recorded events go through
    the engine process's batching (append, clock, pickle, send ``EventsReply`` every
    ``per_batch`` events: about 15 ms at 700 tok/s) into a real pipe drained by a thread
    that unpickles them, as the engine worker does. Upper bound: both ends share one GIL.
    """
    import multiprocessing
    import threading

    from app.engine.events import TokenEvent
    from app.engine.process.protocol import EventsReply

    tokens = max(1, sum(isinstance(e, TokenEvent) for e in events)) * rounds
    sender, receiver = multiprocessing.get_context("spawn").Pipe()
    receiver_cpu: list[float] = []

    def drain() -> None:
        began = time.thread_time()
        while receiver.recv() is not None:
            pass
        receiver_cpu.append(time.thread_time() - began)

    thread = threading.Thread(target=drain)
    thread.start()
    began = time.perf_counter()
    for _ in range(rounds):
        pending: list = []
        for count, event in enumerate(events, start=1):
            pending.append(event)
            time.perf_counter()
            if count % per_batch == 0:
                sender.send((1, EventsReply(tuple(pending))))
                pending = []
        sender.send((1, EventsReply(tuple(pending))))
    child_ms = (time.perf_counter() - began) * 1000.0 / tokens
    sender.send(None)
    thread.join()
    sender.close()
    receiver.close()
    return {
        "pipe_child_ms_per_token": round(child_ms, 4),
        "pipe_parent_cpu_ms_per_token": round(receiver_cpu[0] * 1000.0 / tokens, 4),
    }


def measure_boundary_cost(
    target: str | Path,
    draft: str | Path | None,
    prompt: str,
    max_tokens: int = 2000,
    *,
    threads: int = 1,
    rounds: int = 5,
) -> dict[str, float | int]:
    """Per-token cost of the engine process boundary, in milliseconds.

    The same greedy request runs ``rounds`` times in this process (``Engine.generate``
    consumed directly) and through ``EngineHost`` (batched over the pipe), alternately.
    Each run's cost outside ``llama_decode`` per token, ``(elapsed - decode) / tokens``, is
    measured by the engine's own clock; the child's batching and pickling run between its
    yields, so they are inside that figure. The parent's receive and unpickle cost is its
    CPU time per token while the run streams. The best round of each is kept (a shared
    machine only ever adds time).
    """
    from app.engine.chat_template import Message
    from app.engine.config import DraftSource, GenerationRequest, ModelSpec
    from app.engine.engine import Engine
    from app.engine.events import RunSummary
    from app.engine.process.host import EngineHost, LoadRequest

    target_spec = ModelSpec(str(target), n_ctx=max_tokens + 512, n_threads=threads)
    draft_spec = ModelSpec(str(draft), n_ctx=max_tokens + 512, n_threads=threads) if draft else None
    source = DraftSource.MODEL if draft else DraftSource.NGRAM

    def outside_ms(summary: RunSummary) -> float:
        return (summary.elapsed_s - summary.decode_s) * 1000.0 / max(summary.tokens, 1)

    local = Engine(target_spec, draft_spec, draft_source=source)
    host = EngineHost()
    in_process: list[float] = []
    boundary: list[float] = []
    parent_cpu: list[float] = []
    try:
        host.load(LoadRequest(target_spec, draft_spec, source))
        tokens = local.tokenize_chat([Message("user", prompt)])
        request = GenerationRequest(tokens, max_tokens=max_tokens, ignore_eos=True)
        recorded: list = []
        for _ in range(rounds):
            recorded = list(local.generate(request))
            summary = recorded[-1]
            assert isinstance(summary, RunSummary)
            in_process.append(outside_ms(summary))
            cpu = time.process_time()
            remote = [e for b in host.generate(request) for e in b][-1]
            assert isinstance(remote, RunSummary)
            parent_cpu.append((time.process_time() - cpu) * 1000.0 / max(remote.tokens, 1))
            boundary.append(outside_ms(remote))
            if remote.token_ids != summary.token_ids:
                raise RuntimeError("the engine process answered differently")
    finally:
        host.close()
        local.close()
    return {
        "tokens": max_tokens,
        "in_process_outside_decode_ms_per_token": round(min(in_process), 4),
        "engine_process_outside_decode_ms_per_token": round(min(boundary), 4),
        "added_in_child_ms_per_token": round(min(boundary) - min(in_process), 4),
        "parent_cpu_ms_per_token": round(min(parent_cpu), 4),
        **measure_pipe_cost(recorded[:-1]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--draft")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: every core)")
    parser.add_argument(
        "--boundary",
        action="store_true",
        help="measure the engine process boundary's cost per token instead",
    )
    parser.add_argument("prompt", nargs="?", default="Write a long story about the sea.")
    args = parser.parse_args(argv)
    if args.boundary:
        cost = measure_boundary_cost(
            args.target, args.draft, args.prompt, args.max_tokens, threads=args.threads or 1
        )
        print(json.dumps(cost, indent=2))
        return 0
    result = measure_ui_latency(
        args.target,
        args.draft,
        args.prompt,
        args.max_tokens,
        baseline=not args.no_baseline,
        threads=args.threads,
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
