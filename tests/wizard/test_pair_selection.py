"""The wizard's selection model without Qt: which target, quantization and draft a choice
stands for, what Next may do, and what the chosen pair downloads and saves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.gguf.compat import VocabInfo
from app.gguf.facts import ModelFacts, SelfDrafting
from app.models.catalog import DraftCandidate
from app.models.fit import FitLabel, gib
from app.models.hub import GGUFFile, QuantGroup
from app.models.library import Library, LibraryModel
from app.ui.wizard.pair_selection import (
    DraftChoices,
    TargetChoices,
    WizardState,
    activates,
    choose_hub_target,
    choose_local_target,
    choose_quant,
    default_pair_name,
    download_items,
    draft_size_warning,
    heads_text,
    local_fit,
    lower_context,
    offer_own_heads,
    pair_profile,
    preselected_quant,
    quant_rows,
    where_text,
)
from app.workers.hub_messages import Calibrated, DraftOption, LocalModel, RepoInspected
from tests.wizard.helpers import DRAFT, HARDWARE, TARGET, tiny_catalog

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
VOCAB = VocabInfo("llama", True, False, 1, 2, ("<s>", "</s>", "a"))
MTP = SelfDrafting("mtp", n_heads=1)
HEAD = SelfDrafting("eagle3", target_layers=(1, 2, 3))


def facts(
    *,
    trained: int = 2048,
    drafting: SelfDrafting | None = None,
    quant: str = "Q8_0",
    n_layer: int = 4,
) -> ModelFacts:
    return ModelFacts(
        architecture="llama",
        name="tiny",
        n_layer=n_layer,
        n_head=4,
        n_head_kv=2,
        n_embd=64,
        head_dim_k=16,
        head_dim_v=16,
        context_length=trained,
        file_type=7,
        quantization=quant,
        tensor_data_size=10 * MIB,
        n_params=10**7,
        vocab_size=3,
        drafting=drafting or SelfDrafting(""),
    )


def local(
    path: str,
    *,
    size: int = 100 * MIB,
    mismatch: str | None = None,
    trained: int = 2048,
    drafting: SelfDrafting | None = None,
    quant: str = "Q8_0",
    n_layer: int = 4,
) -> LocalModel:
    model_facts = facts(trained=trained, drafting=drafting, quant=quant, n_layer=n_layer)
    return LocalModel(path, (path,), size, model_facts, VOCAB, mismatch=mismatch)


def group(quant: str, size: int, name: str = "") -> QuantGroup:
    return QuantGroup(quant, (GGUFFile(name or f"m-{quant}.gguf", size, None),))


def option(
    repo: str,
    *groups: QuantGroup,
    mismatch: str | None = None,
    error: str | None = None,
    source: str = "catalog pair",
) -> DraftOption:
    candidate = DraftCandidate(repo, None, 0.1, source, notes=f"notes of {repo}")
    return DraftOption(candidate, groups[0] if groups else None, facts(), mismatch, error, groups)


def inspected(
    *groups: QuantGroup, drafting: SelfDrafting | None = None, heads: tuple[QuantGroup, ...] = ()
) -> RepoInspected:
    return RepoInspected(1, TARGET, groups, facts(drafting=drafting), VOCAB, heads)


def calibrated() -> Calibrated:
    """1.5x; 4 tokens per draft ran 25 % faster than 8, far beyond the 1 % noise."""
    return Calibrated(3, 0.8, 12.0, 8.0, 1.5, 4, 1.0, ((4, 12.0), (8, 9.0)), noise=0.01)


def test_the_selection_model_imports_no_qt() -> None:
    code = (
        "import sys, app.ui.wizard.pair_selection, app.ui.wizard.words\n"
        "print([n for n in sys.modules if n.split('.')[0] in ('PySide6', 'shiboken6')])"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- the context size ----------------------------------------------------------------------


def test_a_context_longer_than_the_trained_length_is_lowered_and_said() -> None:
    state = WizardState(n_ctx=8192)
    note = lower_context(state, 2048)
    assert state.n_ctx == 2048
    assert "lowered from 8,192 to 2,048 tokens" in note


def test_a_context_within_the_trained_length_or_an_unknown_one_is_kept_silently() -> None:
    state = WizardState(n_ctx=1024)
    assert lower_context(state, 2048) == "" and state.n_ctx == 1024
    assert lower_context(state, 0) == "" and state.n_ctx == 1024


# --- the target ----------------------------------------------------------------------------


def test_a_drafting_head_on_this_computer_is_no_target(tmp_path: Path) -> None:
    choices = TargetChoices(Library(tmp_path), tiny_catalog(), tmp_path / "models")
    choices.local = [local("/m/plain.gguf"), local("/m/head.gguf", drafting=HEAD)]
    assert choices.selectable(0) == choices.local[0]
    assert choices.selectable(1) is None
    assert choices.selectable(2) is None and choices.selectable(-1) is None
    state = WizardState(hardware=HARDWARE)
    assert local_fit(state, choices.local[1]) is None
    fit = local_fit(state, choices.local[0])
    assert fit is not None and fit.label is FitLabel.FITS


def test_a_model_on_this_computer_says_where_it_lies(tmp_path: Path) -> None:
    root = tmp_path / "models"
    assert where_text(local(str(root / "a" / "x.gguf")), root) == "in SpecDeck's models folder"
    assert where_text(local("/elsewhere/x.gguf"), root) == "/elsewhere/x.gguf"
    in_library = LocalModel("/elsewhere/x.gguf", (), 1, facts(), VOCAB, in_library=True)
    assert where_text(in_library, root) == "in your library"


def test_offline_a_hub_target_goes_on_with_its_local_copy_in_the_curated_quantization(
    tmp_path: Path,
) -> None:
    root = tmp_path / "models"
    folder = root / TARGET.replace("/", "--")
    choices = TargetChoices(Library(tmp_path), tiny_catalog(), root)
    f32 = local(str(folder / "tiny-1b-F32.gguf"), quant="F32")
    q8 = local(str(folder / "tiny-1b-Q8_0.gguf"), quant="Q8_0")  # the catalog's quantization
    choices.local = [local("/m/other.gguf"), f32, q8]
    assert choices.chosen_local(None, TARGET, online=False) == q8
    assert choices.complete(None, TARGET, online=False)
    assert choices.blocked_reason(None, TARGET, online=False) == ""
    # online, the Hub repository itself is the choice
    assert choices.chosen_local(None, TARGET, online=True) is None
    assert choices.complete(None, TARGET, online=True)


def test_a_file_the_library_holds_under_the_repository_counts_as_its_local_copy(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere" / "tiny.gguf"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"GGUF")
    library = Library(tmp_path)
    path = str(elsewhere)
    library.models["m"] = LibraryModel(
        "m", path, (path,), 4, "Q8_0", "llama", 2048, 1, "tiny", "hub", repo_id=TARGET
    )
    choices = TargetChoices(library, tiny_catalog(), tmp_path / "models")
    choices.local = [local(str(elsewhere))]
    assert choices.local_copy(TARGET) == choices.local[0]
    assert choices.local_copy(DRAFT) is None


def test_offline_a_hub_target_without_a_local_copy_blocks_next_and_says_why(
    tmp_path: Path,
) -> None:
    choices = TargetChoices(Library(tmp_path), tiny_catalog(), tmp_path / "models")
    assert not choices.complete(None, TARGET, online=False)
    reason = choices.blocked_reason(None, TARGET, online=False)
    assert reason.startswith(f"{TARGET} is not on this computer") and "Retry" in reason
    assert choices.blocked_reason(None, None, online=False) == ""  # nothing chosen: nothing to say


def test_choosing_another_target_file_forgets_the_draft_and_caps_the_context() -> None:
    state = WizardState(n_ctx=8192, target_repo=TARGET, target_group=group("Q8_0", 1))
    state.draft, state.draft_mtp = option(DRAFT, group("Q4_0", 1)), False
    target = local("/m/t.gguf", trained=4096)
    choose_local_target(state, target)
    assert state.target_local == target and state.target_repo is None
    assert state.target_group is None and state.draft is None and state.draft_mtp is None
    assert state.n_ctx == 4096 and "lowered" in state.context_note
    # the same file again keeps what was chosen after it
    state.draft_local = local("/m/d.gguf")
    choose_local_target(state, target)
    assert state.draft_local is not None and state.context_note == ""


def test_choosing_another_hub_repository_forgets_what_was_read_of_the_last() -> None:
    catalog = tiny_catalog()
    state = WizardState(target_local=local("/m/t.gguf"))
    state.inspected, state.target_group = inspected(group("Q8_0", 1)), group("Q8_0", 1)
    assert choose_hub_target(state, TARGET, catalog)
    assert state.target_local is None and state.inspected is None and state.target_group is None
    assert state.target_entry is not None and state.target_entry.repo == TARGET
    state.inspected = inspected(group("Q8_0", 1))
    assert choose_hub_target(state, TARGET, catalog) and state.inspected is not None  # same one
    assert not choose_hub_target(state, None, catalog)


# --- the target's quantization -------------------------------------------------------------


def test_the_curated_quantization_is_preselected_unless_another_was_chosen_before() -> None:
    state = WizardState(hardware=HARDWARE, n_ctx=512)
    choose_hub_target(state, TARGET, tiny_catalog())  # the catalog recommends Q8_0
    state.inspected = inspected(group("F32", 400 * MIB), group("Q8_0", 100 * MIB))
    rows = quant_rows(state)
    assert [r.group.quant for r in rows] == ["F32", "Q8_0"]
    assert all(r.fit.label is FitLabel.FITS for r in rows)
    assert preselected_quant(state, rows) == "Q8_0"
    choose_quant(state, rows[0].group)
    assert preselected_quant(state, rows) == "F32"  # back on the page: the earlier choice


def test_a_quantization_that_does_not_fit_is_not_preselected() -> None:
    state = WizardState(hardware=HARDWARE, n_ctx=512)
    state.inspected = inspected(group("F32", 64 << 30), group("Q4_0", 100 * MIB))
    rows = quant_rows(state)
    assert rows[0].fit.label is FitLabel.NO_FIT
    assert preselected_quant(state, rows) == "Q4_0"


def test_a_target_that_drafts_for_itself_is_sized_with_its_mtp_context() -> None:
    state = WizardState(hardware=HARDWARE, n_ctx=4096)
    state.inspected = inspected(group("Q8_0", 100 * MIB))
    plain = quant_rows(state)[0].estimate.needed
    state.inspected = inspected(group("Q8_0", 100 * MIB), drafting=MTP)
    assert quant_rows(state)[0].estimate.needed > plain


def test_choosing_another_quantization_forgets_the_draft_checked_against_the_last() -> None:
    q8, f32 = group("Q8_0", 1), group("F32", 2)
    state = WizardState(target_group=q8, draft=option(DRAFT, group("Q4_0", 1)))
    choose_quant(state, q8)
    assert state.draft is not None
    choose_quant(state, f32)
    assert state.draft is None and state.target_group == f32


def test_more_than_three_head_files_are_named_three_and_counted() -> None:
    heads = tuple(group("F16", 1, f"head-{i}.gguf") for i in range(5))
    text = heads_text(inspected(group("Q8_0", 1), heads=heads))
    assert "5 drafting head file(s) (head-0.gguf, head-1.gguf, head-2.gguf and 2 more)" in text


# --- the draft -----------------------------------------------------------------------------


def test_a_target_with_next_token_layers_drafts_for_itself_on_the_first_visit_only() -> None:
    state = WizardState(target_local=local("/m/t.gguf", drafting=MTP))
    assert offer_own_heads(state) and state.draft_mtp is True
    state.draft_mtp = False  # the person unticked it: a later visit keeps that
    assert offer_own_heads(state) and state.draft_mtp is False
    ngram = WizardState(target_local=local("/m/t.gguf", drafting=MTP), draft_ngram=True)
    assert offer_own_heads(ngram) and ngram.draft_mtp is False
    plain = WizardState(target_local=local("/m/t.gguf"))
    assert not offer_own_heads(plain) and plain.draft_mtp is False


def test_the_first_compatible_draft_is_preselected_past_incompatible_ones() -> None:
    choices = DraftChoices()
    choices.add_checked(option("x/Stranger", group("Q4_0", 1), mismatch="vocabulary type: a, b"))
    choices.add_checked(option("x/Unread", error="the Hub timed out"))
    choices.set_local([local("/m/bad.gguf", mismatch="add_bos: x"), local("/m/good.gguf")])
    assert choices.row_count == 4
    assert [choices.compatible(r) for r in range(5)] == [False, False, False, True, False]
    assert choices.first_compatible() == 3
    assert choices.local_row("/m/good.gguf") == 3 and choices.local_row("/m/gone.gguf") is None
    assert choices.compatible_count == 1


def test_a_vocabulary_file_without_layers_is_no_draft() -> None:
    choices = DraftChoices()
    choices.set_local([local("/m/vocab.gguf", n_layer=0), local("/m/d.gguf")])
    assert [m.path for m in choices.local] == ["/m/d.gguf"]


def test_draft_rows_say_in_words_why_a_draft_cannot_be_used() -> None:
    choices = DraftChoices(
        [
            option(DRAFT, group("Q4_0", 3 * MIB)),
            option("x/Stranger", group("Q4_0", 1), mismatch="vocabulary type: a, b"),
            option("x/Unread", error="the Hub timed out"),
        ],
        [local("/m/d.gguf", size=2 * MIB)],
    )
    good, stranger, unread, mine = choices.rows()
    assert good.texts == (DRAFT, "Q4_0", gib(3 * MIB), "catalog pair", "compatible")
    assert good.compatible and good.cell_tooltip(0) == f"notes of {DRAFT}"
    assert not stranger.compatible
    assert stranger.texts[4].startswith("incompatible: the two models split text into tokens")
    assert stranger.cell_tooltip(4).endswith("\n(vocabulary type: a, b)")  # the raw rule too
    assert unread.texts[1:3] == ("–", "–") and unread.texts[4] == "not checked: the Hub timed out"
    assert mine.texts[3] == "on this computer" and mine.cell_tooltip(0) == "/m/d.gguf"
    assert mine.cell_tooltip(2) == gib(2 * MIB)


def test_a_typed_repository_goes_first_and_replaces_its_earlier_check() -> None:
    choices = DraftChoices([option(DRAFT, group("Q4_0", 1)), option("x/Other", group("Q4_0", 1))])
    typed = option("x/Other", group("Q8_0", 2), source="typed by you")
    choices.put_typed(typed)
    assert [o.candidate.repo for o in choices.options] == ["x/Other", DRAFT]
    assert choices.options[0] == typed


def test_a_hub_draft_offers_its_quantizations_fastest_first_and_keeps_the_one_chosen() -> None:
    q4, q8, f16 = group("Q4_K_M", 3), group("Q8_0", 5), group("F16", 9)
    candidate = DraftCandidate(DRAFT, None, 0.1, "catalog pair")
    hub = DraftOption(candidate, q8, facts(), None, None, (f16, q8, q4))
    choices = DraftChoices([hub, option("x/Stranger", q4, mismatch="add_eos: x")])
    groups, index = choices.quant_offer(0, None)
    assert [g.quant for g in groups] == ["Q4_K_M", "Q8_0", "F16"] and groups[index] == q8
    groups, index = choices.quant_offer(0, DraftOption(hub.candidate, f16, None, None))
    assert groups[index] == f16  # back on the page: the quantization chosen before
    assert choices.quant_offer(1, None) == ([], 0)  # an incompatible draft offers none
    assert choices.quant_offer(-1, None) == ([], 0)


def test_choosing_a_draft_stores_exactly_one_source() -> None:
    q4, q8 = group("Q4_0", 1), group("Q8_0", 2)
    choices = DraftChoices([option(DRAFT, q8, q4)], [local("/m/d.gguf")])
    state = WizardState(draft_ngram=True)
    choices.choose(state, 0, q4, ngram=False, mtp=False)
    assert state.draft is not None and state.draft.group == q4 and not state.draft_ngram
    choices.choose(state, 0, None, ngram=False, mtp=False)
    assert state.draft is not None and state.draft.group == q8  # none chosen: its own
    choices.choose(state, 1, None, ngram=False, mtp=False)
    assert state.draft is None and state.draft_local == choices.local[0]
    choices.choose(state, 0, q4, ngram=True, mtp=False)
    assert state.draft is None and state.draft_local is None and state.draft_ngram
    choices.choose(state, -1, None, ngram=False, mtp=True)
    assert state.draft_mtp and state.no_draft_model


def test_the_draft_summary_warns_only_when_nothing_can_draft() -> None:
    found = DraftChoices([option(DRAFT, group("Q4_0", 1))])
    assert found.summary(False, "Offline.") == (
        "1 compatible draft(s), fastest sensible choice first. Offline.",
        False,
    )
    none = DraftChoices()
    text, warning = none.summary(True, "")
    assert "none is needed: the model drafts for itself" in text and not warning
    text, warning = none.summary(False, "")
    assert "n-gram drafting" in text and warning


# --- review, download and the saved pair ---------------------------------------------------


def test_only_what_is_not_on_this_computer_is_downloaded() -> None:
    target, draft = group("Q8_0", 1), group("Q4_0", 1)
    state = WizardState(target_repo=TARGET, target_group=target, draft=option(DRAFT, draft))
    assert [(i.repo_id, i.group) for i in download_items(state)] == [
        (TARGET, target),
        (DRAFT, draft),
    ]
    state.draft_mtp = True  # the target's own heads: the draft chosen earlier is not fetched
    assert [i.repo_id for i in download_items(state)] == [TARGET]
    local_target = WizardState(target_local=local("/m/t.gguf"), draft=option(DRAFT, draft))
    assert [i.repo_id for i in download_items(local_target)] == [DRAFT]


def test_a_draft_over_a_third_of_the_target_is_warned_about() -> None:
    state = WizardState(target_local=local("/m/t.gguf", size=100 * MIB))
    state.draft_local = local("/m/d.gguf", size=30 * MIB)
    assert draft_size_warning(state) == ""
    state.draft_local = local("/m/d.gguf", size=50 * MIB)
    assert draft_size_warning(state).startswith("Warning: the draft is 50% of the target's size")
    state.draft_ngram = True
    assert draft_size_warning(state) == ""


def test_the_suggested_name_joins_short_names_of_target_and_draft() -> None:
    state = WizardState(target_repo=TARGET, draft=option(DRAFT, group("Q4_0", 1)))
    assert default_pair_name(state) == "Tiny-1B + Tiny-0.1B"
    state.draft = option(TARGET, group("Q2_K", 1))  # a smaller file of the target itself
    assert default_pair_name(state) == "Tiny-1B + Q2_K"
    state.draft_local = local("/m/my-draft.gguf")
    state.draft = None
    assert default_pair_name(state) == "Tiny-1B + my-draft"
    state.draft_mtp = True
    assert default_pair_name(state) == "Tiny-1B + MTP"
    state.draft_ngram = True
    assert default_pair_name(WizardState(target_local=local("/m/t.gguf"), draft_ngram=True)) == (
        "t + n-gram"
    )


def test_the_saved_pair_carries_the_calibration_and_its_longest_draft() -> None:
    state = WizardState(n_ctx=2048, kv_type="q8_0", profile_name="P", target_model_id="t")
    state.draft_model_id, state.calibration = "d", calibrated()
    profile = pair_profile(state)
    assert (profile.name, profile.target, profile.draft) == ("P", "t", "d")
    assert (profile.n_ctx, profile.kv_type, profile.draft_source) == (2048, "q8_0", "model")
    assert profile.draft_max == 4  # 4 tokens clearly beat 8 (25 % apart, noise 1 %)
    assert profile.calibration["speedup"] == 1.5 and profile.calibration["acceptance"] == 0.8
    assert activates(state)
    state.activate = False  # a slower pair the person kept inactive
    assert not activates(state)


def test_a_pair_without_a_draft_model_is_saved_uncalibrated_and_made_active() -> None:
    state = WizardState(profile_name="P", target_model_id="t", draft_model_id="d")
    state.draft_mtp, state.calibration, state.activate = True, calibrated(), False
    profile = pair_profile(state)
    assert profile.draft is None and profile.draft_source == "mtp"
    assert profile.calibration == {} and profile.draft_max == 8
    assert activates(state)
