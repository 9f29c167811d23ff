"""Several drafters at once: prompt lookups go first while they pay, then the head, for every
kind of head as for a draft model (``CombinedDrafter`` around whatever ``Engine._drafter``
chose: MTP, EAGLE-3, DFlash, DFlash2, DSpark). On the tiny synthetic pairs, in the engine
process: the answer is the target's own, and the run figures, the bench row and the step
events name both sources."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_qwen35
from app.devtools.test_models.synthetic_dflash import write_dflash_target, write_tiny_dflash
from app.devtools.test_models.synthetic_eagle3 import write_tiny_eagle3_pair
from app.engine.bench import BenchSettings, bench_prompt
from app.engine.config import DraftSource, GenerationRequest, ModelSpec, SpecConfig
from app.engine.drafters.combined import CombinedDrafter
from app.engine.engine import Engine
from app.engine.events import RunSummary, StepEvent
from app.engine.randomness import Randomness
from tests.cores import THREADS

HEADS = {
    "mtp": "MTP",
    "eagle3": "EAGLE-3",
    "dflash": "DFlash",
    "dflash2": "DFlash2",
    "dspark": "DSpark",
}
# a text that repeats itself, so lookups find matches from the first answer token on
TEXT = "one two three four five six seven eight nine ten " * 6
# a fixed length and no guard: every step drafts (which source first is the rates' choice)
SPEC = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False)  # lookups first: default


def _paths(kind: str, folder: Path) -> tuple[Path, Path | None]:
    if kind == "mtp":
        return write_tiny_qwen35(folder / "qwen35-mtp.gguf", branch_scale=0.3), None
    if kind == "eagle3":
        return write_tiny_eagle3_pair(folder)
    target = write_dflash_target(folder / "target.gguf")
    return target, write_tiny_dflash(folder / f"{kind}.gguf", target, variant=kind)


@pytest.fixture(params=list(HEADS))
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    kind = request.param
    target, head = _paths(kind, tmp_path)
    loaded = Engine(
        ModelSpec(str(target), n_ctx=1024, n_threads=THREADS),
        ModelSpec(str(head), n_ctx=1024, n_threads=THREADS) if head is not None else None,
        draft_source=DraftSource.MTP if kind == "mtp" else None,
    )
    try:
        yield kind, loaded
    finally:
        loaded.close()


def _run(engine: Engine, request: GenerationRequest) -> tuple[RunSummary, list[StepEvent]]:
    events = list(engine.generate(request))
    summary = events[-1]
    assert isinstance(summary, RunSummary)
    return summary, [e for e in events if isinstance(e, StepEvent)]


def test_lookups_go_first_then_the_head_and_the_answer_stays_the_targets(
    engine: tuple[str, Engine],
) -> None:
    kind, loaded = engine
    name = HEADS[kind]
    prompt = loaded.tokenize(TEXT)
    request = GenerationRequest(prompt, max_tokens=200, spec=SPEC, ignore_eos=True)
    drafter = loaded._drafter(request, Randomness(0))
    assert isinstance(drafter, CombinedDrafter)
    assert drafter.name == f"n-gram + {name}"
    speculative, steps = _run(loaded, request)
    baseline, _ = _run(loaded, GenerationRequest(prompt, 200, ignore_eos=True, speculative=False))
    assert speculative.token_ids == baseline.token_ids
    figures = {d.name: d for d in speculative.per_drafter}
    assert set(figures) == {"n-gram", name}, figures
    assert all(f.drafted > 0 for f in figures.values())
    assert {s.drafter for s in steps} == {"n-gram", name}  # what the chart tooltips name
    alone = GenerationRequest(prompt, 200, spec=replace(SPEC, ngram_first=False))
    assert [d.name for d in _run(loaded, alone)[0].per_drafter] == [name]


def test_the_bench_row_names_both_sources(engine: tuple[str, Engine]) -> None:
    kind, loaded = engine
    settings = BenchSettings(max_tokens=200, spec=SPEC, ignore_eos=True, rounds=1, max_rounds=1)
    row = bench_prompt(loaded, {"id": "repeats", "prompt": TEXT}, settings)
    assert row["identical"] is True
    assert set(row["per_drafter"]) == {"n-gram", HEADS[kind]}
