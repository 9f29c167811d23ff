"""Hostile lab files: suites and result files that are deep, damaged, not files at all, or
carry markup, lone surrogates and absurd plan values. Real files, FIFOs and devices; the
command line as a child process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.lab.configs import ConfigError, parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.report import to_html
from app.lab.results import ResultFileError, ResultLog
from app.lab.runner import target_spec
from app.lab.suites import Prompt, SuiteError, load_jsonl
from app.store.settings import Settings
from app.ui.lab_tab import LabTab
from tests.ui.conftest import (  # noqa: F401 - fixtures: offscreen windows, leak check
    isolated,
    no_live_threads_or_timers,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "<script>alert(1)</script>"
fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _within(call: Callable[[], Any], limit_s: float) -> BaseException | None:
    """What ``call`` raised, or None; fails when it is still running after ``limit_s``
    (a daemon thread, so a hang fails the test rather than hanging the suite)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(limit_s)
    assert not worker.is_alive(), f"still running after {limit_s} s"
    return outcome[0]


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "lab", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --- suites -------------------------------------------------------------------------------


def test_a_suite_line_nested_5000_deep_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    line = '{"id": "a", "prompt": "x", "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(SuiteError, match=r"deep.jsonl:1: not valid JSON .*nested too deeply"):
        load_jsonl(path)


@fifo_only
def test_a_fifo_as_suite_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "suite.jsonl"
    os.mkfifo(fifo)
    began = time.monotonic()
    error = _within(lambda: load_jsonl(fifo), 5.0)
    assert isinstance(error, SuiteError) and "not a regular file" in str(error)
    assert time.monotonic() - began < 1.0
    with pytest.raises(SuiteError, match="not a regular file"):
        load_jsonl(Path("/dev/zero"))


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (r'{"id": "a", "prompt": "bad \ud800 half"}', "the prompt"),
        (r'{"id": "a", "prompt": "x", "category": "c\udfff"}', "'category'"),
    ],
)
def test_a_lone_surrogate_is_refused_by_name(tmp_path: Path, line: str, what: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(SuiteError, match=f"s.jsonl:1: {what} holds a lone surrogate"):
        load_jsonl(path)


def test_a_category_with_terminal_escapes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "a", "prompt": "x", "category": "\\u001b[2J"}\n', encoding="utf-8")
    with pytest.raises(SuiteError, match="control characters"):
        load_jsonl(path)


