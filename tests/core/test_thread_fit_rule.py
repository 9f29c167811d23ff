"""The threads a load chooses: the cores other programs leave free, the settings' count kept
as set, SpecDeck's own CPU use never counted against it (no process started: fast tier)."""

from __future__ import annotations

import time

import pytest

from app.engine.config import ModelSpec, usable_cores
from app.engine.thread_fit import (
    MIN_WINDOW_S,
    OtherProgramsMeter,
    busy_cpu_seconds,
    fit_threads,
    unmeasured_fit,
    whole_cores,
    with_threads,
)
from tests.cores import held_to_one_core, needs_affinity

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [
        (2, 0.0, 2),
        (2, 0.4, 2),
        (2, 0.5, 2),  # half a core rounds down: the core counts as free
        (2, 0.6, 1),
        (2, 1.0, 1),
        (2, 1.5, 1),
        (2, 2.0, 1),  # never fewer than one
        (2, 7.0, 1),
        (8, 2.49, 6),
        (8, 2.5, 6),
        (8, 2.51, 5),
        (1, 1.0, 1),
    ],
)
def test_threads_are_the_cores_less_those_other_programs_keep_busy(
    cores: int, busy: float, threads: int
) -> None:
    fit = fit_threads(cores, busy)
    assert (fit.threads, fit.cores, fit.busy_cores) == (threads, cores, busy)


def test_the_reason_says_the_choice_in_plain_words() -> None:
    assert fit_threads(2, 0.2).reason == "2 threads: all 2 cores free when the pair loaded"
    assert fit_threads(1, 0.0).reason == "1 thread: the one core free when the pair loaded"
    assert fit_threads(2, 1.0).reason == (
        "1 thread of 2 cores: other programs kept 1.0 core busy when the pair loaded"
    )
    assert fit_threads(8, 2.7).reason == (
        "5 threads of 8 cores: other programs kept 2.7 cores busy when the pair loaded"
    )


def test_threads_set_in_the_settings_are_kept_however_busy_the_machine() -> None:
    fit = fit_threads(2, 2.0, set_threads=4)
    assert fit.threads == 4 and fit.reason == "4 threads: set in the settings"
    assert fit_threads(2, None, set_threads=1).reason == "1 thread: set in the settings"


def test_a_window_too_short_to_judge_keeps_every_core() -> None:
    fit = fit_threads(4, 3.0, window_s=MIN_WINDOW_S / 2)
    assert fit.threads == 4 and fit.busy_cores is None
    assert "too quickly to judge" in fit.reason


def test_a_machine_that_does_not_say_how_busy_it_is_keeps_every_core() -> None:
    fit = fit_threads(4, None)
    assert fit.threads == 4 and "could not be read" in fit.reason


def test_the_fitted_count_reaches_only_specs_that_leave_it_to_specdeck() -> None:
    fit = fit_threads(4, 3.0)
    assert with_threads(ModelSpec("t.gguf"), fit).threads() == 1
    assert with_threads(ModelSpec("t.gguf", n_threads=3), fit).threads() == 3


@needs_affinity
def test_a_process_held_to_one_core_runs_its_passes_on_one_thread() -> None:
    """``taskset``, a container's cpuset or a test worker's core: the default threads are the
    cores this process may use, not the machine's (a second thread would spin on a core it
    does not have)."""
    with held_to_one_core() as allowed:
        assert usable_cores() == [min(allowed)]
        assert ModelSpec("t.gguf").threads() == 1 == unmeasured_fit(ModelSpec("t.gguf")).threads
    assert ModelSpec("t.gguf").threads() == len(allowed)


def test_specdecks_own_cpu_use_does_not_count_as_other_programs() -> None:
    """A core of this process's own work (the engine loading, the window busy) is left out:
    the meter reports a core less than the machine's busy time over the same window."""
    cores = usable_cores()
    machine_before = busy_cpu_seconds(cores)
    meter = OtherProgramsMeter()
    began = time.perf_counter()
    while time.perf_counter() - began < 0.3:  # one core of SpecDeck's own work
        pass
    others, window_s = meter.busy_cores()
    machine_after = busy_cpu_seconds(cores)
    assert others is not None and machine_before is not None and machine_after is not None
    machine = (machine_after - machine_before) / window_s
    assert machine - others > 0.7, (machine, others)
    fit = meter.fit(ModelSpec("t.gguf"))
    assert fit.threads == max(1, len(cores) - whole_cores(fit.busy_cores or 0.0))


def test_an_engine_runs_every_context_on_the_threads_it_chose(tiny_pair) -> None:
    from app.engine.engine import Engine

    target, draft = tiny_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=256),
        ModelSpec(str(draft), n_ctx=256),
        threads=OtherProgramsMeter(),
    )
    try:
        fit = engine.thread_fit
        assert engine.target_spec.n_threads == engine.draft_spec.n_threads == fit.threads
        assert engine.spec_ctx.threads == engine.draft_ctx.threads == fit.threads
        assert engine.base_ctx.threads == fit.threads
    finally:
        engine.close()
    engine = Engine(ModelSpec(str(target), n_ctx=256, n_threads=1), None)
    try:
        assert engine.thread_fit.reason == "1 thread: set in the settings"
        assert engine.spec_ctx.threads == 1
    finally:
        engine.close()


class _Window:
    """A stand-in for OtherProgramsMeter on a simulated clock: each window lasts a second
    and reads the next of ``readings``."""

    def __init__(self, readings: list[float | None], started: float = -1000.0) -> None:
        self.readings = readings
        self.started = started

    def again(self) -> _Window:
        return _Window(self.readings, self.started + 1.0)

    def busy_cores(self) -> tuple[float | None, float]:
        return self.readings.pop(0), 1.0


def test_threads_go_down_for_a_load_other_programs_hold_and_up_as_soon_as_it_ends() -> None:
    from app.engine.thread_fit import ThreadGovernor

    assert ThreadGovernor.SUSTAIN_S == 4.0  # the readings below are one second apart
    busy, quiet = 1.2, 0.1
    readings: list[float | None] = [busy] * 5 + [quiet] + [busy, busy, None, quiet, 0.6]
    governor = ThreadGovernor(_Window(list(readings)), cores=2, threads=2)  # type: ignore[arg-type]
    governor.begin()
    changes = [governor.tick() for _ in readings]
    # a core held for four seconds: one thread; held on: no change; free again: both cores
    # at once; a three-second burst (its middle unreadable) changes nothing
    assert changes == [None, None, None, 1, None, 2, None, None, None, None, None]
    assert governor.threads == 2 and governor.fewest == 1
    governor.begin()
    assert governor.fewest == 2  # a new answer counts from the threads it starts on


def test_a_window_still_open_reads_nothing() -> None:
    from app.engine.thread_fit import ThreadGovernor

    window = _Window([1.2], started=time.perf_counter() + 60.0)  # a window just begun
    governor = ThreadGovernor(window, cores=2, threads=2)  # type: ignore[arg-type]
    governor._meter = window
    assert governor.tick() is None and window.readings == [1.2]
