"""Stored state never stops the app: hostile settings, conversations and library files, schema
versions and migrations, temp files left by a kill, and folders that refuse writes. Real files,
a real FIFO, a real child process killed mid-save; no Qt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

import app.store.settings as settings_module
from app.files.fileio import (
    STALE_TEMP_AGE_S,
    StoredFileError,
    atomic_write_text,
    clean_stale_temps,
    read_json_object,
)
from app.models.library import LIBRARY_SCHEMA, Library, LibraryError
from app.store.conversations import (
    CONVERSATION_SCHEMA,
    ChatMessage,
    Conversation,
    ConversationStore,
)
from app.store.migrations import MigrationError, Schema, upgrade
from app.store.pending_saves import PendingSaves
from app.store.settings import SETTINGS_SCHEMA, LoadedSettings, Settings, SettingsStore
from tests.unwritable import make_writable, unwritable

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

ROOT = Path(__file__).resolve().parents[2]
POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, /dev/zero, SIGKILL")


def _age(path: Path, seconds: float = STALE_TEMP_AGE_S + 5) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


# --- settings -----------------------------------------------------------------------------


def test_wrong_types_fall_back_to_defaults_with_a_note_naming_each_field(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text(
        json.dumps(
            {
                "max_tokens": "100",
                "baseline": "no",
                "temperature": "0.7",  # seen in practice
                "top_k": True,
                "seed": 1.5,
                "n_ctx": 2048.0,
                "system_prompt": ["x"],
                "rule": None,
                "top_p": float("nan"),
                "draft_path": "a\u0000b",
                "colour_style": "underline",
            }
        )
    )
    loaded = store.read()
    defaults = Settings()
    s = loaded.settings
    assert (s.max_tokens, s.baseline, s.temperature) == (256, True, 0.0)
    assert (s.top_k, s.seed, s.n_ctx, s.system_prompt, s.rule, s.top_p, s.draft_path) == (
        defaults.top_k,
        defaults.seed,
        defaults.n_ctx,
        defaults.system_prompt,
        defaults.rule,
        defaults.top_p,
        defaults.draft_path,
    )
    assert s.colour_style == "underline"  # good fields next to bad ones are kept
    assert type(s.max_tokens) is int and type(s.baseline) is bool
    for name in (
        "max_tokens",
        "baseline",
        "temperature",
        "top_k",
        "seed",
        "n_ctx",
        "system_prompt",
        "rule",
        "top_p",
        "draft_path",
    ):
        assert any(f'"{name}"' in note for note in loaded.notes), name
    note = next(n for n in loaded.notes if '"max_tokens"' in n)
    assert '"100"' in note and "whole number" in note and "default 256" in note
    # what was kept passes every check: saved and read back, nothing is refused or repaired
    store.save(s)
    assert store.read() == LoadedSettings(s, ())


def test_context_too_small_for_the_default_answer_resets_both(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text(json.dumps({"n_ctx": 256, "max_tokens": 300}))
    s = store.read().settings
    assert s.max_tokens < s.n_ctx


def test_unversioned_file_of_today_loads_unchanged_and_is_saved_with_a_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(tmp_path / "data"))  # no library: no pair name
    custom = Settings(
        temperature=0.3,
        top_k=7,
        seed=None,
        baseline=False,
        target_path="/m.gguf",
        weight_repacking="off",
    )
    store = SettingsStore(tmp_path)
    store.path.write_text(json.dumps(asdict(custom), indent=2, sort_keys=True))  # version 1
    loaded = store.read()
    assert loaded.settings == custom and loaded.notes == ()
    store.save(loaded.settings)
    assert json.loads(store.path.read_text())["version"] == SETTINGS_SCHEMA.current
    assert store.read() == loaded


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"[1, 2]", "JSON list, not an object"),
        (b"42", "JSON int, not an object"),
        (b"{not json", "not valid JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        # deep enough for the JSON reader, too deep for the upgrade's copy (it recursed)
        (b'{"x": ' + b"[" * 700 + b"]" * 700 + b"}", "nested too deeply"),
        (b'{"system_prompt": "caf\xe9"}', "not UTF-8"),
        (b'{"n_ctx": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b'{"version": "two"}', "not a format version"),
        (b'{"version": 0}', "not a format version"),
        # a "version" thousands of digits long is damage, not the future: it was quoted whole
        # and its copy's name was too long to write, so the next save lost the file
        (b'{"version": 1' + b"0" * 4000 + b"}", "not a format version"),
        (b'{"version": "' + b"v" * 100_000 + b'"}', "not a format version"),
    ],
)
def test_unusable_settings_file_is_moved_aside_and_defaults_used(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_bytes(content)
    loaded = store.read()
    assert loaded.settings == Settings()
    assert len(loaded.notes) == 1 and reason in loaded.notes[0], loaded.notes
    kept = list(tmp_path.glob("settings.json.damaged-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == content  # nothing stored is lost
    assert kept[0].name in loaded.notes[0]
    assert len(loaded.notes[0]) < 400  # the file's words are not quoted whole


def test_huge_settings_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    with store.path.open("wb") as handle:  # sparse: 2 GB that take no disk space
        handle.truncate(2 << 30)
    started = time.perf_counter()
    loaded = store.read()
    assert time.perf_counter() - started < 1.0
    assert loaded.settings == Settings()
    assert "2,147,483,648 bytes" in loaded.notes[0] and "was not read" in loaded.notes[0]


@POSIX_ONLY
def test_fifo_or_folder_in_place_of_the_settings_file_does_not_block(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    os.mkfifo(store.path)  # opening a FIFO for reading would wait for a writer forever
    loaded = store.read()
    assert loaded.settings == Settings() and "not a regular file" in loaded.notes[0]
    assert store.path.exists()  # not content damage: left where it is
    store.path.unlink()
    store.path.mkdir()
    note = store.read().notes[0]
    assert "not a regular file" in note or "Is a directory" in note


def test_unknown_keys_are_noted(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.path.write_text(json.dumps({"temperature": 0.5, "colour": "red"}))
    loaded = store.read()
    assert loaded.settings.temperature == 0.5
    assert loaded.notes == ('settings.json: ignored unknown setting(s) "colour"',)


def test_settings_from_a_newer_version_keep_a_copy(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    newer = {"version": SETTINGS_SCHEMA.current + 1, "temperature": 0.5, "future": {"a": 1}}
    store.path.write_text(json.dumps(newer))
    loaded = store.read()
    assert loaded.settings.temperature == 0.5
    assert "newer SpecDeck" in loaded.notes[0]
    copy = tmp_path / f"settings.json.v{SETTINGS_SCHEMA.current + 1}"
    assert json.loads(copy.read_text()) == newer


def test_settings_store_applies_its_migrations_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next change of format: version 2 renames a key, version 3 scales a value."""

    def rename_max_new_tokens(doc: dict) -> dict:
        doc["max_tokens"] = doc.pop("max_new_tokens")
        return doc

    def temperature_percent_to_fraction(doc: dict) -> dict:
        doc["temperature"] = doc["temperature"] / 100
        return doc

    monkeypatch.setattr(
        settings_module,
        "SETTINGS_SCHEMA",
        Schema(
            "settings", current=3, steps=(rename_max_new_tokens, temperature_percent_to_fraction)
        ),
    )
    store = SettingsStore(tmp_path)
    store.path.write_text(json.dumps({"max_new_tokens": 99, "temperature": 70}))  # no version
    loaded = store.read()
    assert (loaded.settings.max_tokens, loaded.settings.temperature) == (99, 0.7)
    assert loaded.notes == ()
    store.save(loaded.settings)
    assert json.loads(store.path.read_text())["version"] == 3
    store.path.write_text(json.dumps({"version": 2, "max_tokens": 5, "temperature": 30}))
    assert (store.read().settings.max_tokens, store.read().settings.temperature) == (5, 0.3)


