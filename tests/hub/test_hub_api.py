"""Hub search, listing and compatibility-before-download against the fake Hub."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.gguf.compat import IncompatiblePairError, check_compatible, first_mismatch
from app.gguf.facts import model_facts, vocab_info
from app.gguf.reader import GGUFFormatError, read_local_header
from app.models.hub import (
    GGUFFile,
    HubError,
    ModelRef,
    group_gguf_files,
    list_gguf_files,
    quant_from_filename,
    read_remote_header,
    search_models,
)
from tests.ggufs import spm_tokens, write_gguf
from tests.hub.fake_hub import FakeHub

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


def test_search_sorts_by_downloads(populated_hub: FakeHub) -> None:
    hits = search_models("gguf")
    assert [h.repo_id for h in hits][:2] == ["acme/Small-GGUF", "acme/Big-GGUF"]
    assert next(h for h in hits if h.repo_id == "acme/Gated-GGUF").gated
    assert [h.repo_id for h in search_models("other")] == ["other/Other-GGUF"]
    request = next(e for e in populated_hub.log if e.path == "/api/models")
    assert request.method == "GET"


def test_listing_groups_by_quant_with_sizes(
    populated_hub: FakeHub, gguf_bytes: dict[str, bytes]
) -> None:
    groups = list_gguf_files("acme/Big-GGUF")
    assert [g.quant for g in groups] == ["Q4_K_M", "Q8_0"]  # smallest first, README left out
    assert groups[1].size == len(gguf_bytes["big-Q8_0.gguf"])
    assert groups[1].first.sha256 is not None and len(groups[1].first.sha256) == 64


def test_split_files_are_one_model() -> None:
    files = [GGUFFile(f"m-Q4_K_M-0000{i}-of-00003.gguf", 10, None) for i in (2, 1, 3)]
    files += [
        GGUFFile("m-Q8_0.gguf", 50, None),
        GGUFFile("mmproj-m-f16.gguf", 5, None),
        GGUFFile("m-Q6_K-00001-of-00002.gguf", 5, None),
    ]  # incomplete split: skipped
    groups = group_gguf_files(files)
    assert [(g.quant, g.size, g.is_split) for g in groups] == [
        ("Q4_K_M", 30, True),
        ("Q8_0", 50, False),
    ]
    assert groups[0].first.path.endswith("00001-of-00003.gguf")
    assert "3 parts" in groups[0].label


def test_parts_that_name_different_splits_are_no_model() -> None:
    files = [
        GGUFFile("m-Q4_K_M-00001-of-00002.gguf", 10, None),
        GGUFFile("m-Q4_K_M-00002-of-00003.gguf", 10, None),  # a part of another split
    ]
    assert group_gguf_files(files) == []


def test_a_local_split_model_s_size_counts_its_parts_only(tmp_path: Path) -> None:
    for i, size in ((1, 3), (2, 5)):
        (tmp_path / f"m-0000{i}-of-00002.gguf").write_bytes(b"x" * size)
    (tmp_path / "m-00001-of-00003.gguf").write_bytes(b"x" * 100)  # parts of other models
    (tmp_path / "m-Q8_0-00001-of-00002.gguf").write_bytes(b"x" * 100)
    assert ModelRef(path=tmp_path / "m-00001-of-00002.gguf").size() == 8


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf", "Q4_K_M"),
        ("Llama-3.2-1B-Instruct-IQ4_XS.gguf", "IQ4_XS"),
        ("gemma-3-1b-it-BF16.gguf", "BF16"),
        ("SmolLM2-135M-Instruct-Q8_0.gguf", "Q8_0"),
        ("model-fp16.gguf", "F16"),
        ("model.gguf", "unknown"),
    ],
)
def test_quant_from_filename(name: str, quant: str) -> None:
    assert quant_from_filename(name) == quant


def test_range_read_reads_only_the_header(
    populated_hub: FakeHub, gguf_bytes: dict[str, bytes]
) -> None:
    header = read_remote_header("acme/Big-GGUF", "big-Q8_0.gguf")
    facts = model_facts(header)
    assert (facts.architecture, facts.n_layer, facts.n_embd, facts.quantization) == (
        "llama",
        4,
        128,
        "Q8_0",
    )
    got = sum(
        int(e.range.split("-")[1]) - int(e.range.split("=")[1].split("-")[0]) + 1
        for e in populated_hub.requests_for("big-Q8_0.gguf")
        if e.range
    )
    assert got < len(gguf_bytes["big-Q8_0.gguf"])  # never the whole file
    assert all(e.range for e in populated_hub.requests_for("big-Q8_0.gguf"))


def test_range_read_grows_the_window(populated_hub: FakeHub) -> None:
    from app.gguf.reader import read_header
    from app.models.hub import file_url
    from app.models.hub_http import HttpRangeSource

    source = HttpRangeSource(file_url("acme/Big-GGUF", "big-Q8_0.gguf"))
    header = read_header(source, first_window=256)
    assert vocab_info(header).size == len(spm_tokens())
    assert len(populated_hub.requests_for("big-Q8_0.gguf")) > 3


def test_remote_pair_compatibility(populated_hub: FakeHub) -> None:
    target = vocab_info(read_remote_header("acme/Big-GGUF", "big-Q4_K_M.gguf"))
    draft = vocab_info(read_remote_header("acme/Small-GGUF", "small-Q8_0.gguf"))
    other = vocab_info(read_remote_header("other/Other-GGUF", "other-Q8_0.gguf"))
    assert first_mismatch(target, draft) is None
    with pytest.raises(IncompatiblePairError, match="token 300"):
        check_compatible(target, other)


def test_gated_repo_needs_a_token(populated_hub: FakeHub) -> None:
    with pytest.raises(HubError, match="gated repository.*token"):
        read_remote_header("acme/Gated-GGUF", "small-Q8_0.gguf", token=False)
    header = read_remote_header("acme/Gated-GGUF", "small-Q8_0.gguf", token="hf_valid_test_token")
    assert model_facts(header).n_layer == 2


def test_missing_repo_and_file(populated_hub: FakeHub) -> None:
    with pytest.raises(HubError, match="repository not found"):
        list_gguf_files("nobody/nothing")
    with pytest.raises(HubError, match="file does not exist"):
        read_remote_header("acme/Big-GGUF", "nope.gguf")


def test_unreachable_hub_is_explained() -> None:
    with pytest.raises(HubError, match="cannot reach the Hugging Face Hub"):
        read_remote_header("acme/Big-GGUF", "big-Q8_0.gguf", endpoint="http://127.0.0.1:9")


def test_local_header_and_model_ref(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m-Q8_0.gguf", n_layer=3, context_length=4096, file_type=7)
    facts = model_facts(read_local_header(path))
    assert (facts.n_layer, facts.n_head, facts.n_head_kv, facts.head_dim_k) == (3, 4, 2, 16)
    assert facts.context_length == 4096
    assert facts.kv_bytes(1000, 2.0) == 3 * 2 * 32 * 1000 * 2
    assert facts.tensor_data_size > 0
    ref = ModelRef.parse(str(path))
    assert ref.path == path and ref.size() == path.stat().st_size
    remote = ModelRef.parse("acme/Big-GGUF:big-Q8_0.gguf")
    assert (remote.repo_id, remote.filename) == ("acme/Big-GGUF", "big-Q8_0.gguf")
    with pytest.raises(ValueError, match="owner/repo:file"):
        ModelRef.parse("nonsense:file.gguf")


def test_not_a_gguf(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(100))
    with pytest.raises(GGUFFormatError, match="not a GGUF"):
        read_local_header(bad)
    truncated = tmp_path / "short.gguf"
    truncated.write_bytes(write_gguf(tmp_path / "ok.gguf").read_bytes()[:200])
    with pytest.raises(GGUFFormatError, match="ends inside"):
        read_local_header(truncated)


def _cli(argv: list[str]) -> int:
    from app.cli.hub import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_cli_check_pair(
    populated_hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = write_gguf(tmp_path / "local.gguf")
    assert _cli(["check-pair", "acme/Big-GGUF:big-Q8_0.gguf", str(local)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "target: plain model",
        "draft: plain model",
        "compatible",
    ]
    assert (
        _cli(["check-pair", "acme/Big-GGUF:big-Q8_0.gguf", "other/Other-GGUF:other-Q8_0.gguf"]) == 1
    )
    out = capsys.readouterr().out
    assert "token 300" in out and "different" in out
    assert _cli(["check-pair", str(local), "acme/Big-GGUF:missing.gguf"]) == 2
    assert "file does not exist" in capsys.readouterr().err


def test_cli_fit_and_pull(populated_hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        _cli(
            [
                "fit",
                "acme/Big-GGUF:big-Q8_0.gguf",
                "acme/Small-GGUF:small-Q8_0.gguf",
                "--ctx",
                "1024",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "KV" in out and out.strip().endswith("fits")
    assert _cli(["pull", "acme/Small-GGUF", "small-Q8_0.gguf"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_file() and path.parent.parent.name == "models"
    from app.models.library import Library

    assert Library().find_by_path(path) is not None
    assert _cli(["pull", "acme/Small-GGUF", "small-Q8_0.gguf", "--offline"]) == 0
    assert _cli(["pull", "acme/Big-GGUF", "big-Q8_0.gguf", "--offline"]) == 2
    assert "not downloaded yet" in capsys.readouterr().err
