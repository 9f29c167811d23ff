"""The engine drafting with a block drafter (DFlash, DFlash2, DSpark), through the real
llama.cpp in the engine process: the tiny synthetic heads of
``app.devtools.test_models.synthetic_dflash``, which agree with their target often, not always.

The engine's drafts and acceptances are compared with ``app.devtools.dflash_probe``, which
drives the head as llama.cpp's own drafter does (tests/core/test_dflash_synthetic.py compares
the probe with llama-server), stepping as the engine does (``--draft-from-prompt``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from app.devtools.test_models.synthetic_dflash import (
    DFLASH_BLOCK_SIZE,
    VARIANTS,
    write_dflash_target,
    write_tiny_dflash,
)
from app.engine.config import (
    AcceptRule,
    GenerationRequest,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
)
from app.engine.drafters.base import DraftingContext, DraftLimits
from app.engine.drafters.dflash import BlockHead, DFlashDrafter
from app.engine.policy.calibration import ConfidenceCalibration
from app.engine.policy.costs import CostModel
from app.engine.process.host import EngineHost, LoadRequest
from app.engine.randomness import Randomness
from app.errors import ModelLoadError
from app.gguf.compat import IncompatiblePairError
from tests.cores import THREADS
from tests.processes import host_pair, host_summary

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = (
    (1, 300, 310, 320, 330, 301),
    (1, 290, 291),
    (1, 275, 280, 285, 270, 299, 300, 301, 302, 303),
)
KINDS = {"dflash": "DFlash", "dflash2": "DFlash2", "dspark": "DSpark"}
FORCED = SpecConfig(draft_max=4, adaptive=False, collapse_guard=False, ngram_first=False)


@pytest.fixture(scope="module")
def heads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The target ("target") and one head of each variant, by variant name."""
    folder = tmp_path_factory.mktemp("dflash-engine")
    target = write_dflash_target(folder / "target.gguf")
    made = {"target": target}
    for variant in VARIANTS:
        made[variant] = write_tiny_dflash(folder / f"{variant}.gguf", target, variant=variant)
    return made


@pytest.fixture
def host():
    engine_host = EngineHost()
    yield engine_host
    engine_host.close()


def _spec(path: Path) -> ModelSpec:
    return ModelSpec(str(path), n_ctx=1024, n_threads=THREADS)  # the probe's context and threads


def _max_draft(variant: str) -> int:
    return DFLASH_BLOCK_SIZE - (0 if variant == "dspark" else 1)


def _probe(target: Path, head: Path, prompt: tuple[int, ...], n: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "app.devtools.dflash_probe", str(target), str(head)]
        + ["--greedy", str(n), "--prompt", ",".join(map(str, prompt)), "--n-max", "4"]
        + ["--draft-from-prompt"],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


class _FakeHead:
    """A block head that drafts 100, 101, … with the given confidences."""

    variant = "DFlash"
    max_draft = 7

    def __init__(self, confidences: list[float]) -> None:
        self.confidences = confidences
        self.blocks: list[int] = []  # the n_max of each block drafted

    def draft(
        self, last: int, pos0: int, n_max: int, *, confidences: bool
    ) -> tuple[list[int], list[float | None]]:
        self.blocks.append(n_max)
        sure = self.confidences[:n_max] if confidences else [None] * n_max
        return [100 + i for i in range(n_max)], list(sure)


def _drafter(head: _FakeHead, spec: SpecConfig) -> DFlashDrafter:
    context = DraftingContext(
        sampler=SamplerConfig(),
        spec=spec,
        randomness=Randomness(1),
        costs=CostModel(),
        calibration=ConfidenceCalibration(),
        target_vocab=512,
        want_probs=False,
    )
    return DFlashDrafter(cast(BlockHead, head), context)


@pytest.mark.fast
def test_the_block_is_built_for_the_ceiling_and_cut_to_the_step() -> None:
    """llama.cpp builds every block for its n_max (clamped to the block) and cuts the draft
    to what the step allows; the block's length changes what the head drafts."""
    head = _FakeHead([0.9] * 8)
    drafter = _drafter(head, SpecConfig(draft_max=16, adaptive=False))
    block = drafter.propose([1, 2, 3], DraftLimits(3))
    assert head.blocks == [7] and block.tokens == [100, 101, 102]
    assert block.passes == 1 and block.source == "DFlash"
    block = drafter.propose([1, 2, 3], DraftLimits(16))
    assert block.tokens == [100 + i for i in range(7)]  # never past the block
    drafter = _drafter(head, SpecConfig(draft_max=4, adaptive=False))
    assert len(drafter.propose([1, 2], DraftLimits(4)).tokens) == 4
    assert head.blocks[-1] == 4


