"""The catalog's DFlash and DSpark sidecars: block drafters named with their targets, where
their pages were read and when, unchecked until check-pair has run on the real Hub."""

from __future__ import annotations

import pytest

from app.models.catalog import (
    DRAFTING_WORDS,
    Catalog,
    CatalogError,
    CatalogModel,
    CatalogPair,
    DraftCandidate,
)

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

BLOCK_DRAFTERS = {
    # id: (repo, curated file, drafting, the targets it is paired with)
    "qwen3-8b-dflash": (
        "ggml-org/Qwen3-8B-GGUF",
        "dflash-Qwen3-8B-Q8_0.gguf",
        "dflash",
        {"qwen3-8b"},
    ),
    "qwen3-8b-dspark": (
        "ggml-org/Qwen3-8B-GGUF",
        "dspark-Qwen3-8B-Q8_0.gguf",
        "dspark",
        {"qwen3-8b"},
    ),
    "qwen3.5-9b-dflash": (
        "AtomicChat/Qwen3.5-9B-DFlash-GGUF",
        "Qwen3.5-9B-DFlash.Q8_0.gguf",
        "dflash",
        {"qwen3.5-9b-mtp"},
    ),
    "qwen3.6-27b-dflash": (
        "ggml-org/Qwen3.6-27B-GGUF",
        "dflash-Qwen3.6-27B-Q8_0.gguf",
        "dflash",
        {"qwen3.6-27b-mtp", "qwen3.6-27b-mtp-iq4xs"},
    ),
    "qwen3.6-35b-a3b-dflash": (
        "ggml-org/Qwen3.6-35B-A3B-GGUF",
        "dflash-Qwen3.6-35B-A3B-Q8_0.gguf",
        "dflash",
        {"qwen3.6-35b-a3b-mtp", "qwen3.6-35b-a3b-mtp-iq4xs"},
    ),
}


def test_the_shipped_block_drafters_load_unchecked_with_their_targets() -> None:
    catalog = Catalog.load()
    heads = {m.id: m for m in catalog.models if m.drafting in ("dflash", "dspark")}
    assert set(heads) == set(BLOCK_DRAFTERS)
    for model_id, (repo, file, drafting, targets) in BLOCK_DRAFTERS.items():
        head = heads[model_id]
        assert (head.repo, head.file, head.drafting) == (repo, file, drafting)
        assert head.draft_only and head not in catalog.targets()  # a sidecar, never a target
        # where and when its page was read; unchecked until check-pair runs on the real Hub
        assert head.confirmed and head.confirmed.startswith("search tool, 2026-12-02: ")
        assert "http" in head.confirmed
        assert head.checked is None
        pairs = [p for p in catalog.pairs if p.draft == model_id]
        assert {p.target for p in pairs} == targets and all(p.checked is None for p in pairs)
        for target_id in targets:
            target = catalog.model(target_id)
            assert target in catalog.targets() and catalog.checked(target) is None
            # the sidecar is offered to its target, the file named, the method in words
            offered = [
                c for c in catalog.draft_candidates(target.repo) if (c.repo, c.file) == (repo, file)
            ]
            assert [(c.source, c.method) for c in offered] == [
                ("catalog pair", DRAFTING_WORDS[drafting])
            ]
    # the MTP-capable Qwen3.5 / 3.6 targets each name a DFlash sidecar
    mtp_qwen = [
        m for m in catalog.targets() if m.drafting == "mtp" and m.family.startswith("qwen3.")
    ]
    paired = {p.target for p in catalog.pairs if catalog.model(p.draft).drafting == "dflash"}
    assert {m.id for m in mtp_qwen} - paired == {"qwen3.5-397b-a17b-mtp"}  # none read for it


def test_the_method_is_named_in_words() -> None:
    catalog = Catalog.load()
    assert catalog.model("qwen3.6-27b-dflash").method == "DFlash block drafter"
    assert catalog.model("qwen3-8b-dspark").method == "DSpark block drafter"
    assert catalog.drafting_words(catalog.model("qwen3.6-27b-mtp")) == (
        "drafts for itself (MTP) · DFlash block drafter in the catalog"
    )
    assert catalog.drafting_words(catalog.model("qwen3-8b")) == (
        "DFlash block drafter in the catalog · DSpark block drafter in the catalog"
    )
    assert catalog.drafting_words(catalog.model("smollm2-1.7b-instruct")) == ""
    plain, head = catalog.draft_candidates("bartowski/Qwen_Qwen3-8B-GGUF")[:2]
    assert plain.origin == "catalog pair"  # a plain draft model reads as before
    assert head.origin == "catalog pair · DFlash block drafter"


def test_a_block_drafter_is_offered_only_to_the_targets_it_is_paired_with() -> None:
    catalog = Catalog.load()
    # another Qwen3 target shares the family but not the hidden states the head reads
    other = catalog.draft_candidates("someone/Qwen3-32B-GGUF")
    assert other and not any(c.method for c in other)
    assert not any(c.repo == "ggml-org/Qwen3-8B-GGUF" for c in other)
    # a Qwen3.6 27B drafter is not the 35B-A3B's, nor the other way round
    moe = catalog.draft_candidates("unsloth/Qwen3.6-35B-A3B-MTP-GGUF")
    assert [c.repo for c in moe if c.method] == ["ggml-org/Qwen3.6-35B-A3B-GGUF"]


def test_an_unknown_drafting_kind_or_a_head_offered_as_a_target_is_refused() -> None:
    with pytest.raises(CatalogError, match="drafting 'medusa' is none of"):
        CatalogModel("m", "a/M-GGUF", "m", 1.0, "Q8_0", drafting="medusa")
    with pytest.raises(CatalogError, match=r"\(DSpark block drafter\) drafts for a target"):
        CatalogModel("h", "a/H-GGUF", "m", 1.0, "Q8_0", drafting="dspark")
    head = CatalogModel("h", "a/H-GGUF", "m", 0.1, "Q8_0", draft_only=True, drafting="dflash")
    target = CatalogModel("t", "a/T-GGUF", "m", 1.0, "Q8_0")
    catalog = Catalog((target, head), (CatalogPair("t", "h"),))
    assert catalog.drafting_words(target) == "DFlash block drafter in the catalog"
    assert DraftCandidate("a/D-GGUF", None, 0.1, "same family").origin == "same family"


def test_a_damaged_catalog_file_names_the_bad_drafting(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "catalog.json"
    path.write_text(
        '{"models": [{"id": "m", "repo": "a/M", "family": "m", "params_b": 1, "quant": "Q8_0",'
        ' "drafting": "dflash"}], "pairs": []}'
    )
    monkeypatch.setenv("SPECDECK_CATALOG", str(path))
    with pytest.raises(CatalogError, match="draft_only must be true"):
        Catalog.load()
