"""Local library, profiles and the curated catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.models.catalog import Catalog, parse_family
from app.models.library import Library, LibraryError, ModelInUseError, Profile, data_dir
from tests.ggufs import write_gguf

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Library:
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "data"))
    return Library()


def test_data_dir_override(library: Library, tmp_path: Path) -> None:
    assert data_dir() == tmp_path / "data" and library.root == data_dir()


def test_import_validates_and_persists(library: Library, tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m-Q8_0.gguf", n_layer=3, context_length=8192, file_type=7)
    model = library.import_gguf(path)
    assert (model.architecture, model.quantization, model.context_length) == ("llama", "Q8_0", 8192)
    assert model.size == path.stat().st_size and model.source == "import"
    again = Library()
    assert again.models[model.id] == model and again.find_by_path(path) == model


def test_import_refuses_bad_files(library: Library, tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(LibraryError, match="not a usable GGUF"):
        library.import_gguf(junk)
    with pytest.raises(LibraryError, match="not a .gguf"):
        library.import_gguf(Path(__file__))
    part = write_gguf(tmp_path / "m-00001-of-00002.gguf")
    with pytest.raises(LibraryError, match="missing m-00002-of-00002.gguf"):
        library.import_gguf(part)
    assert library.models == {}


def test_profiles_and_delete(library: Library, tmp_path: Path) -> None:
    downloaded = write_gguf(library.models_root / "acme--Big" / "big.gguf")
    target = library.add_downloaded("acme/Big", [downloaded])
    draft = library.import_gguf(write_gguf(tmp_path / "small.gguf"))
    library.save_profile(Profile("Big + small", target.id, draft.id, n_ctx=2048))
    assert list(library.profiles) == ["Big + small"]
    assert library.pairs_using(draft.id) == ["Big + small"]
    assert library.unique_profile_name("Big + small") == "Big + small (2)"
    t_spec, d_spec = library.model_specs(library.profiles["Big + small"])
    assert t_spec.path == target.path and d_spec is not None and d_spec.n_ctx == 2048
    with pytest.raises(ModelInUseError, match="used by the pair"):
        library.delete_model(target.id)
    library.delete_model(target.id, force=True)
    assert not Path(target.path).exists()  # downloaded: the file goes
    assert library.profiles == {}
    library.delete_model(draft.id)
    assert Path(draft.path).exists()  # imported: the file stays where the person put it
    with pytest.raises(LibraryError, match="not in the library"):
        library.save_profile(Profile("x", "nope", None))


def test_damaged_library_is_reported(library: Library) -> None:
    library.root.mkdir(parents=True, exist_ok=True)
    library.file.write_text("{broken")
    with pytest.raises(LibraryError, match="damaged"):
        Library()


def test_catalog_is_consistent() -> None:
    catalog = Catalog.load()
    # a repository may hold a target and its assistant: each entry is a repository and file
    entries = [(m.repo, m.file) for m in catalog.models]
    assert len(entries) == len(set(entries))
    assert all("/" in r for r, _ in entries)
    for pair in catalog.pairs:
        target, draft = catalog.model(pair.target), catalog.model(pair.draft)
        assert target.family == draft.family and draft.params_b < target.params_b
    assert {m.family for m in catalog.targets()} >= {
        "qwen2.5",
        "qwen3",
        "llama3",
        "gemma3",
        "smollm2",
    }
    # Each entry says where its repository and file names were confirmed.
    assert all(m.confirmed and "http" in m.confirmed for m in catalog.models)
    # Smallest first: the pair most likely to run well on a small machine leads.
    sizes = [m.params_b for m in catalog.targets()]
    assert sizes == sorted(sizes) and sizes[0] < 2


def test_draft_ranking() -> None:
    catalog = Catalog.load()
    ranked = catalog.draft_candidates(
        "bartowski/Qwen_Qwen3-8B-GGUF",
        hub_repos=["someone/Qwen3-1.7B-GGUF", "x/Qwen3-4B-GGUF", "x/Llama-3.2-1B-GGUF"],
    )
    assert ranked[0].repo == "Qwen/Qwen3-0.6B-GGUF" and ranked[0].source == "catalog pair"
    rest = [c.repo for c in ranked[1:]]
    assert "someone/Qwen3-1.7B-GGUF" in rest and "x/Llama-3.2-1B-GGUF" not in rest
    assert "x/Qwen3-4B-GGUF" not in rest  # half the target: too big to pay off
    unknown = catalog.draft_candidates("u/Qwen2.5-Coder-14B-Instruct-GGUF")
    assert unknown[0].repo.startswith("lmstudio-community/Qwen2.5-Coder")
    assert unknown[0].source == "same family"


def test_parse_family() -> None:
    assert parse_family("Qwen/Qwen2.5-Coder-7B-Instruct-GGUF") == ("qwen2.5", 7.0)
    assert parse_family("bartowski/SmolLM2-135M-Instruct-GGUF") == ("smollm2", 0.135)
    assert parse_family("bartowski/google_gemma-3-27b-it-GGUF") == ("gemma-3", 27.0)


def test_catalog_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"models": [], "pairs": [{"target": "a", "draft": "b"}]}))
    monkeypatch.setenv("SPECDECK_CATALOG", str(path))
    with pytest.raises(ValueError, match="unknown model"):
        Catalog.load()


def test_catalog_self_drafting_and_assistant_entries() -> None:
    catalog = Catalog.load()
    mtp = [m for m in catalog.models if m.drafting == "mtp"]
    assistants = [m for m in catalog.models if m.drafting == "assistant"]
    assert {m.family for m in mtp} >= {"qwen3.5", "qwen3.6", "qwen3.6-moe", "glm4.5"}
    assert {m.family for m in assistants} == {"gemma4"}
    assert all(m in catalog.targets() for m in mtp)  # a self-drafting model is a target
    paired = {p.draft for p in catalog.pairs}
    assert all(a.id in paired and a.draft_only for a in assistants)
    for model in mtp + assistants:
        # where and when it was read, and unchecked until check-pair has run on the real Hub
        assert (
            model.confirmed
            and model.confirmed.startswith("search tool, 2026-")
            and "http" in model.confirmed
        )
        assert model.checked is None and catalog.checked(model) is None
        assert all(f.size is None or f.size > 0 for f in model.files)
    # sizes are recorded only where a page gave them in bytes
    sizes = {f.name: f.size for m in catalog.models for f in m.files if f.size is not None}
    assert sizes == {
        "gemma-4-12B-it-assistant-Q8_0.gguf": 465_109_248,
        "gemma-4-12B-it-assistant-BF16.gguf": 861_520_128,
        "Qwen3.5-9B-DFlash.Q8_0.gguf": 1_383_768_224,
        "dflash-Qwen3.6-27B-Q8_0.gguf": 1_849_481_440,
    }
    # an assistant is offered only to the target it is paired with
    drafts = catalog.draft_candidates("unsloth/gemma-4-12B-it-qat-GGUF")
    assert (drafts[0].repo, drafts[0].file) == (
        "unsloth/gemma-4-12B-it-qat-GGUF",
        "mtp-gemma-4-12B-it.gguf",
    )
    others = catalog.draft_candidates("unsloth/gemma-4-12b-it-GGUF")
    assert [(d.repo, d.source) for d in others] == [
        ("sjakek/gemma4-12b-mtp-assistant", "catalog pair")
    ]