@pytest.mark.fast
def test_p_min_and_the_answers_end_cut_the_block() -> None:
    head = _FakeHead([0.9, 0.8, 0.3, 0.9, 0.9, 0.9, 0.9])
    drafter = _drafter(head, SpecConfig(draft_max=7, adaptive=False, p_min=0.5))
    block = drafter.propose([1, 2], DraftLimits(7))
    assert block.tokens == [100, 101] and block.confidences == [0.9, 0.8]
    drafter = _drafter(head, SpecConfig(draft_max=7, adaptive=False))
    block = drafter.propose([1, 2], DraftLimits(7, ends_answer=lambda token: token == 102))
    assert block.tokens == [100, 101, 102]


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_block_drafts_are_the_targets_token_for_token(
    host: EngineHost, heads: dict[str, Path], variant: str
) -> None:
    info = host.load(LoadRequest(_spec(heads["target"]), _spec(heads[variant])))
    assert info.draft_path == str(heads[variant])
    drafted = accepted = 0
    for prompt in PROMPTS:
        request = GenerationRequest(prompt, max_tokens=300, spec=FORCED, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids
        assert len(speculative.token_ids) == 300
        assert 0 < speculative.accepted < speculative.drafted  # rejections on the way
        assert [d.name for d in speculative.per_drafter] == [KINDS[variant]]
        assert len(speculative.drafted_per_position) == 4
        drafted += speculative.drafted
        accepted += speculative.accepted
    assert accepted >= 20 and drafted - accepted >= 20


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_settings_stay_exact_and_within_the_block(
    host: EngineHost, heads: dict[str, Path], variant: str
) -> None:
    """The adaptive length, lookups first and the guard, with a ceiling past the block: no
    block drafts more than the head's block allows."""
    host.load(LoadRequest(_spec(heads["target"]), _spec(heads[variant])))
    head_alone = SpecConfig(draft_max=16, ngram_first=False)
    past_the_block = replace(FORCED, draft_max=16)
    for spec in (SpecConfig(), head_alone, past_the_block):
        request = GenerationRequest(PROMPTS[0] * 3, max_tokens=200, spec=spec, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids
        if not spec.ngram_first:  # the head's blocks alone (lookups draft as far as they match)
            assert len(speculative.drafted_per_position) <= _max_draft(variant)
    # a fixed length past the block: every block is the whole block
    assert len(speculative.drafted_per_position) == _max_draft(variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_engine_drafts_and_accepts_as_llama_cpp_does(
    host: EngineHost, heads: dict[str, Path], variant: str
) -> None:
    """With a fixed draft length the engine drafts the probe's blocks: the same tokens, and
    exactly as many drafted and accepted."""
    target, head = heads["target"], heads[variant]
    host.load(LoadRequest(_spec(target), _spec(head)))
    for prompt in PROMPTS[:2]:
        report = _probe(target, head, prompt, 200)
        assert report["identical"] is True
        request = GenerationRequest(prompt, max_tokens=200, spec=FORCED, ignore_eos=True)
        speculative = host_summary(host, request)
        assert list(speculative.token_ids) == report["tokens"]
        assert (speculative.drafted, speculative.accepted) == (
            report["drafted"],
            report["accepted"],
        )


@pytest.mark.parametrize("variant", VARIANTS)
def test_seeded_sampling_under_match_reproduces_target_only(
    host: EngineHost, heads: dict[str, Path], variant: str
) -> None:
    """T > 0: with position-keyed randomness, sample-and-match speculation draws the same
    token as target-only sampling at every position."""
    host.load(LoadRequest(_spec(heads["target"]), _spec(heads[variant])))
    sampler = SamplerConfig(temperature=0.9, top_k=20, top_p=0.95, min_p=0.0, seed=7)
    spec = replace(FORCED, rule=AcceptRule.MATCH)
    for prompt in PROMPTS[:2]:
        request = GenerationRequest(prompt, 200, sampler=sampler, spec=spec, ignore_eos=True)
        baseline, speculative = host_pair(host, request)
        assert speculative.token_ids == baseline.token_ids
        assert speculative.accepted > 0


DAMAGED: dict[str, tuple[dict[str, Any], str]] = {
    "missing tensor": ({"drop_tensor": "fc.weight"}, "tensor fc.weight is missing"),
    "target layer out of range": ({"target_layers": (1, 4)}, "reads target layers [1, 4]"),
    "DSpark without a block size": (
        {"variant": "dspark", "block_size": None},
        "a DSpark head needs dflash.block_size",
    ),
    "mask token outside the vocabulary": (
        {"mask_token": 99_999},
        "tokenizer.ggml.mask_token_id = 99,999 is outside the vocabulary",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_head_is_refused_in_words_and_the_engine_lives(
    host: EngineHost, heads: dict[str, Path], tmp_path: Path, case: str
) -> None:
    options, words = DAMAGED[case]
    damaged = write_tiny_dflash(tmp_path / "damaged.gguf", heads["target"], **options)
    with pytest.raises((ModelLoadError, IncompatiblePairError)) as refused:
        host.load(LoadRequest(_spec(heads["target"]), _spec(damaged)))
    assert words in str(refused.value)
    # the engine process is not dead: a fitting head loads and drafts after it
    host.load(LoadRequest(_spec(heads["target"]), _spec(heads["dflash"])))
    request = GenerationRequest(PROMPTS[0], max_tokens=24, spec=FORCED, ignore_eos=True)
    assert len(host_summary(host, request).token_ids) == 24
