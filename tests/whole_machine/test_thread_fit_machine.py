"""The threads a load chooses on a machine other programs keep busy: measured with a real
load beside it, and carried back from the engine process with the loaded pair."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from app.engine.config import ModelSpec, usable_cores
from app.engine.machine_load import LoadRunning, MachineLoad
from app.engine.process.host import EngineHost, LoadRequest
from app.engine.thread_fit import OtherProgramsMeter, ThreadGovernor, whole_cores


def test_a_core_kept_busy_by_another_program_is_left_to_it() -> None:
    load = MachineLoad("steady", share=0.5, limit_s=30.0)
    cores = len(usable_cores())
    with LoadRunning(load):
        meter = OtherProgramsMeter()
        time.sleep(0.5)  # the window a load's weights take to read
        fit = meter.fit(ModelSpec("t.gguf"))
    loaded = sum(load.duties())  # one core on two, whatever else runs beside it
    assert fit.busy_cores is not None and fit.busy_cores > 0.7 * loaded, fit
    assert fit.threads == max(1, cores - whole_cores(fit.busy_cores))
    if cores >= 2:
        assert fit.threads < cores
    if cores == 2:
        assert fit.threads == 1 and fit.reason.startswith("1 thread of 2 cores: other programs")


@pytest.fixture
def host():
    engine_host = EngineHost()
    yield engine_host
    engine_host.close()


def test_the_loaded_pair_says_which_threads_the_load_chose_and_why(host, tiny_pair) -> None:
    target, draft = tiny_pair
    info = host.load(
        LoadRequest(ModelSpec(str(target), n_ctx=256), ModelSpec(str(draft), n_ctx=256))
    )
    fit = info.threads
    assert fit is not None and fit.cores == len(usable_cores())
    if fit.busy_cores is None:  # a load quicker than a tenth of a second keeps every core
        assert fit.threads == fit.cores and "too quickly" in fit.reason, fit
    else:
        assert fit.threads == max(1, fit.cores - whole_cores(fit.busy_cores))
    assert f"{fit.threads} thread" in fit.reason and f"{fit.threads} thread" in info.device
    info = host.load(LoadRequest(ModelSpec(str(target), n_ctx=256, n_threads=3), None))
    assert info.threads is not None and info.threads.threads == 3
    assert info.threads.reason == "3 threads: set in the settings" and "3 threads" in info.device


def test_the_app_that_started_the_engine_process_is_not_another_program() -> None:
    """An engine process forked by a fork server has the server as its parent: the app's
    own work (here a process spinning a core) is left out because the launch names it."""
    app = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        named, unnamed = OtherProgramsMeter(app.pid), OtherProgramsMeter()
        time.sleep(0.5)
        without_app, _ = named.busy_cores()
        with_app, _ = unnamed.busy_cores()
    finally:
        app.kill()
        app.wait(10)
    assert without_app is not None and with_app is not None
    assert with_app - without_app > 0.5, (with_app, without_app)


def test_passes_go_down_to_one_thread_while_other_programs_keep_every_core_busy(
    smollm2_pair,
) -> None:
    """Both cores held by other programs for longer than a burst: the next passes run on one
    thread, the answer is the one a quiet machine gives, and its summary says how few threads
    it went down to; quiet again, the passes get every core back."""
    from app.engine.config import GenerationRequest
    from app.engine.engine import Engine
    from app.engine.events import RunSummary

    cores = len(usable_cores())
    if cores < 2:
        pytest.skip("one core: there are no fewer threads to go down to")
    target, draft = smollm2_pair
    engine = Engine(
        ModelSpec(str(target), n_ctx=512),
        ModelSpec(str(draft), n_ctx=512),
        threads=OtherProgramsMeter(),
    )

    def answer() -> RunSummary:
        prompt = engine.tokenize("The history of the printing press")
        request = GenerationRequest(prompt, max_tokens=48, ignore_eos=True)
        return [e for e in engine.generate(request) if isinstance(e, RunSummary)][-1]

    try:
        assert engine.governor is not None and engine.thread_fit.threads == cores
        assert engine.thread_fit.follows  # the settings panel says so
        quiet = answer()
        with LoadRunning(MachineLoad("steady", share=1.0, limit_s=60.0)):
            time.sleep(ThreadGovernor.SUSTAIN_S + 0.5)  # a load held, not a burst
            busy = answer()
        assert busy.token_ids == quiet.token_ids
        assert busy.fewest_threads is not None and busy.fewest_threads < cores, busy
        time.sleep(0.3)
        answer()
        assert engine.spec_ctx.threads == engine.draft_ctx.threads == cores
    finally:
        engine.close()
