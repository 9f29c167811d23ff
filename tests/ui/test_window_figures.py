"""The figures the window shows say only what the runs measured: a sampled answer is not
called a near-tie, one acceptance figure in the status bar, the chart and the export, no
speedup where nothing was drafted, and charts that fit the data and break at pauses."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtGui import QImage

from app.engine.events import RunSummary, StepEvent, StopReason
from app.store.settings import Settings
from app.workers.messages import EventBatch
from tests.ui.conftest import ask, load

FAST = Settings(max_tokens=48, n_ctx=1024, temperature=0.0, seed=1, n_threads=1)


def test_sampled_answer_is_not_called_a_near_tie(make_window, qtbot, tiny_pair) -> None:
    window = make_window(replace(FAST, temperature=0.8, seed=7))
    load(window, qtbot, *tiny_pair)
    done = ask(window, qtbot, "hello the model")
    verdict = window.chat.verdict.text()
    assert "near-tie" not in verdict, verdict
    assert "differ by design" in verdict and "by distribution" in verdict
    assert window.chat.spec_view.divergence is None  # nothing to mark: no identity expected
    assert window.conversation.messages[-1].stats["verdict"] == verdict
    assert done.speculative.tokens > 0


def test_one_acceptance_figure_in_status_chart_and_export(
    make_window, qtbot, tiny_pair, isolated
) -> None:
    window = make_window(FAST)
    load(window, qtbot, *tiny_pair)
    spec = ask(window, qtbot, "hello the model").speculative
    assert spec.drafted > 0
    figure = f"{spec.acceptance_rate * 100:.0f} %"
    status = window.status["acceptance"].text()
    assert status.startswith(f"acceptance {figure}") and f"{spec.accepted}/{spec.drafted}" in status
    assert f"{spec.tokens_per_pass:.2f} tokens/pass" in status
    run_so_far = window.charts.acceptance.view()[-1, 2]
    assert run_so_far == pytest.approx(spec.acceptance_rate)
    window.charts.export_stats(isolated / "run.json")
    data = json.loads((isolated / "run.json").read_text())
    assert data["runs"]["speculative"]["acceptance_rate"] == pytest.approx(
        spec.acceptance_rate, abs=1e-6
    )
    assert "acceptance_rate" in data["definitions"]
    assert all("recent_agreement" in step for step in data["steps"])  # the guard's figure
    assert data["runs"]["speculative"]["tokens_per_pass"] == pytest.approx(
        spec.tokens_per_pass, abs=1e-4
    )


def _summary(mode: str, tokens: int, tok_s: float, drafted: int = 0) -> RunSummary:
    return RunSummary(
        mode=mode, tokens=tokens, elapsed_s=1.0, tok_s=tok_s, ttft_ms=10.0,
        acceptance_rate=1.0 if drafted else 0.0, mean_accepted_length=0.0,
        target_passes_per_token=1.0, p50_itl_ms=1.0, p95_itl_ms=1.0,
        stop_reason=StopReason.MAX_TOKENS, decode_s=0.5, steps=0, drafted=drafted,
        accepted=drafted,
    )  # fmt: skip


def test_nothing_drafted_shows_no_speedup_in_the_window(make_window, qtbot) -> None:
    from app.workers.messages import Verdict

    window = make_window()
    window.charts.ingest(EventBatch(1, "speculative", (_summary("speculative", 96, 5.2),), 1, 96))
    window.charts.ingest(EventBatch(1, "baseline", (_summary("baseline", 96, 4.5),), 1, 96))
    window._on_verdict(Verdict(1, None))
    verdict = window.chat.verdict.text()
    assert "×" not in verdict and "noise" in verdict and "nothing was drafted" in verdict


def _steps(numbers: list[int]) -> tuple[StepEvent, ...]:
    return tuple(StepEvent(n, 4, 3, 5.0, 20.0, 1.0, 4, 0.75, 0.5) for n in numbers)


def test_charts_fit_the_data_and_break_at_pauses(make_window, qtbot, tmp_path) -> None:
    window = make_window()
    charts = window.charts
    for second in range(1, 6):
        charts.ingest(EventBatch(1, "speculative", (), float(second), 4 * second + 1))
    charts.ingest(EventBatch(1, "speculative", _steps([0, 1, 2, 10, 11]), 6.0, 30))
    for _ in range(4):  # one plot re-ranges per redraw tick
        charts._redraw()
    top = charts.speed_plot.viewRange()[1][1]
    assert 4.2 < top <= 10.0, top  # the rate sits near 4-5 tok/s: the axis is not 0-50
    x, _ = charts.accept_mean.getData()
    connect = charts.accept_mean.opts["connect"]
    assert list(x) == [0, 1, 2, 10, 11]
    assert list(np.asarray(connect)[:4]) == [True, True, False, True]  # no line over 2..10
    # keys and the break-even figure sit in legends under the axes, never on the data;
    # under a plot too short for them they move into its tooltip
    assert "break-even 50.0 %" in charts.legends[0].getLabel(charts.break_key).text
    for height in (900, 400):
        window.charts_dock.setFloating(True)
        window.charts_dock.resize(500, height)
        qtbot.wait(50)
        charts._redraw()
        plots = (charts.accept_plot, charts.speed_plot)
        for legend, plot, shown in zip(charts.legends, plots, charts._legend_shown, strict=True):
            assert shown is (plot.height() >= 200)
            if shown:
                assert (
                    legend.sceneBoundingRect().top()
                    >= plot.plotItem.vb.sceneBoundingRect().bottom()
                )
            else:
                assert (
                    "run so far" in charts.accept_plot.toolTip() or "speculative" in plot.toolTip()
                )
        assert any(charts._legend_shown) == (height == 900)
    assert "break-even 50.0 %" in charts.accept_plot.toolTip()
    window.charts_dock.setFloating(False)
    png = charts.export_png("tok_s", tmp_path / "tok_s.png")
    assert QImage(str(png)).width() >= 1200


def test_a_finished_answers_charts_span_its_data(make_window, qtbot, tiny_pair) -> None:
    window = make_window(replace(FAST, max_tokens=200))
    load(window, qtbot, *tiny_pair)
    ask(window, qtbot, "hello the model")
    charts = window.charts
    steps = charts.acceptance.view()
    assert len(steps) >= 3
    last_step = float(steps[-1, 0])
    peak_t = max(
        float(ring.view()[:, 0].max()) for ring in charts.speed.values() if len(ring.view())
    )
    # while streaming, axes grow in steps of 1, 2, 5 x 10^k and the time axis starts at 10 s
    for plot, end in ((charts.accept_plot, last_step), (charts.speed_plot, peak_t)):
        low, high = plot.viewRange()[0]
        assert high >= end and high - low <= end * 1.1, (plot, end, (low, high))
