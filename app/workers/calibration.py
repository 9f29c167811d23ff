"""The wizard's calibration: load the pair in an engine process and time it. Qt-free.

``Calibrate`` runs on its own worker thread (``app.workers.hub_worker.CalibrationClient``)
against a ``Calibrator``, which keeps the engine loaded between calibrations of the same
pair, so Back and Next on the Verify page do not load both models again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.engine.config import GenerationRequest, ModelSpec, SpecConfig
from app.engine.events import RunSummary
from app.engine.process.host import EngineHost, LoadRequest
from app.errors import GenerationCancelled
from app.models.downloads import DownloadCancelled
from app.workers.hub_messages import Calibrated, CalibrationStep
from app.workers.jobs import Stoppable

CALIBRATION_PROMPT = (
    "Write a Python function that returns the n-th Fibonacci number, "
    "then explain in two sentences how it works."
)
CALIBRATION_TOKENS = 64
CALIBRATION_DRAFT_LENGTHS = (4, 8)


class Calibrator:
    """The engine of the last calibrated pair, kept while the pair stays the same."""

    def __init__(self) -> None:
        self._engine: EngineHost | None = None
        self._engine_key: tuple[str, str, int] | None = None

    def engine_for(self, key: tuple[str, str, int], cancel: threading.Event) -> EngineHost:
        """An engine with the pair ``key`` (target path, draft path, context) loaded; a load
        in progress stops once ``cancel`` is set."""
        if self._engine_key != key:
            self.close()
            target, draft, n_ctx = key
            fresh = EngineHost()
            self._engine = fresh
            fresh.load(
                LoadRequest(ModelSpec(target, n_ctx=n_ctx), ModelSpec(draft, n_ctx=n_ctx)),
                on_progress=lambda _path, _fraction: fresh.cancel() if cancel.is_set() else None,
            )
            self._engine_key = key
        assert self._engine is not None
        return self._engine

    def holds(self, key: tuple[str, str, int]) -> bool:
        return self._engine_key == key

    def close(self) -> None:
        engine, self._engine, self._engine_key = self._engine, None, None
        if engine is not None:
            engine.close()


@dataclass(frozen=True)
class Calibrate(Stoppable):
    target_path: str
    draft_path: str
    n_ctx: int

    def run(
        self, calibrator: Calibrator, request_id: int, report: Callable[[CalibrationStep], None]
    ) -> Calibrated:
        """A llama.cpp crash on a freshly downloaded file becomes a message, not the end of
        the app. A cancelled run keeps the process and its models, so Back and Next reuse
        them."""

        def check_cancel() -> None:
            if self.cancel.is_set():
                raise DownloadCancelled("calibration cancelled")

        total = 4 + len(CALIBRATION_DRAFT_LENGTHS)

        def step(index: int, text: str) -> None:
            check_cancel()
            report(CalibrationStep(request_id, index, total, text))

        step(1, "Loading both models")
        began = time.perf_counter()
        key = (self.target_path, self.draft_path, self.n_ctx)
        try:
            host = calibrator.engine_for(key, self.cancel)
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
            if not calibrator.holds(key):  # cancelled while loading: nothing worth keeping
                calibrator.close()
            raise DownloadCancelled("calibration cancelled") from exc
        except BaseException:
            calibrator.close()  # after a failure (or a crash) the engine is not trusted again
            raise
        best_index = max(range(len(trials)), key=lambda i: trials[i].tok_s)
        best = trials[best_index]
        base_tok_s = (first.tok_s + second.tok_s) / 2
        noise = abs(first.tok_s - second.tok_s) / max(first.tok_s, second.tok_s, 1e-9)
        speedup = best.tok_s / base_tok_s if base_tok_s > 0 else 0.0
        return Calibrated(
            request_id,
            best.acceptance_rate,
            best.tok_s,
            base_tok_s,
            speedup,
            CALIBRATION_DRAFT_LENGTHS[best_index],
            load_s,
            tuple((n, t.tok_s) for n, t in zip(CALIBRATION_DRAFT_LENGTHS, trials, strict=True)),
            noise,
        )