# --- migrations ---------------------------------------------------------------------------


def test_upgrade_runs_each_step_once_in_order_on_a_copy() -> None:
    calls: list[int] = []

    def step(n: int):  # noqa: ANN202
        def run(doc: dict) -> dict:
            calls.append(n)
            doc.setdefault("trail", []).append(n)
            return doc

        return run

    schema = Schema("thing", current=4, steps=(step(1), step(2), step(3)))
    original = {"trail": [0]}
    result = upgrade(original, schema)
    assert result.data == {"trail": [0, 1, 2, 3], "version": 4} and result.found == 1
    assert original == {"trail": [0]}  # untouched
    assert upgrade({"version": 3, "trail": []}, schema).data["trail"] == [3]
    assert upgrade({"version": 4}, schema).data == {"version": 4}
    newer = upgrade({"version": 9, "x": 1}, schema)
    assert newer.newer and newer.data == {"version": 9, "x": 1}
    assert calls == [1, 2, 3, 3]


def test_failed_step_names_the_versions_and_leaves_the_input() -> None:
    def broken(doc: dict) -> dict:
        doc["half"] = True
        raise KeyError("max_new_tokens")

    schema = Schema("thing", current=2, steps=(broken,))
    original = {"a": 1}
    with pytest.raises(MigrationError, match="from version 1 to 2 failed: KeyError"):
        upgrade(original, schema)
    assert original == {"a": 1}
    for bad in (True, "1", 0, -2, 1.0, None):
        with pytest.raises(MigrationError, match="not a format version"):
            upgrade({"version": bad}, schema)


