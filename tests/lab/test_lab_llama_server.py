"""A remote configuration against a real ``llama-server`` with a draft model, on 127.0.0.1.

The server is llama.cpp's own, built from the sources vendored in the installed
llama-cpp-python (the same build the bench's ``--reference`` uses; cached after the first
build), so its ``timings.draft_n`` / ``draft_n_accepted`` are the real thing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.lab.plan import Claim, LabPlan
from app.lab.remote_run import run_remote
from app.lab.results import ResultLog
from app.lab.runner import LabRunner, target_spec
from app.lab.stats import rows_from
from app.lab.suites import builtin
from tests.lab.llama_server import llama_server as start_llama_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama_server(looping_models, tmp_path_factory) -> Iterator[str]:  # noqa: ANN001
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with start_llama_server(looping_models["target"], looping_models["agrees"], log) as url:
        yield url


def test_real_llama_server_reports_its_own_drafting(llama_server: str) -> None:
    metrics = run_remote(
        llama_server, "hello the model", max_tokens=32, temperature=0.0, seed=1, timeout=120
    )
    assert metrics["tokens"] > 0
    assert metrics["drafted"] > 0, metrics
    # the draft is built on the target's own successor table: it agrees almost always
    assert metrics["acceptance"] > 0.5, metrics
    assert metrics["tokens_per_pass"] > 1.0, metrics


def test_real_llama_server_on_the_lab_plots(
    llama_server: str,
    looping_models,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    from app.lab.configs import parse_config

    plan = LabPlan(
        target=target_spec(str(looping_models["target"]), n_ctx=1024, threads=1),
        configs=(
            parse_config(f"local:draft={looping_models['agrees']},n=8"),
            parse_config(f"server:server={llama_server}"),
        ),
        prompts=tuple(builtin(["math"])),
        max_tokens=24,
        ignore_eos=True,
        claim=Claim(1.0, config="server"),
    )  # the server also runs the held-out prompts
    assert LabRunner.start(plan, tmp_path / "r.jsonl").run()
    rows = [
        r for r in rows_from(ResultLog.open(tmp_path / "r.jsonl").records) if r.config == "server"
    ]
    assert {r.prompt for r in rows} == {p.id for p in plan.prompts}
    assert all(r.acceptance > 0.5 for r in rows)
