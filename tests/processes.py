"""Real child processes in tests: find a command's engine process, run a command with a bound."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from app.engine.config import GenerationRequest
from app.engine.events import RunSummary
from app.engine.process.protocol import PROCESS_NAME

if TYPE_CHECKING:  # the host loads llama.cpp; the process helpers need not
    from app.engine.process.host import EngineHost

ROOT = Path(__file__).resolve().parents[1]


def engine_processes(pid: int) -> list[psutil.Process]:
    """The engine processes under process ``pid``: spawned ones, or forked by a forkserver
    (which names them)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if child.name() == PROCESS_NAME or "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def gone(process: psutil.Process) -> bool:
    """Ended (a zombie nobody reaped yet counts as ended: it runs nothing)."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def seconds_until_gone(process: psutil.Process, limit_s: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        if gone(process):
            return time.monotonic() - began
        time.sleep(0.01)
    return None


def kill_all(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def run_app(args: list[str], timeout_s: float) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m app ARGS`` in its own session; past ``timeout_s`` the whole process group
    (the engine process included) is killed and the test fails."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        pytest.fail(f"`{' '.join(args[:2])}` did not finish within {timeout_s:.0f} s:\n{err}")
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), (
        time.monotonic() - began
    )


def host_summary(host: EngineHost, request: GenerationRequest) -> RunSummary:
    """Run ``request`` in the engine process to its end; its summary."""
    summary = None
    for batch in host.generate(request):
        for event in batch:
            if isinstance(event, RunSummary):
                summary = event
    assert summary is not None
    return summary


def host_pair(host: EngineHost, request: GenerationRequest) -> tuple[RunSummary, RunSummary]:
    """(target-only, speculative) summaries of ``request``, in that order."""
    baseline = host_summary(host, replace(request, speculative=False))
    return baseline, host_summary(host, request)