def test_schemas_need_one_step_per_version() -> None:
    with pytest.raises(ValueError, match="needs 2 migration steps"):
        Schema("x", current=3, steps=(lambda d: d,))
    for schema in (SETTINGS_SCHEMA, CONVERSATION_SCHEMA, LIBRARY_SCHEMA):
        assert len(schema.steps) == schema.current - 1


# --- conversations ------------------------------------------------------------------------


def _conversation_file(folder: Path, name: str, **overrides: object) -> Path:
    conv = Conversation.new().with_message(ChatMessage("user", "hello there"))
    conv = conv.with_message(ChatMessage("assistant", "hi", stats={"tokens": 1}))
    data = {**conv.to_json(), **overrides}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_inner_id_not_matching_the_file_name_is_repaired(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    _conversation_file(tmp_path, "abc123", id="something-else")
    _conversation_file(tmp_path, "def456", id="../../etc/passwd")
    _conversation_file(tmp_path, "ghi789", id=12)
    scan = store.scan()
    assert sorted(info.id for info in scan.conversations) == ["abc123", "def456", "ghi789"]
    assert len(scan.notes) == 3 and all("did not match the file name" in n for n in scan.notes)
    assert store.load("def456").id == "def456"
    store.save(store.load("abc123"))
    assert json.loads((tmp_path / "abc123.json").read_text())["id"] == "abc123"


@POSIX_ONLY
def test_odd_file_names_and_broken_files_are_skipped_and_kept(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    good = _conversation_file(tmp_path, "good")
    odd = [_conversation_file(tmp_path, name) for name in ("my chat", "ça", "a.b", "x" * 65)]
    broken = {
        "list.json": b"[]",
        "deep.json": b"[" * 100_000,
        "latin1.json": b'{"id": "latin1", "title": "caf\xe9"}',
        "badmsg.json": json.dumps(
            {"id": "badmsg", "messages": [{"role": "hacker", "content": "x"}]}
        ).encode(),
        "nocontent.json": json.dumps({"id": "nocontent", "messages": [{"role": "user"}]}).encode(),
        "msgs.json": json.dumps({"id": "msgs", "messages": "hello"}).encode(),
    }
    for name, content in broken.items():
        (tmp_path / name).write_bytes(content)
    (tmp_path / "folder.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")  # a read that never ends
    with (tmp_path / "huge.json").open("wb") as handle:
        handle.truncate(2 << 30)
    scan = store.scan()
    assert [info.id for info in scan.conversations] == ["good"]
    text = "\n".join(scan.notes)
    for path in odd:
        assert path.name in text
    for name in (*broken, "folder.json", "fifo.json", "zero.json", "huge.json"):
        assert name in text, name
    assert "role 'hacker'" in text and "not a regular file" in text and "not UTF-8" in text
    for name, content in broken.items():
        assert (tmp_path / name).read_bytes() == content  # skipped files stay as they were
    assert good.exists() and all(path.exists() for path in odd)
    with pytest.raises(ValueError, match="not a conversation id"):
        store.load("../good")
    with pytest.raises(StoredFileError, match="role"):
        store.load("badmsg")


def test_a_conversation_nested_too_deeply_to_save_again_is_skipped_and_kept(
    tmp_path: Path,
) -> None:
    """Nesting the JSON reader still takes (hundreds of levels) but the writer's recursion
    does not: it loaded, then every later save of it raised RecursionError."""
    store = ConversationStore(tmp_path)
    conv = Conversation.new().with_message(ChatMessage("user", "q"))
    deep = json.dumps(conv.to_json()).replace(
        '"stats": {}', '"stats": {"x": ' + "[" * 700 + "]" * 700 + "}"
    )
    path = tmp_path / f"{conv.id}.json"
    path.write_text(deep)
    scan = store.scan()
    assert scan.conversations == [] and "nested too deeply" in scan.notes[0]
    with pytest.raises(StoredFileError, match="nested too deeply"):
        store.load(conv.id)
    assert path.read_text() == deep  # skipped, not rewritten


def test_absurd_titles_and_times_are_repaired(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    _conversation_file(tmp_path, "t1", title=["x"], created=1e300, updated=float("nan"))
    _conversation_file(tmp_path, "t2", title="a\nb\x00" + "y" * 1000, updated=-5, created=True)
    scan = store.scan()
    by_id = {info.id: info for info in scan.conversations}
    assert by_id["t1"].title == "Untitled" and by_id["t1"].updated == 0.0
    assert len(by_id["t2"].title) <= 200 and "\n" not in by_id["t2"].title
    time.localtime(by_id["t2"].updated)  # the list formats it: must not overflow
    assert any("dates" in n for n in scan.notes)


def test_unversioned_conversation_loads_unchanged_and_newer_is_noted(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    conv = Conversation.new().with_message(ChatMessage("user", "q", stats={}))
    data = conv.to_json()
    del data["format"]  # written before formats were recorded: version 1
    (tmp_path / f"{conv.id}.json").write_text(json.dumps(data))
    assert store.load(conv.id) == conv and store.scan().notes == []
    data["format"] = CONVERSATION_SCHEMA.current + 1
    (tmp_path / f"{conv.id}.json").write_text(json.dumps(data))
    assert store.load(conv.id) == conv
    assert "newer SpecDeck" in store.scan().notes[0]


# --- library ------------------------------------------------------------------------------


def test_library_file_is_read_bounded_and_type_checked(tmp_path: Path) -> None:
    library_file = tmp_path / "library.json"
    model = {
        "id": "file:/m.gguf",
        "path": "/m.gguf",
        "parts": ["/m.gguf"],
        "size": 5,
        "quantization": "F32",
        "architecture": "llama",
        "context_length": 128,
        "n_params": 10,
        "name": "m",
        "source": "import",
        "repo_id": None,
        "sha256": None,
        "added": 1.0,
    }
    profile = {
        "name": "p",
        "target": "file:/m.gguf",
        "draft": None,
        "n_ctx": 4096,
        "kv_type": "f16",
        "draft_max": 8,
        "calibration": {"x": 1.0},
    }
    library_file.write_text(
        json.dumps({"models": [model], "profiles": [profile], "active": "p"})
    )  # version 1: no version key
    library = Library(tmp_path)
    assert library.models["file:/m.gguf"].parts == ("/m.gguf",) and library.v1_active == "p"
    library.save()
    assert json.loads(library_file.read_text())["version"] == LIBRARY_SCHEMA.current
    assert Library(tmp_path).models == library.models
    hostile = [
        {"models": [{**model, "size": "5"}]},
        {"models": [{**model, "parts": "/m.gguf"}]},
        {"models": [{**model, "path": "/m\u0000.gguf"}]},
        {"models": [{**model, "extra": 1}]},
        {"models": {"a": 1}},
        {"profiles": [{**profile, "calibration": {"x": "fast"}}]},
        {"profiles": [{**profile, "draft_max": True}]},
        {"active": 3},
        {"version": "x"},
        [],
    ]
    for data in hostile:
        library_file.write_text(json.dumps(data))
        with pytest.raises(LibraryError, match="damaged") as refused:
            Library(tmp_path)
        assert str(library_file) in str(refused.value)
    library_file.write_bytes(b'{"models": [], "active": "\xff"}')
    with pytest.raises(LibraryError, match="not UTF-8"):
        Library(tmp_path)
    library_file.write_text(json.dumps({"version": LIBRARY_SCHEMA.current + 1}))
    with pytest.raises(LibraryError, match="newer SpecDeck"):
        Library(tmp_path)
    library_file.unlink()
    with library_file.open("wb") as handle:
        handle.truncate(2 << 30)
    with pytest.raises(LibraryError, match="was not read"):
        Library(tmp_path)


# --- temporary files and failing folders --------------------------------------------------


@POSIX_ONLY
def test_temp_file_left_by_a_kill_during_a_save_is_cleaned_at_the_next_start(
    tmp_path: Path,
) -> None:
    store = SettingsStore(tmp_path)
    store.save(Settings(temperature=0.25))
    child = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from app.store.settings import Settings, SettingsStore\n"
        "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # killed mid-save\n"
        "SettingsStore(Path(sys.argv[1])).save(Settings(temperature=0.75))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", child, str(tmp_path)], env=env, timeout=60)
    assert result.returncode == -signal.SIGKILL
    left = list(tmp_path.glob(".*.tmp"))
    assert len(left) == 1 and "0.75" in left[0].read_text()
    assert SettingsStore(tmp_path).load().temperature == 0.25  # the old file is whole
    assert left[0].exists()  # too fresh: it could be another SpecDeck writing right now
    _age(left[0])
    (tmp_path / ".keep.tmp.not").write_text("x")
    assert SettingsStore(tmp_path).load().temperature == 0.25
    assert not left[0].exists() and (tmp_path / ".keep.tmp.not").exists()


def test_stale_temps_are_cleaned_in_every_store(tmp_path: Path) -> None:
    conversations = tmp_path / "conversations"
    conversations.mkdir()
    temps = [
        tmp_path / ".settings.json-x1.tmp",
        conversations / ".abc.json-x2.tmp",
        tmp_path / ".library.json-x3.tmp",
    ]
    for temp in temps:
        temp.write_text("{")
        _age(temp)
    SettingsStore(tmp_path).read()
    ConversationStore(conversations).scan()
    Library(tmp_path)
    assert not any(temp.exists() for temp in temps)
    assert clean_stale_temps(tmp_path / "missing") == []


@POSIX_ONLY
def test_write_failure_mid_file_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    """A full disk, imitated by a file-size limit in a child process (EFBIG mid-write)."""
    store = SettingsStore(tmp_path)
    store.save(Settings(temperature=0.25))
    child = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from app.store.settings import Settings, SettingsStore\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\n"
        "try:\n"
        "    SettingsStore(Path(sys.argv[1])).save(Settings(system_prompt='x' * 5000))\n"
        "except OSError as exc:\n"
        "    print('refused:', exc.strerror)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)],
        env=env,
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "refused: File too large" in result.stdout, result
    assert SettingsStore(tmp_path).load().temperature == 0.25
    assert list(tmp_path.glob(".*.tmp")) == []


def test_read_only_folder_keeps_saves_in_memory_until_it_can_write(tmp_path: Path) -> None:
    config, data = tmp_path / "config", tmp_path / "data"
    config.mkdir()
    data.mkdir()
    settings_store, conversations = SettingsStore(config), ConversationStore(data)
    saves = PendingSaves(settings_store, conversations)
    conv = Conversation.new().with_message(ChatMessage("user", "keep me"))
    with unwritable(data), unwritable(config):
        failure = saves.save_conversation(conv)
        assert failure is not None and failure.path == data / f"{conv.id}.json"
        assert failure.describe().startswith("cannot save: ") and str(data) in failure.describe()
        failure = saves.save_settings(Settings(temperature=0.5))
        assert failure is not None and failure.waiting == 2
        assert saves.unsaved(conv.id) == conv
        assert settings_store.read().settings == Settings()  # the store still reads
        rescued = saves.rescue(tmp_path / "rescue")
        assert rescued is not None
        assert ConversationStore(rescued).load(conv.id) == conv
        assert SettingsStore(rescued).load().temperature == 0.5
        make_writable(config)
        failure = saves.flush()
        assert failure is not None and failure.waiting == 1 and failure.path.parent == data
    assert saves.flush() is None and saves.waiting == 0
    assert conversations.load(conv.id) == conv
    assert settings_store.load().temperature == 0.5


def test_stores_open_when_their_folders_cannot_be_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = tmp_path / "locked"
    parent.mkdir()
    monkeypatch.setenv("SPECDECK_CONFIG_DIR", str(parent / "config"))
    monkeypatch.setenv("SPECDECK_DATA_DIR", str(parent / "data"))
    with unwritable(parent):
        settings_store = SettingsStore()
        conversations = ConversationStore()
        assert settings_store.load() == Settings() and conversations.list() == []
        with pytest.raises(OSError):
            settings_store.save(Settings())


def test_read_json_object_bounds(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"a": "b" * 100}))
    assert read_json_object(path, 1000)["a"] == "b" * 100
    with pytest.raises(StoredFileError, match="more than the 50 bytes"):
        read_json_object(path, 50)
    with pytest.raises(FileNotFoundError):
        read_json_object(tmp_path / "missing.json", 50)
    atomic_write_text(tmp_path / "sub" / "y.json", "{}")
    assert read_json_object(tmp_path / "sub" / "y.json", 10) == {}


