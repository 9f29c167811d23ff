"""``app.devtools.speed_reference``: SpecDeck's engine against llama-server, one drafting
method at a time. The figures are the developer's business (docs/speed-against-llama-server.md);
here the report's shape, on the tiny synthetic DFlash pair, a few tokens, one round."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.devtools.speed_pairs import LARGE_SHAPE, synthetic_pair
from app.devtools.speed_reference import METHODS, best_of_passes, load_request, main, server_args
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


def _pass(server: float, specdeck: float, *, same: bool = True, drafted: int = 40) -> dict:
    """One pass's report, as ``compare`` gives it, with the figures the passes combine."""
    return {
        "method": "eagle3",
        "server_tok_s": server,
        "specdeck_tok_s": specdeck,
        "target_only_tok_s": 2 * server,
        "specdeck_vs_server": round(specdeck / server, 3),
        "specdeck_vs_server_round_median": round(specdeck / server, 3) - 0.01,
        "specdeck_vs_server_round_range": [0.5, 1.5],
        "specdeck_step_host_ms_per_token": 1000.0 / specdeck,
        "identical_to_server": same,
        "identical_to_target_only": True,
        "server_drafted": 40,
        "server_accepted": 12,
        "specdeck_drafted": drafted,
        "specdeck_accepted": 12,
    }


@pytest.mark.fast
def test_best_of_passes_divides_each_sides_best_over_every_pass() -> None:
    # SpecDeck's best pass and the server's best pass are different passes
    passes = [_pass(1000.0, 980.0), _pass(1100.0, 900.0), _pass(900.0, 1050.0)]
    report = best_of_passes(passes)
    assert report["passes"] == 3
    assert report["server_tok_s"] == 1100.0 and report["specdeck_tok_s"] == 1050.0
    assert report["specdeck_vs_server"] == pytest.approx(1050.0 / 1100.0, abs=1e-3)
    assert report["specdeck_vs_server_each_pass"] == [0.98, 0.818, 1.167]
    medians = report["specdeck_vs_server_round_median_each_pass"]
    assert medians == pytest.approx([0.97, 0.808, 1.157])
    assert "specdeck_vs_server_round_median" not in report  # no one pass's figure as all's
    # the time per token is that of the pass SpecDeck's best tokens/sec came from
    assert report["specdeck_step_host_ms_per_token"] == pytest.approx(1000.0 / 1050.0)
    assert report["identical_to_server"] and report["counts_same_every_pass"]
    assert best_of_passes(passes[:1]) == passes[0]  # one pass: its own report, unchanged


@pytest.mark.fast
def test_one_differing_pass_makes_the_passes_neither_identical_nor_alike() -> None:
    report = best_of_passes([_pass(1000.0, 990.0), _pass(1000.0, 995.0, same=False, drafted=41)])
    assert report["identical_to_server"] is False
    assert report["counts_same_every_pass"] is False


@pytest.mark.fast
def test_all_methods_at_once_only_on_the_synthetic_pairs(capsys: pytest.CaptureFixture) -> None:
    assert main(["all", "target.gguf"]) == 2
    assert "--synthetic" in capsys.readouterr().err  # the usage, which names the pairs


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
    # a step's parts: the steps' verification and time outside llama_decode fit in the answer's
    # time, and so does the drafting; each step wrote its accepted drafts and one token
    assert report["specdeck_steps"] == report["tokens"] - report["specdeck_accepted"]
    answer_ms = report["tokens"] / report["specdeck_tok_s"] * 1000.0
    steps = report["specdeck_steps"]
    parts = report["specdeck_verify_ms_per_step"] + report["specdeck_host_ms_per_step"]
    assert 0 < parts * steps <= answer_ms * 1.01
    assert 0 < report["specdeck_draft_ms_per_step"] * steps <= answer_ms * 1.01
    served_ms = report["server_tokens"] / report["server_tok_s"] * 1000.0
    assert 0 < report["server_ms_per_step"] <= served_ms
    ratio = report["specdeck_tok_s"] / report["server_tok_s"]
    assert report["specdeck_vs_server"] == pytest.approx(ratio, abs=1e-3)
    # one round: its own ratio is the only one, and the best of each side is that round
    assert report["specdeck_vs_server_round_range"] == [pytest.approx(ratio, abs=1e-3)] * 2
    assert report["specdeck_vs_server_round_median"] == pytest.approx(ratio, abs=1e-3)
