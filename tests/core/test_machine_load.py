"""The busy machine the bench can make: seeded, bounded, and really busy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.engine.machine_load import LoadRunning, MachineLoad
from tests.cores import held_to_one_core, needs_affinity
from tests.processes import run_app


def test_loads_are_read_from_their_words_and_wrong_words_are_refused() -> None:
    assert MachineLoad.parse("bursts") == MachineLoad("bursts", seed=0)
    assert MachineLoad.parse("bursts:7") == MachineLoad("bursts", seed=7)
    assert MachineLoad.parse("steady:0.25") == MachineLoad("steady", share=0.25)
    for wrong in ("busy", "bursts:x", "bursts:-1", "steady:0", "steady:1.5", "steady:half"):
        with pytest.raises(ValueError):
            MachineLoad.parse(wrong)


def test_a_seed_gives_the_same_bursts_every_time_and_another_seed_others() -> None:
    load = MachineLoad("bursts", seed=3, limit_s=120.0)
    spans = load.schedule()
    assert spans == load.schedule()
    assert spans != MachineLoad("bursts", seed=4, limit_s=120.0).schedule()
    assert spans[-1][1] <= 120.0
    busy = [end - start for start, end in spans[:-1]]
    gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:], strict=False)]
    assert all(0.2 <= s <= 3.0 for s in busy) and all(0.2 <= g <= 3.0 for g in gaps)


def test_a_steady_share_is_whole_cores_and_one_duty_cycle() -> None:
    assert MachineLoad("steady", share=0.5, cores=2).duties() == [1.0]
    assert MachineLoad("steady", share=0.75, cores=2).duties() == [1.0, 0.5]
    assert MachineLoad("steady", share=1.0, cores=4).duties() == [1.0] * 4


@needs_affinity
def test_a_load_counts_the_cores_its_processes_may_run_on() -> None:
    """Its processes inherit this process's cores (``taskset``, a cpuset, a test worker's
    core): one per core it may use, not per core of the machine, which would pile several
    spinning processes onto each of them."""
    with held_to_one_core() as allowed:
        assert MachineLoad("bursts").core_count == 1
        assert MachineLoad("steady", share=1.0).duties() == [1.0]
        assert MachineLoad("bursts").describe().startswith("bursts (seed 0): the one core busy")
    assert MachineLoad("bursts").core_count == len(allowed)
    assert MachineLoad("bursts", cores=3).core_count == 3


def test_a_load_keeps_its_cores_busy_while_held_and_is_gone_after() -> None:
    """CPU time measured while held: a process that only slept would use none of it (the
    share it gets depends on what else runs, so only 'some' is asserted here)."""
    load = MachineLoad("steady", share=1.0, cores=1, limit_s=30.0)
    with LoadRunning(load) as running:
        workers = [psutil.Process(p.pid) for p in running._processes]
        before = sum(sum(w.cpu_times()[:2]) for w in workers)
        time.sleep(1.5)
        used = sum(sum(w.cpu_times()[:2]) for w in workers) - before
    assert len(workers) == 1
    assert used > 0.1, f"the load used only {used:.2f} s of CPU in 1.5 s"
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


def test_a_load_ends_by_itself_at_its_limit() -> None:
    load = MachineLoad("bursts", seed=1, limit_s=1.0, cores=1)
    with LoadRunning(load) as running:
        process = running._processes[0]
        process.join(10.0)
        assert not process.is_alive()
        assert process.exitcode == 0


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_load_ends_when_the_program_that_started_it_is_killed(tmp_path: Path) -> None:
    script = (
        "import json, os, sys, time\n"
        "from app.engine.machine_load import LoadRunning, MachineLoad\n"
        "running = LoadRunning(MachineLoad('steady', share=1.0, cores=1, limit_s=60)).__enter__()\n"
        "print(json.dumps([p.pid for p in running._processes]), flush=True)\n"
        "time.sleep(60)\n"
    )
    starter = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert starter.stdout is not None
        pids = json.loads(starter.stdout.readline())
        starter.kill()
        starter.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in pids):
            time.sleep(0.05)
        alive = [p for p in pids if psutil.pid_exists(p)]
        assert not alive or all(psutil.Process(p).status() == psutil.STATUS_ZOMBIE for p in alive)
    finally:
        starter.kill()


def test_bench_busy_gives_quiet_and_busy_figures_in_one_run(
    tiny_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    target, draft = tiny_pair
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "the code of the"}\n{"id": "b", "prompt": "hi"}\n')
    out = tmp_path / "out.json"
    done, _ = run_app(
        ["bench", "--target", str(target), "--draft", str(draft), "--threads", "1",
         "--max-tokens", "12", "--rounds", "1", "--max-rounds", "1", "--prompts", str(prompts),
         "--json", str(out), "--busy", "steady:0.5"],
        timeout_s=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    quiet, busy = result["prompts"], result["busy"]["prompts"]
    assert [r["id"] for r in quiet] == [r["id"] for r in busy] == ["a", "b"]
    for row, quiet_row in zip(busy, quiet, strict=True):
        assert row["busy"] and row["quiet_speedup"] == quiet_row["speedup"]
    assert result["busy"]["load"].startswith("steady: 50% of")
    assert result["busy"]["aggregate"]["prompts"] == 2
    assert "median_speedup_vs_quiet" in result["busy"]["aggregate"]
    assert result["lineage"]["settings"]["busy"]["kind"] == "steady"
    assert "[busy] a:" in done.stderr


def test_bench_refuses_a_load_it_cannot_read(tiny_pair: tuple[Path, Path], tmp_path: Path) -> None:
    target, draft = tiny_pair
    done, _ = run_app(
        ["bench", "--target", str(target), "--draft", str(draft), "--prompts", "none.jsonl",
         "--json", str(tmp_path / "o.json"), "--busy", "noisy"],
        timeout_s=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--busy: a machine load is bursts, bursts:SEED or steady:SHARE" in done.stderr


def test_the_busy_machine_tool_loads_for_a_while_or_around_a_command() -> None:
    """Its own --seconds is read before "--"; what follows "--" is the command, whole."""
    tool = [sys.executable, "-m", "app.devtools.busy_machine"]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*tool, *words], cwd=root, env=env, capture_output=True, text=True, timeout=60
        )

    assert run("steady:0.5", "--seconds", "0.5").returncode == 0
    done = run("bursts:1", "--", sys.executable, "-c", "print('ran', end='')", "--seconds")
    assert done.returncode == 0 and done.stdout == "ran"
    missing = run("bursts", "--", "no-such-command-here")
    assert missing.returncode == 127 and "cannot run 'no-such-command-here'" in missing.stderr