def test_a_file_where_the_config_folder_should_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config").write_text("not a folder")
    monkeypatch.setenv("SPECDECK_CONFIG_DIR", str(tmp_path / "config"))
    store = SettingsStore()
    loaded = store.read()
    assert loaded.settings == Settings() and "Not a directory" in loaded.notes[0]
    with pytest.raises(OSError):
        store.save(Settings())
    assert (tmp_path / "config").read_text() == "not a folder"


def test_listing_rereads_only_changed_files(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    first = Conversation.new().with_message(ChatMessage("user", "first title"))
    second = Conversation.new().with_message(ChatMessage("user", "second title"))
    store.save(first)
    store.save(second)
    assert sorted(i.title for i in store.list()) == ["first title", "second title"]
    (tmp_path / "broken.json").write_text("{")
    assert len(store.scan().notes) == 1
    store.save(first.with_message(ChatMessage("assistant", "an answer")))
    (tmp_path / f"{second.id}.json").unlink()
    by_id = {info.id: info for info in store.list()}
    assert list(by_id) == [first.id] and by_id[first.id].messages == 2
    (tmp_path / "broken.json").write_text(json.dumps(Conversation.new().to_json()))
    scan = store.scan()
    assert len(scan.conversations) == 2 and "did not match" in scan.notes[0]


def test_lone_surrogates_from_a_file_can_be_saved_again(tmp_path: Path) -> None:
    """``json.loads`` turns "\\ud800" into a str that UTF-8 cannot encode."""
    store = ConversationStore(tmp_path)
    conv = Conversation.new().with_message(ChatMessage("user", "café"))
    data = conv.to_json()
    text = json.dumps(data).replace("caf\\u00e9", "caf\\u00e9 \\ud800")
    (tmp_path / f"{conv.id}.json").write_text(text)
    loaded = store.load(conv.id)
    assert loaded.messages[0].content == "café \ud800"
    grown = loaded.with_message(ChatMessage("assistant", "ok ✓"))
    store.save(grown)
    assert store.load(conv.id) == grown
    settings_store = SettingsStore(tmp_path)
    settings_store.save(Settings(system_prompt="x\udfff"))
    assert settings_store.load().system_prompt == "x\udfff"
    settings_store.save(Settings(system_prompt="Réponds en français"))
    assert "Réponds" in settings_store.path.read_text(encoding="utf-8")  # readable when it can