def test_lab_run_with_a_surrogate_suite_says_so_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "t.gguf"
    target.write_bytes(b"not loaded: the suite is refused first")
    suite = tmp_path / "s.jsonl"
    suite.write_text(r'{"id": "a", "prompt": "bad \ud800 half"}' + "\n", encoding="utf-8")
    out = tmp_path / "r.jsonl"
    run = _cli(
        "run", "--target", str(target), "--config", "ng:ngram", "--suite", str(suite),
        "--out", str(out),
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "lone surrogate (U+D800" in run.stderr and "Traceback" not in run.stderr
    assert not out.exists()


def test_a_record_that_cannot_be_written_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with pytest.raises(ResultFileError, match="header record cannot be written"):
        ResultLog.create(path, {"plan": {"salt": "\ud800"}})
    assert not path.exists()
    log = ResultLog.create(path, {"plan": {}})
    before = path.read_bytes()
    with pytest.raises(ResultFileError, match="cannot be written"):
        log.append({"kind": "prompt", "tok_s": float("nan")})
    assert path.read_bytes() == before and log.records == []


# --- result files -------------------------------------------------------------------------


def _plan(target: Path, **changes: Any) -> dict[str, Any]:
    plan = LabPlan(
        target=target_spec(str(target), n_ctx=1024, threads=1),
        configs=(parse_config("ng:ngram,n=4"),),
        prompts=(Prompt("p1", "code", "write a loop"), Prompt("p2", "code", "sort a list")),
        claim=Claim(1.2),
    ).to_json()
    for key, value in changes.items():
        if key in plan["target"]:
            plan["target"][key] = value
        else:
            plan[key] = value
    return plan


def _prompt_record(**changes: Any) -> dict[str, Any]:
    run = {"tok_s": 20.0, "acceptance": 0.5, "tokens": 8, "temperature": 0.0}
    record = {
        "kind": "prompt",
        "phase": "tuning",
        "prompt": "p1",
        "category": "code",
        "repeat": 0,
        "baselines": {"0.0": {"tok_s": 10.0, "tokens": 8}},
        "runs": {"ng": run},
    }
    return {**record, **changes}


def _result_file(
    path: Path, plan: dict[str, Any], lines: list[str], lineage: dict[str, Any] | None = None
) -> Path:
    header = {"kind": "header", "format": "specdeck-lab/1", "plan": plan, "lineage": lineage}
    path.write_text("\n".join([json.dumps(header), *lines]) + "\n", encoding="utf-8")
    return path


RUN = _prompt_record()["runs"]["ng"]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (json.dumps(_prompt_record(phase=None)), r"phase is not text \(it is null\)"),
        (json.dumps({k: v for k, v in _prompt_record().items() if k != "phase"}), "phase missing"),
        (json.dumps(_prompt_record(phase=SCRIPT)), "phase is '<script>"),
        (json.dumps(_prompt_record(runs=[1])), r"runs is not an object \(it is a list\)"),
        (json.dumps(_prompt_record(runs={"ng": 7})), "runs.ng is not an object"),
        (
            json.dumps(_prompt_record(runs={"ng": {**RUN, "tokens": "many"}})),
            "runs.ng.tokens is not a whole number",
        ),
        (
            json.dumps(_prompt_record(runs={"ng": {**RUN, "peak_rss_mb": "lots"}})),
            "runs.ng.peak_rss_mb is not a number",
        ),
        (
            json.dumps(_prompt_record(runs={"ng": {**RUN, "margin": [0.1]}})),
            "runs.ng.margin is not a number",
        ),
        (json.dumps(_prompt_record(repeat=2**70)), "repeat is .* outside"),
        (json.dumps(_prompt_record(load={"wall_s": "long"})), "load.wall_s is not a number"),
        (json.dumps(_prompt_record(load={"cpus": 1e9})), r"load.cpus is .* outside"),
        (json.dumps(_prompt_record(load=[2.0])), r"load is not an object \(it is a list\)"),
        (json.dumps(_prompt_record()).replace("20.0", "Infinity"), "Infinity is not a number"),
        (json.dumps({"kind": "choice", "per_category": "code"}), "per_category is not an object"),
        ('{"kind": "prompt", "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ],
)
def test_damaged_records_are_refused_with_their_line(
    tmp_path: Path, record: str, message: str
) -> None:
    path = _result_file(tmp_path / "r.jsonl", _plan(tmp_path / "t.gguf"), [record])
    with pytest.raises(ResultFileError, match=f"r.jsonl:2: .*{message}"):
        ResultLog.open(path)


def test_lab_report_on_a_record_without_phase_says_which_line(tmp_path: Path) -> None:
    record = {k: v for k, v in _prompt_record().items() if k != "phase"}
    path = _result_file(tmp_path / "r.jsonl", _plan(tmp_path / "t.gguf"), [json.dumps(record)])
    report = _cli("report", str(path))
    assert report.returncode == 2 and "Traceback" not in report.stderr, report.stderr
    assert "r.jsonl:2: a damaged 'prompt' record: phase missing" in report.stderr


@fifo_only
def test_a_fifo_or_a_device_as_result_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        error = _within(lambda path=path: ResultLog.open(path), 5.0)
        assert isinstance(error, ResultFileError) and "not a regular file" in str(error)


def test_open_results_in_the_lab_tab_shows_a_damaged_file(qtbot, tmp_path: Path) -> None:  # noqa: ANN001
    record = _prompt_record(runs=[1])
    path = _result_file(tmp_path / "r.jsonl", _plan(tmp_path / "t.gguf"), [json.dumps(record)])
    tab = LabTab(Settings(), results_dir=tmp_path)
    qtbot.addWidget(tab)
    tab.show_results(path)  # the Open results… slot, after the file dialog
    assert "Cannot read the results" in tab.message.text()
    assert "r.jsonl:2" in tab.message.text() and tab.analysis is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n_ctx": 2**31}, "the context size 2147483648 must be between 256 and 1048576"),
        ({"n_ctx": 4096.5}, "n_ctx is not a whole number"),
        ({"n_threads": 10**6}, "the CPU threads 1000000 must be between 0 and 512"),
        ({"n_gpu_layers": True}, "n_gpu_layers is not a whole number"),
        ({"repack": "maybe"}, "the weight repacking 'maybe' must be one of auto, on, off"),
        ({"kv_type": "q1"}, "KV cache type must be one of"),
        ({"path": "a\x00b"}, "must not contain a NUL"),
        ({"seed": -1}, "the seed -1 must be between 0 and 4294967295"),
        ({"confirm_fraction": 1.5}, "confirmation fraction"),
        ({"repeats": "3"}, "repeats is not a whole number"),
        ({"ignore_eos": "false"}, "ignore_eos is not true or false"),
        ({"salt": "\ud800"}, "salt holds a lone surrogate"),
        ({"configs": [{"name": "ng", "source": "ngram", "draft_max": float("inf")}]}, "draft_max"),
        (
            {"configs": [{"name": "ng", "source": "ngram", "temperature": 9}]},
            r"temp 9.0 must be in \[0, 5\]",
        ),
        ({"prompts": [{"id": "p", "prompt": "a \ud800"}]}, "prompt 1: the prompt holds a lone"),
        ({"prompts": "p1"}, "configs and prompts must be lists"),
    ],
)
def test_plan_values_from_a_file_get_the_settings_ranges(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    plan = _plan(tmp_path / "t.gguf", **changes)
    with pytest.raises((ConfigError, SuiteError), match=message):
        LabPlan.from_json(plan)


def test_the_cli_refuses_a_huge_context_in_run_and_resume(tmp_path: Path) -> None:
    target = tmp_path / "t.gguf"
    target.write_bytes(b"never loaded")
    path = _result_file(
        tmp_path / "r.jsonl",
        _plan(target, n_ctx=2**31),
        [],
        {"target": {"path": str(target), "sha256": hashlib.sha256(b"never loaded").hexdigest()}},
    )
    resume = _cli("resume", str(path))
    assert resume.returncode == 2, resume.stderr
    assert "the context size 2147483648 must be between 256 and 1048576" in resume.stderr
    run = _cli(
        "run", "--target", str(target), "--config", "ng:ngram", "--suite", "math",
        "--ctx", str(2**31), "--out", str(tmp_path / "new.jsonl"),
    )  # fmt: skip
    assert run.returncode == 2 and "the context size 2147483648" in run.stderr
    assert not (tmp_path / "new.jsonl").exists()


@fifo_only
def test_resume_refuses_a_model_that_is_a_device_or_a_fifo(tmp_path: Path) -> None:
    zero = _result_file(
        tmp_path / "zero.jsonl",
        _plan(Path("/dev/zero")),
        [],
        {"target": {"path": "/dev/zero", "sha256": "0" * 64}},
    )
    began = time.monotonic()
    resume = _cli("resume", str(zero), timeout=30)
    assert resume.returncode == 2 and "/dev/zero is not a regular file" in resume.stderr
    target = tmp_path / "t.gguf"
    target.write_bytes(b"target")
    fifo = tmp_path / "draft.gguf"
    os.mkfifo(fifo)
    lineage = {
        "target": {"path": str(target), "sha256": hashlib.sha256(b"target").hexdigest()},
        "drafts": {str(fifo): "0" * 64},
    }
    piped = _result_file(tmp_path / "fifo.jsonl", _plan(target), [], lineage)
    resume = _cli("resume", str(piped), timeout=30)
    assert resume.returncode == 2 and "draft.gguf is not a regular file" in resume.stderr
    assert time.monotonic() - began < 30


def test_every_value_in_the_html_report_is_escaped(tmp_path: Path) -> None:
    plan = _plan(tmp_path / f"{SCRIPT}.gguf")
    plan["prompts"] = [{"id": "p1", "category": SCRIPT, "prompt": "x"}]
    slow = {**RUN, "tok_s": 5.0, "identical": False, "first_divergence": 3, "margin": 0.1}
    records = [
        _prompt_record(phase=SCRIPT, category=SCRIPT, runs={"ng": slow}),
        _prompt_record(category=SCRIPT),
    ]
    header = {"kind": "header", "format": "specdeck-lab/1", "plan": plan, "lineage": SCRIPT}
    log = ResultLog(tmp_path / "r.jsonl", header, records)  # as if read past the checks
    page = to_html(log)
    assert "<script" not in page.lower()
    assert page.count("&lt;script&gt;") >= 6
