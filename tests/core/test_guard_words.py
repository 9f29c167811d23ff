"""Issue 33 §2: the guard's words come from the drafter kind and the measured reason, the
banner keeps the answer's history, lookups are named, and the pair's method is named from
the files' headers (no Qt: the CLI and the window share these words)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.test_models.synthetic import write_tiny_llama, write_tiny_qwen35
from app.devtools.test_models.synthetic_eagle3 import write_tiny_eagle3_pair
from app.devtools.test_models.synthetic_gemma4 import write_tiny_gemma4, write_tiny_gemma4_assistant
from app.engine.config import DraftSource
from app.engine.events import GuardEvent, GuardReason, StepEvent
from app.models.drafting import DrafterKind, PairDrafting, pair_drafting, pair_words
from app.models.guard_words import GuardHistory, advice, message

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

COST = GuardEvent(
    True, 0.875, 0.95, 2, reason=GuardReason.COST, draft_cost_fraction=0.25, probe_in=64
)
DISAGREE = GuardEvent(True, 0.4, 0.8, 9, reason=GuardReason.DISAGREEMENT, probe_in=16, window=8)
MTP = PairDrafting(DrafterKind.MTP, "MTP, 1 head")
ASSISTANT = PairDrafting(DrafterKind.ASSISTANT, "assistant draft for gemma4")
EAGLE3 = PairDrafting(DrafterKind.HEAD, "EAGLE-3 head")
SAME_MODEL = PairDrafting(DrafterKind.DRAFT_MODEL, "draft model", True, True)
SAME_FAMILY = PairDrafting(DrafterKind.DRAFT_MODEL, "draft model", True, False)
STRANGER = PairDrafting(DrafterKind.DRAFT_MODEL, "draft model")


@pytest.mark.parametrize("drafting", [MTP, ASSISTANT, EAGLE3])
@pytest.mark.parametrize("event", [COST, DISAGREE])
def test_a_drafter_made_for_its_target_is_never_told_to_pick_a_smaller_draft(
    drafting: PairDrafting, event: GuardEvent
) -> None:
    """Seen: "Try a smaller draft (a lower quantization or fewer parameters)" for the target's
    own MTP heads and for a Gemma 4 assistant."""
    words = message(event, drafting)
    assert "smaller draft" not in words and "lower quantization" not in words
    assert "same model family" not in words
    assert "draft length" in words and "prompt lookup" in words
    if event.reason is GuardReason.COST:
        assert "turn speculation off" in words


def test_the_words_name_who_drafts() -> None:
    assert "the target's own MTP heads is probed again" not in message(COST, MTP)
    assert "the target's own MTP heads are probed again in 64 tokens" in message(COST, MTP)
    assert "the assistant draft is probed again in 64 tokens" in message(COST, ASSISTANT)
    assert "the draft model is probed again in 16 tokens" in message(DISAGREE, STRANGER)


def test_a_same_family_draft_is_not_told_to_try_the_same_family() -> None:
    """Seen on the demo pair (the target's own model in Q2_K): "Try a draft from the same model
    family"."""
    for drafting in (SAME_MODEL, SAME_FAMILY):
        for event in (COST, DISAGREE):
            words = advice(event, drafting)
            assert "Try a draft from the same model family" not in words, words
    assert "target's architecture, vocabulary and size" in advice(DISAGREE, SAME_MODEL)
    assert "higher quantization" in advice(DISAGREE, SAME_MODEL)
    assert "already of the target's family" in advice(DISAGREE, SAME_FAMILY)
    # a draft from another family may be told to try one of the target's
    assert "same model family" in advice(DISAGREE, STRANGER)
    assert "smaller draft" in advice(COST, STRANGER)


def test_lookups_that_go_on_drafting_are_named_not_a_target_alone() -> None:
    """Seen: "the target answers alone; the draft is probed again in 64 tokens" while prompt
    lookups went on drafting."""
    alone = message(COST, SAME_MODEL)
    assert "The target answers alone" in alone
    lookups = GuardEvent(**{**COST.__dict__, "lookups_go_on": True})
    words = message(lookups, SAME_MODEL)
    assert "target answers alone" not in words
    assert "Prompt lookups still draft" in words and "probed again in 64 tokens" in words


def _step(step: int, drafted: int, accepted: int) -> StepEvent:
    return StepEvent(step, drafted, accepted, 1.0, 5.0, 0.0, 4, 0.5, 0.9)


def test_the_banner_keeps_why_drafting_paused_after_it_resumed() -> None:
    """Seen: after the answer only "Drafting resumed at step 50", why it paused gone."""
    paused = GuardEvent(**{**COST.__dict__, "lookups_go_on": True})
    resumed = GuardEvent(False, 0.9, 0.95, 50, reason=GuardReason.PROBE)
    history = GuardHistory()
    assert history.add([_step(1, 4, 4), paused])
    assert history.add([_step(8, 3, 3), _step(12, 2, 1), resumed, _step(51, 4, 2)])
    assert history.story() == (
        "paused at step 2 (cost), prompt lookups kept drafting (5 tokens), resumed at step 50"
    )
    head, rest = history.text(SAME_MODEL)
    assert head == "Drafting paused at step 2 (cost)"
    assert rest.startswith("prompt lookups kept drafting (5 tokens), resumed at step 50.")
    assert "a draft pass costs 25 % of a target pass" in rest  # the reason stays
    # a pause where nothing drafted says so
    quiet = GuardHistory()
    quiet.add([COST, resumed])
    assert quiet.story() == "paused at step 2 (cost), the target answered alone, resumed at step 50"
    assert not GuardHistory().add([_step(3, 2, 2)])  # steps alone are no guard news


def test_agreement_is_named_apart_from_the_answers_acceptance() -> None:
    """Seen: the banner's "agreement 98.4 %" beside the status bar's "acceptance 66 %"."""
    for event in (COST, DISAGREE):
        words = message(event, STRANGER)
        assert "agreement" in words and "acceptance" not in words
    assert "accepted ÷ judged draft tokens over the last 8 steps" in message(DISAGREE, STRANGER)


def test_each_pair_names_its_drafting_method_from_its_headers(tmp_path: Path) -> None:
    """Seen: an MTP answer labelled "qwen35-mtp.gguf + n-gram drafting", and a Gemma 4 assistant
    pair shown as "draft model" although check-pair says "assistant draft for gemma4"."""
    mtp = write_tiny_qwen35(tmp_path / "qwen35-mtp.gguf")
    assert pair_words(str(mtp), None, DraftSource.MTP) == (
        "qwen35-mtp.gguf + its own heads (MTP, 1 head)"
    )
    assert pair_drafting(str(mtp), None, DraftSource.MTP).kind is DrafterKind.MTP

    gemma = write_tiny_gemma4(tmp_path / "gemma4.gguf")
    helper = write_tiny_gemma4_assistant(tmp_path / "gemma4-assistant.gguf", gemma)
    assistant = pair_drafting(str(gemma), str(helper), DraftSource.MODEL)
    assert assistant.kind is DrafterKind.ASSISTANT
    assert pair_words(str(gemma), str(helper), DraftSource.MODEL) == (
        "gemma4.gguf + gemma4-assistant.gguf (assistant draft for gemma4)"
    )

    target, head = write_tiny_eagle3_pair(tmp_path)
    assert pair_drafting(str(target), str(head), DraftSource.MODEL).method == "EAGLE-3 head"

    llama = write_tiny_llama(tmp_path / "t.gguf", seed=1)
    copy = write_tiny_llama(tmp_path / "d.gguf", seed=2, noise_from=1, noise=0.1)
    other = write_tiny_llama(tmp_path / "o.gguf", seed=3, extra_words=("zebra", "quokka"))
    same = pair_drafting(str(llama), str(copy), DraftSource.MODEL)
    assert same.kind is DrafterKind.DRAFT_MODEL and same.same_family and same.same_model
    apart = pair_drafting(str(llama), str(other), DraftSource.MODEL)
    assert not apart.same_family  # another vocabulary: not the target's family
    assert pair_words(str(llama), None, DraftSource.NGRAM) == "t.gguf + n-gram (prompt lookup)"
