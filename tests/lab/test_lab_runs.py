"""The lab on real llama.cpp: planted good and bad pairs, a killed run resumed, the reports."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.lab.configs import parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.report import to_csv, to_html, to_json
from app.lab.results import ResultFileError, ResultLog
from app.lab.runner import LabRunner, target_spec
from app.lab.stats import rows_from
from app.lab.suites import builtin

ROOT = Path(__file__).resolve().parents[2]


def _plan(
    models: dict[str, Path],
    claim: Claim,
    categories: tuple[str, ...] = ("code", "chat"),
    **kwargs: object,
) -> LabPlan:
    return LabPlan(
        target=target_spec(str(models["target"]), n_ctx=1024, threads=1),
        configs=(
            parse_config(f"agrees:draft={models['agrees']},n=8"),
            parse_config(f"disagrees:draft={models['disagrees']},n=16,guard=off,lookup=off"),
        ),
        prompts=tuple(builtin(categories)),
        ignore_eos=True,
        claim=claim,
        **{"max_tokens": 32, **kwargs},  # type: ignore[arg-type]
    )


def test_planted_pairs_one_confirmed_one_falsified(looping_models, tmp_path: Path) -> None:
    # code's two held-out prompts three times: enough held-out runs to judge the claim
    # 16 tokens a run: the agreeing draft's 9 tokens a target pass and the other's none show
    # as plainly as in 32, in half the time
    claim = Claim(1.3, category="code", config="disagrees")
    plan = _plan(looping_models, claim, repeats=3, max_tokens=16)
    runner = LabRunner.start(plan, tmp_path / "bad.jsonl")
    assert runner.run()
    log = ResultLog.open(tmp_path / "bad.jsonl")
    rows = rows_from(log.records)
    data = json.loads(to_json(log))
    assert data["verdict"]["status"] == "falsified"
    assert data["verdict"]["confirmation"]["median"] < 1.0
    held = {p.id for p in plan.split.confirmation if p.category == "code"}
    judged = {r.prompt for r in rows if r.phase == "confirmation" and r.config == "disagrees"}
    assert judged == held  # the claim was judged on exactly the held-out code prompts
    slow = [r for r in rows if r.config == "disagrees"]
    assert all(r.acceptance == 0.0 and r.speedup < 1.0 for r in slow)
    assert {(f["config"], f["kind"]) for f in data["failures"]} >= {("disagrees", "slowdown")}
    # the agreeing draft is the best for both categories, and the target is exact at T=0
    choice = log.choice
    assert choice is not None and set(choice["per_category"].values()) == {"agrees"}
    good = [r for r in rows if r.config == "agrees"]
    assert all(r.identical and r.acceptance == 1.0 for r in good)
    # per-drafter and per-position acceptance are stored with every run, from the step records
    stored = [rec["runs"] for rec in log.records if rec.get("kind") == "prompt"]
    assert {name for runs in stored for name in runs} == {"agrees", "disagrees"}
    for run in (run for runs in stored for run in runs.values()):
        drafters = run["per_drafter"]
        assert sum(d["drafted"] for d in drafters.values()) == run["drafted"]
        assert sum(run["accepted_per_position"]) == run["accepted"]
    for agrees in (runs["agrees"] for runs in stored if "agrees" in runs):
        assert all(d["acceptance"] == 1.0 for d in agrees["per_drafter"].values())
        assert set(agrees["acceptance_per_position"]) <= {1.0}
    for disagrees in (runs["disagrees"] for runs in stored if "disagrees" in runs):
        assert list(disagrees["per_drafter"]) == ["draft model"]
        assert disagrees["accepted_per_position"] == [0] * len(disagrees["drafted_per_position"])

    plan = _plan(looping_models, Claim(1.2), repeats=2, max_tokens=16)  # about 2× when quiet
    LabRunner.start(plan, tmp_path / "good.jsonl").run()
    data = json.loads(to_json(ResultLog.open(tmp_path / "good.jsonl")))
    assert data["verdict"]["config"] == "agrees"
    assert data["verdict"]["status"] == "confirmed", data["verdict"]
    assert data["verdict"]["confirmation"]["median"] >= 1.2
    # the best per category, each judged on too few held-out runs to be recommended
    assert [r["candidate"] for r in data["recommendations"]] == ["agrees", "agrees"]
    assert all(r["status"] != "use" for r in data["recommendations"])


def test_every_prompt_runs_against_the_baseline_in_rotating_order(
    looping_models, tmp_path: Path
) -> None:
    plan = _plan(looping_models, Claim(1.3), categories=("math",), repeats=2, max_tokens=16)
    LabRunner.start(plan, tmp_path / "r.jsonl").run()
    log = ResultLog.open(tmp_path / "r.jsonl")
    tuning = [r for r in log.of_kind("prompt") if r["phase"] == "tuning"]
    assert len(tuning) == len(plan.split.tuning) * 2
    orders = {tuple(r["order"]) for r in tuning}
    assert len(orders) == 3  # baseline, agrees, disagrees: every rotation appears
    for record in tuning:
        assert set(record["runs"]) == {"agrees", "disagrees"} and "0.0" in record["baselines"]
    header = log.header
    assert len(header["lineage"]["target"]["sha256"]) == 64
    assert set(header["lineage"]["drafts"]) == {
        str(looping_models["agrees"]),
        str(looping_models["disagrees"]),
    }
    assert header["suite_hash"] == plan.suite_hash and header["split"]["confirmation"]
    assert header["lineage"]["specdeck"] and header["lineage"]["llama_cpp_python"]


def _records(path: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.endswith("}")
    ]


def test_a_killed_run_resumes_without_redoing_finished_prompts(
    looping_models, tmp_path: Path
) -> None:
    out = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "app",
        "lab",
        "run",
        "--target",
        str(looping_models["target"]),
        "--config",
        f"agrees:draft={looping_models['agrees']},n=8",
        "--config",
        "ng:ngram,n=8",
        "--suite",
        "code,chat,math,edit",
        "--ctx",
        "1024",
        "--threads",
        "1",
        "--max-tokens",
        "24",
        "--ignore-eos",
        "--claim-config",
        "agrees",
        "--out",
        str(out),
    ]
    child = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if out.exists() and sum(r["kind"] == "prompt" for r in _records(out)) >= 3:
            break
        time.sleep(0.05)
    assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    before = out.read_bytes()
    done_before = [r for r in _records(out) if r["kind"] == "prompt"]
    assert len(done_before) >= 3 and not any(r["kind"] == "done" for r in _records(out))

    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "lab",
            "resume",
            str(out),
            "--html",
            str(tmp_path / "r.html"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(done_before)} prompt run(s) already recorded" in resumed.stderr
    after = out.read_bytes()
    complete = before[: before.rfind(b"\n") + 1]
    assert after.startswith(complete)  # finished prompts kept byte for byte, not redone
    records = _records(out)
    groups = [(r["phase"], r["prompt"], r["repeat"]) for r in records if r["kind"] == "prompt"]
    assert len(groups) == len(set(groups))
    plan = LabPlan.from_json(records[0]["plan"])
    tuning = {(p.id) for p in plan.split.tuning}
    assert {g[1] for g in groups if g[0] == "tuning"} == tuning
    assert records[-1]["kind"] == "done"
    # the agreeing draft accepts every token: about 2× (measured 2.2-7.6× on a busy machine)
    assert "CONFIRMED: agrees is at least 1.3× faster" in resumed.stdout, resumed.stdout
    again = subprocess.run(
        [sys.executable, "-m", "app", "lab", "resume", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and out.read_bytes() == after


def test_resume_refuses_a_changed_model_and_run_refuses_to_overwrite(
    looping_models, tmp_path: Path
) -> None:
    target = tmp_path / "target.gguf"
    target.write_bytes(looping_models["target"].read_bytes())
    models = {**looping_models, "target": target}
    plan = _plan(models, Claim(1.3), categories=("math",))
    LabRunner.start(plan, tmp_path / "r.jsonl")
    with pytest.raises(ResultFileError, match="already holds results"):
        LabRunner.start(plan, tmp_path / "r.jsonl")
    with target.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ResultFileError, match="sha256 changed"):
        LabRunner.resume(tmp_path / "r.jsonl")
    (tmp_path / "junk.jsonl").write_text('{"kind": "prompt"}\n')
    with pytest.raises(ResultFileError, match="not a SpecDeck lab result file"):
        ResultLog.open(tmp_path / "junk.jsonl")


def test_reports_are_self_contained(looping_models, tmp_path: Path) -> None:
    plan = _plan(
        looping_models,
        Claim(1.3),
        categories=("structured", "scripts"),
        max_tokens=16,
        repeats=2,  # three held-out prompts twice: enough runs to judge the claim
    )
    LabRunner.start(plan, tmp_path / "r.jsonl").run()
    log = ResultLog.open(tmp_path / "r.jsonl")
    page = to_html(log)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    # the agreeing draft is the best and clears 1.3× (about 2×); the other never agrees
    assert "CONFIRMED: agrees is at least 1.3×" in page and "FALSIFIED" not in page
    for prompt in plan.prompts:
        assert prompt.id in page  # every prompt is on the plot (as a tooltip)
    assert log.header["lineage"]["target"]["sha256"] in page
    rows = list(csv.DictReader(io.StringIO(to_csv(log))))
    assert len(rows) == len(rows_from(log.records))
    assert {r["config"] for r in rows} == {"agrees", "disagrees"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "lab",
            "report",
            str(tmp_path / "r.jsonl"),
            "--json",
            str(tmp_path / "r.json"),
            "--csv",
            str(tmp_path / "r.csv"),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "speedup (95% CI)" in result.stdout
    assert json.loads((tmp_path / "r.json").read_text())["suite_hash"] == plan.suite_hash
