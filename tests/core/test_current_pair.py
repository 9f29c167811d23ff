"""The current pair lives in the settings only: version 1's settings.json and library.json,
written as version 1 wrote them, load with the same current pair, whichever file is upgraded
first; a hostile library never breaks the settings. Real files, real GGUF headers; no Qt."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from app.models.library import LIBRARY_SCHEMA, Library, Profile
from app.store.current_pair import V1_ACTIVE_KEY, read_v1_active_pair
from app.store.settings import SETTINGS_SCHEMA, Settings, SettingsStore
from tests.ggufs import write_gguf

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    config, data = tmp_path / "config", tmp_path / "data"
    monkeypatch.setenv("SPECDECK_CONFIG_DIR", str(config))
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(data))
    return config, data


def v1_library(data: Path, tmp_path: Path, active: object) -> dict[str, str]:
    """A library as version 1 wrote it: two pairs sharing their target, one marked active.
    Returns the model paths by role."""
    library = Library(data)
    target = library.import_gguf(write_gguf(tmp_path / "target.gguf"))
    draft = library.import_gguf(write_gguf(tmp_path / "draft.gguf"))
    library.save_profile(Profile("Long context", target.id, draft.id, n_ctx=8192))
    library.save_profile(Profile("Short context", target.id, draft.id, n_ctx=1024))
    library.save_profile(Profile("N-gram", target.id, None))
    written = json.loads(library.file.read_text())
    written["version"] = 1  # version 1's save(): version, models, profiles, active
    written["active"] = active
    library.file.write_text(json.dumps(written, indent=2))
    return {"target": target.path, "draft": draft.path}


def v1_settings(config: Path, **fields: object) -> SettingsStore:
    """A settings file as version 1 wrote it: every field it had, version 1."""
    document = {key: value for key, value in asdict(Settings()).items() if key != "pair_name"}
    document.update(fields, version=1)
    store = SettingsStore(config)
    store.directory.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps(document, indent=2, sort_keys=True))
    return store


def test_settings_naming_the_active_pairs_files_get_its_name(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = dirs
    paths = v1_library(data, tmp_path, "Short context")
    store = v1_settings(config, target_path=paths["target"], draft_path=paths["draft"])
    loaded = store.read()
    # Both saved pairs have these files; version 1 said which was active, and that one it is.
    assert loaded.settings.pair_name == "Short context" and loaded.notes == ()
    assert (loaded.settings.target_path, loaded.settings.draft_path) == (
        paths["target"],
        paths["draft"],
    )
    store.save(loaded.settings)
    saved = json.loads(store.path.read_text())
    assert saved["version"] == SETTINGS_SCHEMA.current == 2
    assert saved["pair_name"] == "Short context"
    # The library, loaded and saved, no longer says which pair is current.
    library = Library(data)
    assert sorted(library.profiles) == ["Long context", "N-gram", "Short context"]
    library.save()
    written = json.loads(library.file.read_text())
    assert written["version"] == LIBRARY_SCHEMA.current == 3 and "active" not in written
    # version 3 names each saved pair's draft source (a pair without a draft is n-gram here)
    sources = {p["name"]: p["draft_source"] for p in written["profiles"]}
    assert sources == {"Long context": "model", "N-gram": "ngram", "Short context": "model"}
    assert library.current_profile("Short context", paths["target"]) is not None
    assert library.current_profile("Short context", paths["draft"]) is None  # another file


def test_the_library_upgraded_first_still_names_the_pair(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = dirs
    paths = v1_library(data, tmp_path, "Long context")
    library = Library(data)  # e.g. a download from the command line, before the window runs
    library.save()
    assert json.loads(library.file.read_text())[V1_ACTIVE_KEY] == "Long context"
    store = v1_settings(config, target_path=paths["target"], draft_path=paths["draft"])
    assert store.read().settings.pair_name == "Long context"
    store.save(store.read().settings)
    # Saved in version 2, the settings are not upgraded again: the record is never re-read.
    Library(data).delete_profile("Long context")
    assert store.read().settings.pair_name == "Long context"


def test_settings_naming_other_files_keep_them_with_no_name(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Version 1 loaded the settings' files at start and named no saved pair for them: the
    same pair stays current; the library's active pair stays a saved pair."""
    config, data = dirs
    v1_library(data, tmp_path, "N-gram")
    browsed = str(write_gguf(tmp_path / "browsed.gguf"))
    store = v1_settings(config, target_path=browsed, draft_path="", draft_source="ngram")
    loaded = store.read().settings
    assert (loaded.target_path, loaded.draft_source, loaded.pair_name) == (browsed, "ngram", "")
    assert "N-gram" in Library(data).profiles


def test_settings_with_no_pair_take_the_library_active_pair(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    config, data = dirs
    paths = v1_library(data, tmp_path, "N-gram")
    store = v1_settings(config, target_path="", draft_path="", draft_source="model")
    loaded = store.read().settings
    assert (loaded.target_path, loaded.draft_path) == (paths["target"], "")
    assert (loaded.draft_source, loaded.pair_name) == ("ngram", "N-gram")
    v1_library(data, tmp_path, "Short context")
    loaded = v1_settings(config).read().settings  # a file without any pair fields at all
    assert (loaded.target_path, loaded.draft_path) == (paths["target"], paths["draft"])
    assert (loaded.draft_source, loaded.pair_name) == ("model", "Short context")


@pytest.mark.parametrize(
    "hostile",
    [
        {"active": 7},
        {"active": "ghost"},
        {"active": "p", "profiles": {"p": 1}},
        {"active": "p", "profiles": [{"name": "p", "target": "m"}], "models": "m"},
        {"active": "p", "profiles": [{"name": "p", "target": "m"}], "models": [{"id": "m"}]},
        {"active": "p", "profiles": [{"name": "p", "target": "m", "draft": "gone"}]},
        {"active": "p\x00", "profiles": [{"name": "p\x00", "target": "m"}]},
        {"version": True, V1_ACTIVE_KEY: "p"},
        {"version": "2", V1_ACTIVE_KEY: "p"},
    ],
)
def test_a_hostile_library_leaves_the_settings_alone(
    dirs: tuple[Path, Path], hostile: dict[str, object]
) -> None:
    config, data = dirs
    data.mkdir(parents=True, exist_ok=True)
    models = [{"id": "m", "path": "/m.gguf"}]
    (data / "library.json").write_text(json.dumps({"models": models, **hostile}))
    assert read_v1_active_pair(data / "library.json") is None
    loaded = v1_settings(config, target_path="/x.gguf").read()
    assert (loaded.settings.target_path, loaded.settings.pair_name) == ("/x.gguf", "")
    assert loaded.notes == ()


def test_an_unreadable_library_leaves_the_settings_alone(dirs: tuple[Path, Path]) -> None:
    config, data = dirs
    data.mkdir(parents=True, exist_ok=True)
    (data / "library.json").write_text("[" * 100_000)  # nested past the parser
    assert read_v1_active_pair(data / "library.json") is None
    loaded = v1_settings(config, target_path="").read()
    assert (loaded.settings.target_path, loaded.settings.pair_name) == ("", "")


def test_a_stored_pair_name_is_checked_like_any_setting(dirs: tuple[Path, Path]) -> None:
    config, _ = dirs
    store = SettingsStore(config)
    store.directory.mkdir(parents=True, exist_ok=True)
    for bad in (["a"], 5, "x" * 1001, "a\x00b"):
        store.path.write_text(json.dumps({"version": 2, "pair_name": bad}))
        loaded = store.read()
        assert loaded.settings.pair_name == ""
        assert any('"pair_name"' in note for note in loaded.notes), bad
