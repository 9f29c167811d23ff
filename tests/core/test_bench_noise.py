"""The bench notices when another program disturbed its timings, and pairs its rounds."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.engine.bench import (
    ROUNDS_AGREE,
    BenchSettings,
    more_rounds_reasons,
    rounds_agree,
    rounds_wanted,
)
from app.engine.config import DraftSource, ModelSpec, SpecConfig
from app.engine.events import RunSummary, StopReason
from app.engine.noise import (
    DRIFT_LIMIT,
    GAP_LIMIT,
    MIN_PASSES,
    SPREAD_LIMIT,
    gap_reasons,
    loads_apart,
    noise_flag,
    pass_gap,
    steadiness,
)
from app.engine.process.host import run_bench_in_child
from app.engine.process.protocol import BenchRequest
from tests.cores import THREADS


def _passes(rng: np.random.Generator, sizes: list[int], slow: slice = slice(0, 0), by=1.0):
    """A target pass per step: 60 ms plus 12 ms per token, a few per cent of jitter; the
    steps in ``slow`` cost ``by`` times as much (another program took cores then)."""
    ms = [(60.0 + 12.0 * size) * float(rng.normal(1.0, 0.03)) for size in sizes]
    ms[slow] = [m * by for m in ms[slow]]
    return [(size, m) for size, m in zip(sizes, ms, strict=True)]


def test_step_time_spread_flags_a_disturbed_run_and_not_a_steady_one() -> None:
    rng = np.random.default_rng(7)
    single = [1] * 64
    blocks = [int(s) for s in rng.integers(1, 18, size=40)]
    for sizes in (single, blocks):
        steady = [_passes(rng, sizes), _passes(rng, sizes)]
        steady[1][5] = (steady[1][5][0], steady[1][5][1] * 6)  # one page fault: not noise
        judged = steadiness("baseline", steady)
        assert noise_flag(judged) is None, judged
        assert all(s is not None and s < 1.2 for s in judged.spreads)
        assert judged.drift is not None and judged.drift < 1.1

        # a third of round 2 at twice the cost: its spread says so
        part = [_passes(rng, sizes), _passes(rng, sizes, slice(10, 10 + len(sizes) // 3), 2.0)]
        judged = steadiness("baseline", part)
        spread = judged.spreads[1]
        assert spread is not None and spread > SPREAD_LIMIT
        flag = noise_flag(judged, steadiness("speculative", steady))
        assert flag is not None and flag.startswith("noisy: baseline step times spread")
        assert f"{spread:.2f}× (p90/p10) in round 2" in flag

        # all of round 1 slowed by 60 %: steady within, but not like round 2
        whole = [_passes(rng, sizes, slice(0, None), 1.6), _passes(rng, sizes)]
        judged = steadiness("speculative", whole)
        assert all(s is not None and s < SPREAD_LIMIT for s in judged.spreads)
        assert judged.drift is not None and judged.drift > DRIFT_LIMIT
        assert "speculative rounds differ" in (noise_flag(judged) or "")


def test_the_gap_between_the_modes_single_passes_is_measured_and_flagged() -> None:
    """Another program busy through one mode's run and not the other's, in every round,
    moves neither spread nor drift: the single passes both modes pay alike say so."""
    rng = np.random.default_rng(11)
    target_only = [ms for _, ms in _passes(rng, [1] * 40)]
    alike = [ms for _, ms in _passes(rng, [1] * 30)]
    slowed = [ms * 1.2 for _, ms in _passes(rng, [1] * 30)]
    steady_gap, slowed_gap = pass_gap(target_only, alike), pass_gap(target_only, slowed)
    assert steady_gap is not None and abs(steady_gap - 1.0) < 0.05
    assert slowed_gap is not None and abs(slowed_gap - 1.2) < 0.05
    assert pass_gap(target_only, alike[: MIN_PASSES - 1]) is None  # too few to compare
    assert gap_reasons([steady_gap, None]) == []
    # either way: a target-only run slowed reads as a speedup it did not earn
    reasons = gap_reasons([steady_gap, slowed_gap, 1.0 / slowed_gap])
    assert len(reasons) == 2 and " in round 2" in reasons[0] and " in round 3" in reasons[1]
    assert f"{slowed_gap:.2f}× in the speculative run" in reasons[0]
    assert 1.0 / slowed_gap < 1.0 / GAP_LIMIT
    flag = noise_flag(steadiness("baseline", [[(1, m) for m in target_only]]), gaps=[slowed_gap])
    assert flag == "noisy: " + reasons[0].replace("round 2", "round 1")


def test_other_programs_loading_one_mode_more_than_the_other_is_flagged() -> None:
    """A draft accepted whole leaves no lone target pass to compare between the modes; the
    cores other programs kept busy during each mode's run say where the bursts fell (an edit
    prompt read 0.87x with 0.95 busy against 0.46, unflagged). A quiet machine's modes differ
    by under a tenth of a core, and an unknown load says nothing."""
    from app.engine.noise import LOAD_GAP_LIMIT, load_gap_reasons

    assert load_gap_reasons([(0.02, 0.09), (None, 0.9), (0.7, 0.9)]) == []
    reasons = load_gap_reasons([(0.70, 0.90), (0.46, 0.95), (0.9, 0.9 - LOAD_GAP_LIMIT - 0.01)])
    assert len(reasons) == 2
    assert reasons[0] == (
        "other programs kept 0.95 cores busy in the speculative run and 0.46 target-only in round 2"
    )
    assert " in round 3" in reasons[1]
    assert noise_flag(loads=[(0.46, 0.95)]) == "noisy: " + reasons[0].replace("round 2", "round 1")
    assert noise_flag(loads=[(0.02, 0.05)]) is None


def test_a_round_loaded_unevenly_by_other_programs_has_no_speedup_at_equal_passes() -> None:
    """The lone single passes equalise only a load that fell on them: a short answer read
    0.61x "at equal passes" from a round whose speculative run had 0.59 cores of other
    programs against 0.01 target-only, and a gap of 1.05 (the burst fell on the draft)."""
    from app.engine.noise import LOAD_GAP_LIMIT, at_equal_passes

    assert at_equal_passes(0.58, 1.048, (0.01, 0.59)) is None
    assert at_equal_passes(0.58, 1.048, (0.59, 0.01)) is None
    assert at_equal_passes(0.58, None, (0.0, 0.0)) is None
    assert at_equal_passes(0.8, 1.25, (0.5, 0.5 + LOAD_GAP_LIMIT - 0.01)) == pytest.approx(1.0)
    assert at_equal_passes(0.8, 1.25, (None, 0.9)) == pytest.approx(1.0)  # a load not measured


def test_too_few_steps_are_not_judged() -> None:
    judged = steadiness("speculative", [[(17, 90.0), (17, 400.0)], [(17, 95.0)]])
    assert judged.spreads == (None, None) and judged.drift is None
    assert noise_flag(judged) is None
    assert steadiness("baseline", [[]]).spreads == (None,)


def test_the_bench_pairs_its_rounds_and_reports_their_steadiness(
    tmp_path: Path, tiny_pair: tuple[Path, Path]
) -> None:
    target, draft = tiny_pair
    settings = BenchSettings(
        max_tokens=24,
        spec=SpecConfig(draft_max=4, adaptive=False, collapse_guard=False),
        max_rounds=2,
    )
    assert settings.rounds == 2
    result = run_bench_in_child(
        BenchRequest(
            ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
            ModelSpec(str(draft), n_ctx=512, n_threads=THREADS),
            ({"id": "a", "prompt": "the code"},),
            settings,
            DraftSource.MODEL,
        )
    )
    row = result["prompts"][0]
    rounds = row["rounds"]
    assert [r["first"] for r in rounds] == ["baseline", "speculative"]
    for r in rounds:
        assert r["baseline_tok_s"] > 0 and r["speculative_tok_s"] > 0
        ratio = r["speculative_tok_s"] / r["baseline_tok_s"]
        assert r["speedup"] == pytest.approx(ratio, rel=1e-3, abs=2e-4)
        for key in ("baseline_outside_cores", "speculative_outside_cores"):
            assert r[key] is None or r[key] >= 0.0
    # the row's median is taken before rounding, the rounds' after: a last digit may differ
    median_speedup = statistics.median(r["speedup"] for r in rounds)
    assert row["speedup"] == pytest.approx(median_speedup, abs=2e-4)
    median_tok_s = statistics.median(r["baseline_tok_s"] for r in rounds)
    assert row["baseline_tok_s"] == pytest.approx(median_tok_s, abs=2e-3)
    for mode in ("baseline", "speculative"):
        spreads = row["step_time_spread"][mode]
        assert len(spreads) == 2 and all(s is None or s >= 1.0 for s in spreads)
        drift = row["round_drift"][mode]
        assert drift is None or drift >= 1.0
    # 24 single-token passes per target-only run: enough to be judged
    assert all(s is not None for s in row["step_time_spread"]["baseline"])
    assert row["round_drift"]["baseline"] is not None
    assert row["noisy"] is None or row["noisy"].startswith("noisy: ")
    assert row["step_host_ms_per_token"] > 0 and row["baseline_step_host_ms_per_token"] > 0
    assert row["ttft_ms"] > 0 and row["baseline_ttft_ms"] > 0
    assert row["ttft_samples"] == 7  # seven one-token runs per mode, every cache emptied
    for r in rounds:  # each round's speedup at equal passes is its speedup times its gap
        gap, at_equal = r["pass_gap"], r["speedup_at_equal_passes"]
        loads = (r["baseline_outside_cores"], r["speculative_outside_cores"])
        assert (gap is None or loads_apart(*loads)) == (at_equal is None)
        if at_equal is not None:
            assert at_equal == pytest.approx(r["speedup"] * gap, rel=2e-3)
    assert result["aggregate"]["median_baseline_ttft_ms"] == row["baseline_ttft_ms"]
    assert row["step_host_ms_per_token"] <= row["host_ms_per_token"]
    aggregate = result["aggregate"]
    assert aggregate["noisy_prompts"] == len(aggregate["noisy"]) == (1 if row["noisy"] else 0)
    assert 0 <= row["paused_at_end"] <= row["tokens"]
    assert aggregate["paused_at_end"] == (
        [{"id": row["id"], "tokens": row["paused_at_end"], "of": row["tokens"]}]
        if row["paused_at_end"]
        else []
    )
    assert "median_step_host_ms_per_token" in aggregate
    assert result["lineage"]["settings"]["rounds"] == 2
    # as the models were loaded: both all F32, so repacked whatever the machine's verdict
    assert result["lineage"]["weight_repacking"].startswith("weight repacking on (no AMX weights:")


def test_rounds_agree_within_a_tenth() -> None:
    assert rounds_agree([1.0]) and rounds_agree([])
    assert rounds_agree([1.00, 1.09]) and rounds_agree([0.95, 1.04])
    assert not rounds_agree([1.07, 0.76])  # a 9-token answer on a busy machine
    assert not rounds_agree([1.0, 0.0])  # a run too short to time


def test_rounds_that_disagree_are_repeated_taking_turns(
    tmp_path: Path, tiny_pair: tuple[Path, Path]
) -> None:
    """Rounds run two at a time until ``max_rounds`` where the first two disagree; the
    speedup is the median of them all, and which mode goes first keeps alternating."""
    target, draft = tiny_pair
    settings = BenchSettings(
        max_tokens=16,
        spec=SpecConfig(draft_max=4, adaptive=False, collapse_guard=False),
        max_rounds=4,
    )
    result = run_bench_in_child(
        BenchRequest(
            ModelSpec(str(target), n_ctx=512, n_threads=THREADS),
            ModelSpec(str(draft), n_ctx=512, n_threads=THREADS),
            tuple(
                {"id": str(n), "prompt": text} for n, text in enumerate(("the code", "import data"))
            ),
            settings,
            DraftSource.MODEL,
        )
    )
    assert result["lineage"]["settings"]["max_rounds"] == 4
    for row in result["prompts"]:
        rounds = row["rounds"]
        first_two = [r["speedup"] for r in rounds[:2]]
        # the rounds' figures are rounded: right at the limit either count is right
        if abs(max(first_two) / max(min(first_two), 1e-9) - ROUNDS_AGREE) > 0.005:
            assert rounds_agree(first_two) or row["more_rounds"], first_two
        # more rounds ran exactly where the row says why
        assert len(rounds) == (4 if row["more_rounds"] else 2), row["more_rounds"]
        assert [r["first"] for r in rounds] == ["baseline", "speculative"] * (len(rounds) // 2)
        median_speedup = statistics.median(r["speedup"] for r in rounds)
        assert row["speedup"] == pytest.approx(median_speedup, abs=2e-4)


def _run(
    tok_s: float, outside: float | None, lone: tuple[float, ...] = (), elapsed_s: float = 1.0
) -> RunSummary:
    return RunSummary(
        mode="", tokens=96, elapsed_s=elapsed_s, tok_s=tok_s, ttft_ms=10.0, acceptance_rate=1.0,
        mean_accepted_length=8.0, target_passes_per_token=0.1, p50_itl_ms=1.0, p95_itl_ms=1.0,
        stop_reason=StopReason.MAX_TOKENS, decode_s=0.5, steps=12, drafted=96, accepted=96,
        outside_cores=outside, lone_passes=lone,
    )  # fmt: skip


def test_a_round_that_other_programs_loaded_on_one_side_asks_for_more_rounds() -> None:
    """The edit prompt of the bursts bench: its draft accepted whole, so no lone target pass
    gave a gap, and its two rounds agreed (0.87x, 0.88x) because the bursts fell on the
    speculative runs both times (0.90 and 0.95 cores busy against 0.70 and 0.46)."""
    slowed = [(_run(10.0, 0.70), _run(8.7, 0.90)), (_run(10.0, 0.46), _run(8.8, 0.95))]
    reasons = more_rounds_reasons(slowed)
    assert len(reasons) == 1 and "0.95 cores busy in the speculative run" in reasons[0]
    even = [(_run(10.0, 0.70), _run(8.7, 0.80)), (_run(10.0, 0.46), _run(8.8, 0.50))]
    assert more_rounds_reasons(even) == []
    unknown = [(_run(10.0, None), _run(8.7, 0.9)), (_run(10.0, 0.1), _run(8.8, None))]
    assert more_rounds_reasons(unknown) == []  # a load not measured is not a gap
    disagree = [(_run(10.0, 0.1), _run(17.0, 0.1)), (_run(10.0, 0.1), _run(12.0, 0.1))]
    assert more_rounds_reasons(disagree) == [
        "the rounds' speedups 1.70x, 1.20x differ by more than 10%"
    ]


def test_a_short_answer_whose_rounds_cannot_be_read_runs_more_of_them() -> None:
    """An 11-token answer's runs each land in a burst of other programs or miss it whole: it
    runs the rounds that time as many tokens as six 96-token answers' (52, held to 24, four
    times max_rounds); a 40-token answer 14 (14.4, an even number so each mode goes first as
    often); a full-length answer max_rounds, as before."""

    def rounds(tokens: int) -> list[tuple[RunSummary, RunSummary]]:
        one = replace(_run(10.0, 0.1), tokens=tokens)
        return [(one, one), (one, one)]

    assert rounds_wanted(rounds(11), max_rounds=6, max_tokens=96) == 24
    assert rounds_wanted(rounds(40), max_rounds=6, max_tokens=96) == 14
    assert rounds_wanted(rounds(96), max_rounds=6, max_tokens=96) == 6
    assert rounds_wanted(rounds(0), max_rounds=6, max_tokens=96) == 24
    assert rounds_wanted(rounds(80), max_rounds=4, max_tokens=96) == 4
    # rounds of 0 and 1 tokens: a median of 0.5 once divided by int(0.5), zero
    empty, one = replace(_run(10.0, 0.1), tokens=0), replace(_run(10.0, 0.1), tokens=1)
    assert rounds_wanted([(empty, empty), (one, one)], max_rounds=6, max_tokens=96) == 24
