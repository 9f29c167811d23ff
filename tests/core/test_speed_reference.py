"""``app.devtools.speed_reference``: SpecDeck's engine against llama-server, one drafting
method at a time. The figures are the developer's business (docs/speed-against-llama-server.md);
here the report's shape, on the tiny synthetic DFlash pair, a few tokens, one round."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.speed_pairs import LARGE_SHAPE, synthetic_pair
from app.devtools.speed_reference import METHODS, load_request, server_args
from app.engine.config import DraftSource
from app.gguf.check import check_local_pair
from app.gguf.facts import self_drafting
from app.gguf.fields import header_int
from app.gguf.reader import read_local_header
from tests.core.test_dflash_synthetic import LLAMA_SERVER, run_module

FIXED_POLICY = ["--spec-draft-n-max", "5", "--spec-draft-n-min", "0", "--spec-draft-p-min", "0"]


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(METHODS))
def test_both_sides_get_the_methods_fixed_policy(name: str) -> None:
    method = METHODS[name]
    draft = Path("draft.gguf") if method.with_draft else None
    args = server_args(method, draft, 5, "0")
    at = args.index("--spec-type")
    assert args[at + 1] == method.spec_type
    assert args[at + 2 : at + 8] == FIXED_POLICY
    assert ("-md" in args) is method.with_draft
    load = load_request(method, Path("target.gguf"), draft, threads=1)
    assert (load.draft is None) is (not method.with_draft)
    assert load.draft_source is method.source
    if method.source is DraftSource.NGRAM:
        assert args[-4:] == ["--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "5"]


@pytest.mark.fast
def test_a_method_without_a_large_writer_says_so(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no 'large' synthetic pair for mtp"):
        synthetic_pair("mtp", tmp_path, "large")


def test_the_large_assistant_pair_is_a_wide_gemma4_and_an_assistant_that_passes_the_check(
    tmp_path: Path,
) -> None:
    target, assistant = synthetic_pair("assistant", tmp_path, "large")
    assert assistant is not None
    check_local_pair(target, assistant)  # raises where the pair would not load
    wide, narrow = read_local_header(target), read_local_header(assistant)
    assert header_int(wide, "gemma4.embedding_length", 0) == LARGE_SHAPE.n_embd
    assert self_drafting(narrow).method == "assistant"
    assert header_int(narrow, "gemma4-assistant.embedding_length", 0) < LARGE_SHAPE.n_embd


@pytest.mark.skipif(
    not LLAMA_SERVER.exists(),
    reason=f"llama-server is not built at {LLAMA_SERVER} (app.devtools.reference builds it)",
)
def test_the_report_on_the_tiny_dflash_pair() -> None:
    report = run_module(
        "app.devtools.speed_reference",
        "dflash",
        "--synthetic",
        "tiny",
        "--tokens",
        "24",
        "--rounds",
        "1",
        timeout_s=300,
    )
    assert report["method"] == "dflash" and report["spec_type"] == "draft-dflash"
    assert report["synthetic"] == "tiny" and report["rounds"] == 1
    assert report["identical_to_server"] is True
    assert report["identical_to_target_only"] is True
    assert 0 < report["tokens"] <= 24 and report["prompt_tokens"] == 6
    assert report["server_tokens"] - report["tokens"] in (0, 1)
    for side in ("server", "specdeck"):
        assert 0 <= report[f"{side}_accepted"] <= report[f"{side}_drafted"]
        assert report[f"{side}_acceptance"] == pytest.approx(
            report[f"{side}_accepted"] / max(report[f"{side}_drafted"], 1), abs=1e-4
        )
    assert report["server_tok_s"] > 0 and report["specdeck_tok_s"] > 0
    ratio = report["specdeck_tok_s"] / report["server_tok_s"]
    assert report["specdeck_vs_server"] == pytest.approx(ratio, abs=1e-3)
    # one round: its own ratio is the only one, and the best of each side is that round
    assert report["specdeck_vs_server_round_range"] == [pytest.approx(ratio, abs=1e-3)] * 2
    assert report["specdeck_vs_server_round_median"] == pytest.approx(ratio, abs=1e-3)
