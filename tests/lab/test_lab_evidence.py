"""What the Lab may conclude: no recommendation from a falsified claim, a tiny n, an interval
that includes 1× or a run under outside load; reports that name files without their paths and
a plot that reads at the page's width. Planted result files, the real report code and the
command line as a child process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from app.lab import interference
from app.lab.configs import parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.report import CELL_COLUMNS, analysis_of, cell_columns, summary_lines, to_html, to_json
from app.lab.results import ResultLog
from app.lab.runner import LabRunner, target_spec
from app.lab.stats import MIN_HELD_OUT_RUNS, NONE, TARGET_ALONE, TOO_FEW, USE, Row, recommend_one
from app.lab.suites import Prompt
from tests.lab import planted

ROOT = Path(__file__).resolve().parents[2]


def _analysis(path: Path):  # noqa: ANN202
    return analysis_of(ResultLog.open(path))[1]


# --- the recommendation rule ----------------------------------------------------------------


def test_a_falsified_claim_recommends_nothing_about_its_configuration(tmp_path: Path) -> None:
    result = _analysis(planted.falsified_ngram(tmp_path))
    assert result.verdict.status == "falsified" and result.verdict.config == "ngram"
    recs = {r.category: r for r in result.recommendations}
    # as found: code's two held-out runs at a median 1.05× were offered as "confirmed"
    assert recs["code"].confirmed_speedup.median > 1.0
    for rec in recs.values():
        assert rec.status == NONE and rec.config is None and rec.candidate == "ngram"
        assert "the claim about ngram was falsified" in rec.reason
        assert rec.describe().startswith(f"{rec.category}: no recommendation — ")


def test_no_recommendation_from_fewer_held_out_runs_than_the_minimum(tmp_path: Path) -> None:
    few = _analysis(planted.confirmed_ngram(tmp_path / "few", held_out=MIN_HELD_OUT_RUNS - 1))
    assert few.verdict.status == TOO_FEW  # neither the claim nor a recommendation stands
    (rec,) = few.recommendations
    assert rec.status == NONE and rec.config is None
    assert f"on {MIN_HELD_OUT_RUNS - 1} held-out runs" in rec.reason
    assert f"needs at least {MIN_HELD_OUT_RUNS}" in rec.reason

    enough = _analysis(planted.confirmed_ngram(tmp_path / "enough", held_out=MIN_HELD_OUT_RUNS))
    (rec,) = enough.recommendations
    assert rec.status == USE and rec.config == "ngram"
    assert rec.confirmed_speedup.low >= 1.0
    assert rec.describe().startswith("code: ngram — confirmed 1.4")


def _row(speedup: float, *, prompt: str, phase: str = "confirmation", load: str | None = None):  # noqa: ANN202
    return Row(
        phase, prompt, "code", 0, "ng", speedup, 0.5, 1.5, 10.0, 1.0, 2.0, 3.0, 0.5,
        speedup * 10, 10.0, 32, None, 0, True, None, None, load,
    )  # fmt: skip


def test_an_interval_that_includes_1x_is_not_a_recommendation() -> None:
    straddles = [_row(s, prompt=f"p{i}") for i, s in enumerate((0.8, 0.9, 1.05, 1.1, 1.2, 1.3))]
    rec = recommend_one(straddles, "code", "ng")
    assert rec.status == NONE and "not shown to beat the target alone" in rec.reason
    slower = [_row(s, prompt=f"p{i}") for i, s in enumerate((0.7, 0.75, 0.8, 0.85, 0.9))]
    rec = recommend_one(slower, "code", "ng")
    assert rec.status == TARGET_ALONE and rec.config is None
    assert rec.describe().startswith("code: target alone — ng was best on the tuning part")


def test_runs_under_outside_load_flag_the_verdict_and_withhold_the_recommendation(
    tmp_path: Path,
) -> None:
    path = planted.confirmed_ngram(tmp_path, busy_prompts=frozenset({"held2", "code1"}))
    result = _analysis(path)
    flagged = [r for r in result.rows if r.load]
    assert {r.prompt for r in flagged} == {"held2", "code1"}
    assert "other programs used 1.0 of 2 cores" in flagged[0].load
    assert result.verdict.disturbed == 1
    assert result.verdict.describe().startswith(
        "MEASURED UNDER OUTSIDE LOAD: RERUN (1 of 6 held-out runs shared the machine). CONFIRMED"
    )
    (rec,) = result.recommendations
    assert rec.status == NONE and interference.RERUN in rec.reason
    cell = next(c for c in result.cells if c.phase == "confirmation" and c.category == "code")
    columns = dict(zip(CELL_COLUMNS, cell_columns(cell), strict=True))
    assert columns["speedup (95% CI)"].endswith(" under load")  # never a plain figure
    assert columns["outside load"] == "1 of 6 runs: rerun"
    assert any(f.kind == "load" and f.prompt == "held2" for f in result.failures)


# --- the interference judgement on planted times ------------------------------------------


def test_judge_reads_outside_load_and_held_up_steps_from_times() -> None:
    quiet = {"wall_s": 2.0, "own_cpu_s": 3.7, "busy_cpu_s": 3.9, "cpus": 2, "threads": 2}
    assert interference.judge(**quiet, steps=[(50.0, 60.0)]) is None
    busy = {**quiet, "own_cpu_s": 0.2, "busy_cpu_s": 3.94}  # as found: 187 % CPU by others
    assert interference.judge(**busy) == (
        "other programs used 1.9 of 2 cores (187% CPU) beside its 2 threads"
    )
    # on 16 cores a run on 4 threads leaves 12 free: a busy core elsewhere is not in its way
    wide = {"wall_s": 1.0, "own_cpu_s": 4.0, "busy_cpu_s": 6.0, "cpus": 16, "threads": 4}
    assert interference.judge(**wide) is None
    held_up = interference.judge(**quiet, steps=[(5.0, 40.0)])
    assert held_up == "steps were held up (95th percentile 40 ms, median 5.0 ms)"
    assert interference.judge(**quiet, steps=[(0.5, 3.0)]) is None  # uneven, but microseconds


def _busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def test_a_busy_program_during_a_measurement_flags_it(looping_models, tmp_path: Path) -> None:  # noqa: ANN001
    """Real busy-loop processes, three per core, while real llama.cpp runs a Lab plan on one
    thread: every prompt is flagged, and so is the verdict. (Whether a quiet machine reads
    quiet depends on the machine: the planted times above test that side.)"""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    plan = LabPlan(
        target=target_spec(str(looping_models["target"]), n_ctx=1024, threads=1),
        configs=(parse_config("ng:ngram,n=8"),),
        prompts=(
            Prompt("a", "math", "Count from one to twenty."),
            Prompt("b", "math", "List the first ten primes."),
            Prompt("c", "math", "What is seven times eight?"),
        ),
        max_tokens=24,
        ignore_eos=True,
        claim=Claim(1.1),
    )
    loops = _busy_loops(3 * (cores or 1))
    try:
        time.sleep(0.3)  # the loops are running
        assert LabRunner.start(plan, tmp_path / "r.jsonl").run()
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    log = ResultLog.open(tmp_path / "r.jsonl")
    for record in log.of_kind("prompt"):
        times = record["load"]
        assert times["cpus"] == cores and times["threads"] == 1 and times["wall_s"] > 0
    result = analysis_of(log)[1]
    assert result.rows and all(r.load for r in result.rows), [r.load for r in result.rows]
    assert any("other programs used" in r.load for r in result.rows)
    assert result.verdict.describe().startswith("MEASURED UNDER OUTSIDE LOAD: RERUN")
    assert all(r.status == NONE for r in result.recommendations)


# --- reports ----------------------------------------------------------------------------------


def test_reports_name_model_files_by_name_and_sha256_not_by_path(tmp_path: Path) -> None:
    path = planted.falsified_ngram(tmp_path / "alice-home" / "lab")
    log = ResultLog.open(path)
    models = tmp_path / "alice-home" / "lab" / "models"
    for page in (to_html(log), to_json(log)):
        assert str(tmp_path) not in page and "alice-home" not in page
        assert str(Path.home()) not in page
        assert "target-q4.gguf" in page and "draft-q2.gguf" in page
        assert log.header["lineage"]["target"]["sha256"] in page
        assert log.header["lineage"]["drafts"][str(models / "draft-q2.gguf")] in page
    data = json.loads(to_json(log))
    assert data["lineage"]["drafts"] == {"draft-q2.gguf": log.header["lineage"]["drafts"][
        str(models / "draft-q2.gguf")
    ]}  # fmt: skip
    assert data["plan"]["target"]["path"] == "target-q4.gguf"
    assert str(models / "target-q4.gguf") in to_html(log, paths=True)
    assert str(models / "draft-q2.gguf") in to_json(log, paths=True)


def test_lab_report_prints_paths_only_with_paths(tmp_path: Path) -> None:
    path = planted.falsified_ngram(tmp_path / "bob")

    def report(*extra: str) -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, "-m", "app", "lab", "report", str(path), *extra,
             "--html", str(tmp_path / "r.html"), "--json", str(tmp_path / "r.json")],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return (tmp_path / "r.html").read_text(), (tmp_path / "r.json").read_text()

    for text in report():
        assert str(tmp_path / "bob") not in text and "target-q4.gguf" in text
    for text in report("--paths"):
        assert str(tmp_path / "bob" / "models" / "target-q4.gguf") in text


def test_a_file_name_with_markup_is_named_escaped(tmp_path: Path) -> None:
    target, draft = planted.model_files(tmp_path / "m")
    odd = target.with_name("<img src=x onerror=alert(1)>.gguf")
    target.rename(odd)
    path = planted.write(
        tmp_path / "r.jsonl", odd, draft, [("tuning", "p", "code", {"ngram": 1.2})],
        claim=Claim(1.3), claim_config="ngram", per_category={"code": "ngram"},
    )  # fmt: skip
    page = to_html(ResultLog.open(path))
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;.gguf" in page
    assert str(tmp_path) not in page


def _svg(page: str) -> ET.Element:
    return ET.fromstring(re.search(r"<svg.*?</svg>", page, re.S).group(0))


def test_the_plot_fills_the_page_and_its_line_labels_clear_the_points(tmp_path: Path) -> None:
    page = to_html(ResultLog.open(planted.falsified_ngram(tmp_path)))
    svg = _svg(page)
    assert svg.get("width") == "100%" and "max-width" not in (svg.get("style") or "")
    view_width = float(svg.get("viewBox").split()[2])
    assert view_width >= 1000  # was 90 px per category + 70: 250 px for two
    ns = "{http://www.w3.org/2000/svg}"
    points = [float(c.get("cx")) + 4 for c in svg.iter(f"{ns}circle")]
    points += [float(r.get("x")) + 8 for r in svg.iter(f"{ns}rect") if r.get("fill") == "none"]
    labels = {t.text: t for t in svg.iter(f"{ns}text") if t.get("class") == "line-label"}
    assert set(labels) == {"1× (target alone)", "claim 1.3×"}
    for label in labels.values():
        assert float(label.get("x")) > max(points)  # right of every point, not under them
        assert float(label.get("x")) + 8 * len(label.text) <= view_width + 20


def test_the_lab_tab_cli_and_report_share_one_table(tmp_path: Path) -> None:
    """One definition of every column, host ms/token included (the tab showed 70-540 ms
    where the command line showed 0.55 for its runs)."""
    result = _analysis(planted.falsified_ngram(tmp_path))
    lines = summary_lines(result)
    assert "host ms/token" in lines[0] and "outside load" in lines[0]
    for cell in result.cells:
        host = cell_columns(cell)[CELL_COLUMNS.index("host ms/token")]
        assert host == f"{cell.medians['host_ms_per_token'].median:.3f}" == "0.550"
    assert all(" 0.550 " in line for line in lines[1:])
