"""A hostile Hub (the fake one on 127.0.0.1, turned nasty): paths, bodies, stalls, files, locks."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from app.gguf.reader import read_header
from app.models.downloads import (
    AlreadyDownloading,
    DownloadCancelled,
    Downloader,
    DownloadError,
    NotEnoughDiskSpace,
    UnsafeFileName,
)
from app.models.hub import (
    GGUFFile,
    HubError,
    file_url,
    group_for_file,
    list_gguf_files,
    list_repo_files,
    read_remote_header,
    search_models,
)
from app.models.hub_http import (
    HttpRangeSource,
    TransferCancelled,
    TransferLimits,
    TransferStalled,
    TransferTimedOut,
)
from app.models.library import Library, LibraryModel
from tests.conftest import wait_for
from tests.ggufs import write_gguf
from tests.hub.fake_hub import FakeHub, FakeRepo

ROOT = Path(__file__).resolve().parent.parent
BIG = "big-Q8_0.gguf"
SMALL = "small-Q8_0.gguf"


def _cli(argv: list[str]) -> int:
    from app.cli.hub import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")} if folder.exists() else set()


# --- path escape --------------------------------------------------------------------------


def _escape_names(outside: Path) -> list[str]:
    return [
        "../../../escaped.gguf",
        "../../../newdir/escaped.gguf",
        "sub/../../../x.gguf",
        str(outside / "abs" / "escaped.gguf"),
        "..\\..\\..\\escaped.gguf",
        "C:/escaped.gguf",
        "C:escaped.gguf",
        "bad\x00name.gguf",
        "bad\nname.gguf",
        "x" * 300 + ".gguf",
        "./m.gguf",
        "sub//m.gguf",
        "NUL.gguf",
        "trailing.gguf. ",
        "fake\u202efuggg.gguf",
        "a/" * 300 + "m.gguf",
    ]


def test_listing_names_cannot_escape_the_models_folder(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    models = tmp_path / "a" / "b" / "models"
    names = _escape_names(tmp_path)
    populated_hub.add(
        FakeRepo(
            "evil/Escape-GGUF",
            {n: gguf_bytes[SMALL] for n in names} | {"ok.gguf": gguf_bytes[SMALL]},
        )
    )
    listed = [f.path for f in list_repo_files("evil/Escape-GGUF")]
    assert listed == ["ok.gguf"]  # every hostile name is left out of the listing
    before = _files_under(tmp_path)
    downloader = Downloader(models)
    for name in names:
        with pytest.raises(UnsafeFileName, match="refus"):
            downloader.download_files(
                "evil/Escape-GGUF", [GGUFFile(name, len(gguf_bytes[SMALL]), None)]
            )
    # neither the file, its .part/.part.json/.lock, nor any parent folder was created
    assert _files_under(tmp_path) - before == set()
    assert _cli(["pull", "evil/Escape-GGUF", "../../../escaped.gguf"]) == 2
    assert not (tmp_path / "specdeck" / "escaped.gguf").exists()


def test_repo_ids_cannot_escape(populated_hub: FakeHub, tmp_path: Path) -> None:
    downloader = Downloader(tmp_path / "models")
    for repo_id in ("..", "../x", "a/../../b", "a\\b/c", "/abs/x", "a/b/c"):
        with pytest.raises(UnsafeFileName):
            downloader.local_path(repo_id, "m.gguf")
    assert not (tmp_path / "models").exists()


def test_symlinked_repo_folder_is_refused(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (models / "acme--Big-GGUF").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeFileName, match="outside the models folder"):
        Downloader(models).local_path("acme/Big-GGUF", BIG)


# --- the user's own files ------------------------------------------------------------------


def test_offline_pull_cannot_register_or_delete_a_user_file(
    fake_hub: FakeHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user_file = write_gguf(tmp_path / "mine" / "file.gguf")
    assert _cli(["pull", "--offline", "any/repo", str(user_file)]) == 2
    assert "refus" in capsys.readouterr().err
    library = Library()
    assert library.models == {}
    # Even a library file that claims a user file is a download never deletes it.
    model = library.import_gguf(user_file)
    forged = LibraryModel(
        **{**model.__dict__, "id": "any/repo:file.gguf", "source": "hub", "repo_id": "any/repo"}
    )
    library.models[forged.id] = forged
    library.save()
    assert Library().delete_model(forged.id) == []
    assert user_file.is_file()


def test_library_ids_are_unique_per_repo_path(
    fake_hub: FakeHub,
    tmp_path: Path,
    gguf_bytes: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_hub.add(
        FakeRepo(
            "acme/Nested-GGUF",
            {"q1/m.gguf": gguf_bytes[SMALL], "q2/m.gguf": gguf_bytes["big-Q4_K_M.gguf"]},
        )
    )
    assert _cli(["pull", "acme/Nested-GGUF", "q1/m.gguf"]) == 0
    assert _cli(["pull", "acme/Nested-GGUF", "q2/m.gguf"]) == 0
    library = Library()
    assert sorted(library.models) == ["acme/Nested-GGUF:q1/m.gguf", "acme/Nested-GGUF:q2/m.gguf"]
    first = library.models["acme/Nested-GGUF:q1/m.gguf"]
    assert Path(first.path).read_bytes() == gguf_bytes[SMALL]
    assert library.delete_model(first.id) == [Path(first.path)]
    assert Path(library.models["acme/Nested-GGUF:q2/m.gguf"].path).is_file()


# --- unbounded bodies ----------------------------------------------------------------------


def _in_thread(fn: object, timeout_s: float) -> tuple[object, BaseException | None, float]:
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    began = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"still running after {timeout_s} s"
    error = box.get("error")
    return (
        box.get("value"),
        error if isinstance(error, BaseException) else None,
        time.monotonic() - began,
    )


def test_endless_range_body_is_cut_at_what_was_asked(populated_hub: FakeHub) -> None:
    populated_hub.hostile.endless.add(BIG)
    header, error, _ = _in_thread(lambda: read_remote_header("acme/Big-GGUF", BIG), 30)
    assert error is None, error
    assert header is not None
    # the server thread counts a piece after writing it: the client may have read it first
    wait_for(lambda: BIG in populated_hub.sent, timeout=5.0)
    assert populated_hub.sent[BIG] < 16 << 20  # old code read the server's whole 64 MiB


def test_endless_error_body_is_capped(populated_hub: FakeHub) -> None:
    populated_hub.hostile.endless_errors.add(BIG)
    _, error, _ = _in_thread(lambda: read_remote_header("acme/Big-GGUF", BIG), 30)
    assert isinstance(error, HubError) and "does not exist" in str(error)
    assert populated_hub.sent[BIG] < 8 << 20


def test_endless_download_body_is_refused(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.hostile.endless.add(BIG)
    _, error, _ = _in_thread(
        lambda: Downloader(tmp_path, max_retries=0).download("acme/Big-GGUF", BIG), 30
    )
    assert isinstance(error, DownloadError) and "more than" in str(error)
    part = tmp_path / "acme--Big-GGUF" / (BIG + ".part")
    assert part.stat().st_size <= len(gguf_bytes[BIG])


# --- stalls, deadline, cancel --------------------------------------------------------------


def test_a_byte_every_few_seconds_is_a_stall(populated_hub: FakeHub) -> None:
    populated_hub.hostile.drip_s[BIG] = 2.0
    limits = TransferLimits(stall_timeout_s=0.5, deadline_s=30)
    _, error, took = _in_thread(lambda: read_remote_header("acme/Big-GGUF", BIG, limits=limits), 20)
    assert isinstance(error, TransferStalled) and "stalled" in str(error)
    assert took < 5


def test_inspection_has_a_total_deadline(populated_hub: FakeHub) -> None:
    populated_hub.hostile.drip_s[BIG] = 0.01  # steady, but far too slow for a 1 MiB header
    limits = TransferLimits(stall_timeout_s=5, deadline_s=1.0, stall_min_bytes=1)
    _, error, took = _in_thread(lambda: read_remote_header("acme/Big-GGUF", BIG, limits=limits), 20)
    assert isinstance(error, TransferTimedOut) and "within 1 s" in str(error)
    assert took < 4


def test_deadline_holds_while_the_headers_drip(populated_hub: FakeHub) -> None:
    populated_hub.hostile.drip_headers_s[BIG] = 0.05  # each byte resets any read timeout
    limits = TransferLimits(stall_timeout_s=5, deadline_s=1.0)
    _, error, took = _in_thread(lambda: read_remote_header("acme/Big-GGUF", BIG, limits=limits), 30)
    assert isinstance(error, TransferTimedOut)
    assert took < 3


def test_inspection_can_be_cancelled(populated_hub: FakeHub) -> None:
    populated_hub.hostile.drip_s[BIG] = 0.01
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    limits = TransferLimits(stall_timeout_s=5, stall_min_bytes=1, cancel=cancel)
    _, error, took = _in_thread(lambda: read_remote_header("acme/Big-GGUF", BIG, limits=limits), 20)
    assert isinstance(error, TransferCancelled)
    assert took < 3


def test_stalled_download_fails_with_a_stall_message(
    populated_hub: FakeHub, tmp_path: Path
) -> None:
    populated_hub.hostile.drip_s[BIG] = 2.0
    downloader = Downloader(tmp_path, stall_timeout_s=0.5, max_retries=1, retry_wait_s=0)
    _, error, took = _in_thread(lambda: downloader.download("acme/Big-GGUF", BIG), 30)
    assert isinstance(error, HubError) and "stalled" in str(error)
    assert took < 10


# --- stale or broken files at the final path -----------------------------------------------


def test_empty_file_at_the_final_path_is_not_trusted(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.hostile.no_sha.add(SMALL)  # a listing without sha256
    (group,) = list_gguf_files("acme/Small-GGUF")
    assert group.first.sha256 is None
    final = tmp_path / "acme--Small-GGUF" / SMALL
    final.parent.mkdir(parents=True)
    final.write_bytes(b"")
    path = Downloader(tmp_path).download_files("acme/Small-GGUF", list(group.files))[0]
    assert path.read_bytes() == gguf_bytes[SMALL]


def test_damaged_file_is_noticed_and_fetched_again(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    downloader = Downloader(tmp_path)
    (group,) = list_gguf_files("acme/Small-GGUF")
    path = downloader.download_files("acme/Small-GGUF", list(group.files))[0]
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # same size, one byte flipped, as a disk error would
    path.write_bytes(bytes(data))
    assert downloader.local_state("acme/Small-GGUF", group.first) == "unverified"
    downloader.download_files("acme/Small-GGUF", list(group.files))
    assert path.read_bytes() == gguf_bytes[SMALL]


def test_changed_on_the_hub_is_offered_as_an_update(
    populated_hub: FakeHub,
    tmp_path: Path,
    gguf_bytes: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _cli(["pull", "acme/Small-GGUF", SMALL]) == 0
    path = Path(capsys.readouterr().out.strip())
    populated_hub.repos["acme/Small-GGUF"].files[SMALL] = gguf_bytes["other-Q8_0.gguf"]
    downloader = Downloader(path.parent.parent)
    (group,) = list_gguf_files("acme/Small-GGUF")
    assert downloader.changed_on_hub("acme/Small-GGUF", group.files) == [group.first]
    assert _cli(["pull", "acme/Small-GGUF", SMALL]) == 0
    assert "changed on the Hub" in capsys.readouterr().err
    assert path.read_bytes() == gguf_bytes["other-Q8_0.gguf"]
    assert downloader.changed_on_hub("acme/Small-GGUF", group.files) == []


# --- concurrency ----------------------------------------------------------------------------

_CHILD_PULL = textwrap.dedent("""
    import sys
    from pathlib import Path
    from app.models.downloads import Downloader
    path = Downloader(Path(sys.argv[1]), endpoint=sys.argv[2], token=False).download(
        "acme/Big-GGUF", "big-Q8_0.gguf")
    print(path)
""")


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_second_download_of_the_same_file_is_told_or_waits(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.chunk_delay_s = 0.05  # about 4 s for the whole file
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD_PULL, str(tmp_path), populated_hub.url],
        env=_child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    part = tmp_path / "acme--Big-GGUF" / (BIG + ".part")
    deadline = time.monotonic() + 30
    while not (part.exists() and part.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert part.exists(), child.communicate()
    with pytest.raises(AlreadyDownloading, match="already being downloaded"):
        Downloader(tmp_path, token=False).download("acme/Big-GGUF", BIG)
    path = Downloader(tmp_path, token=False, lock_wait_s=60).download("acme/Big-GGUF", BIG)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert Path(out.strip()) == path
    assert (
        hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(gguf_bytes[BIG]).hexdigest()
    )
    assert len(populated_hub.requests_for(BIG)) == 1  # the waiter did not fetch it again
    assert not (tmp_path / "acme--Big-GGUF" / (BIG + ".part.lock")).exists()


_CHILD_HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from filelock import FileLock
    with FileLock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
""")


def test_a_download_waiting_for_the_lock_stops_when_cancelled(
    populated_hub: FakeHub, tmp_path: Path
) -> None:
    lock = tmp_path / "acme--Big-GGUF" / (BIG + ".part.lock")
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", _CHILD_HOLD_LOCK, str(lock)],
        env=_child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(DownloadCancelled, match="cancelled while waiting"):
            Downloader(tmp_path, token=False, lock_wait_s=60).download(
                "acme/Big-GGUF", BIG, cancel=cancel
            )
        assert time.monotonic() - started < 10
        assert populated_hub.requests_for(BIG) == []
    finally:
        holder.kill()
        holder.wait()


# --- errors that say the right thing --------------------------------------------------------

_CHILD_FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from app.models.downloads import Downloader
    from app.models.hub import HubError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))  # writes beyond fail
    try:
        Downloader(Path(sys.argv[1]), endpoint=sys.argv[2], token=False,
                   reserve_bytes=0).download("acme/Big-GGUF", "big-Q8_0.gguf")
    except HubError as exc:
        print(type(exc).__name__, exc)
""")


def test_full_disk_says_the_disk_is_full(populated_hub: FakeHub, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_FULL_DISK, str(tmp_path), populated_hub.url],
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(NotEnoughDiskSpace.__name__), done.stdout
    assert "disk is full" in done.stdout and "cannot reach" not in done.stdout


def test_split_with_a_missing_part_names_the_missing_part(
    fake_hub: FakeHub, gguf_bytes: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    data = gguf_bytes[BIG]
    third = len(data) // 3
    fake_hub.add(
        FakeRepo(
            "acme/Split-GGUF",
            {
                "m-Q8_0-00001-of-00003.gguf": data[:third],
                "m-Q8_0-00003-of-00003.gguf": data[2 * third :],
            },
        )
    )
    assert _cli(["pull", "acme/Split-GGUF", "m-Q8_0-00001-of-00003.gguf"]) == 2
    err = capsys.readouterr().err
    assert "m-Q8_0-00002-of-00003.gguf" in err
    assert "lacks m-Q8_0-00001" not in err and "lacks m-Q8_0-00003" not in err


# --- further attacks -------------------------------------------------------------------------


def test_redirect_to_another_host_drops_the_token(
    populated_hub: FakeHub, gguf_bytes: dict[str, bytes]
) -> None:
    other = FakeHub().start()
    try:
        other.add(FakeRepo("acme/Gated-GGUF", {SMALL: gguf_bytes[SMALL]}))
        port = other.url.rsplit(":", 1)[1]
        populated_hub.hostile.redirect[SMALL] = (
            f"http://localhost:{port}/acme/Gated-GGUF/resolve/main/{SMALL}"
        )
        header = read_remote_header("acme/Gated-GGUF", SMALL, token="hf_valid_test_token")
        assert header.get("general.name") == "small"
        assert other.log and all(e.authorization is None for e in other.log)
    finally:
        other.stop()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("file:///etc/passwd", "not http or https"),
        ("SELF", "redirected too many times"),
    ],
)
def test_bad_redirects_are_refused(populated_hub: FakeHub, target: str, message: str) -> None:
    if target == "SELF":
        target = f"{populated_hub.url}/acme/Big-GGUF/resolve/main/{BIG}"
    populated_hub.hostile.redirect[BIG] = target
    with pytest.raises(HubError, match=message):
        read_remote_header("acme/Big-GGUF", BIG)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("negative length", "malformed HTTP response"),
        ("wrong range", "byte range"),
        ("gzip", "compressed"),
    ],
)
def test_malformed_file_answers_are_refused(
    populated_hub: FakeHub, tmp_path: Path, mode: str, message: str
) -> None:
    hostile = populated_hub.hostile
    if mode == "negative length":
        hostile.content_length[BIG] = "-5"
    elif mode == "wrong range":
        hostile.wrong_range.add(BIG)
    else:
        hostile.gzip.add(BIG)
    source = HttpRangeSource(file_url("acme/Big-GGUF", BIG), limits=TransferLimits(deadline_s=10))
    with pytest.raises(HubError, match=message):
        read_header(source, first_window=256)  # small reads, so ranges past byte 0 are asked


def test_resume_answered_from_the_wrong_byte_is_refused(
    populated_hub: FakeHub, tmp_path: Path
) -> None:
    populated_hub.drop_after[BIG] = [300_000]
    populated_hub.hostile.wrong_range.add(BIG)
    with pytest.raises(HubError, match="byte range"):
        Downloader(tmp_path, retry_wait_s=0).download("acme/Big-GGUF", BIG)


def test_impossible_sizes_from_head_are_refused(populated_hub: FakeHub, tmp_path: Path) -> None:
    populated_hub.hostile.linked_size[BIG] = str(1 << 60)
    with pytest.raises(DownloadError, match="impossible size"):
        Downloader(tmp_path).download("acme/Big-GGUF", BIG)
    assert not (tmp_path / "acme--Big-GGUF").exists()


LISTINGS = {
    "not a list": (json.dumps({"path": "m.gguf"}).encode(), "not a list"),
    "entries not objects": (json.dumps(["m.gguf", 3]).encode(), "not an object"),
    "negative size": (
        json.dumps([{"type": "file", "path": "m.gguf", "size": -1}]).encode(),
        "impossible size",
    ),
    "size as text": (
        json.dumps([{"type": "file", "path": "m.gguf", "size": "9"}]).encode(),
        "impossible size",
    ),
    "200k entries": (
        json.dumps([{"type": "directory", "path": "d"}] * 200_000).encode(),
        "more than",
    ),
    "deeply nested": (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    "not JSON": (b"<html>", "not valid JSON"),
}


@pytest.mark.parametrize("case", list(LISTINGS))
def test_hostile_listings_are_refused(populated_hub: FakeHub, case: str) -> None:
    body, message = LISTINGS[case]
    populated_hub.hostile.tree_body["acme/Big-GGUF"] = body
    with pytest.raises(HubError, match=message):
        list_gguf_files("acme/Big-GGUF")


def test_endless_pagination_is_bounded(populated_hub: FakeHub) -> None:
    populated_hub.hostile.tree_next["acme/Big-GGUF"] = (
        f"{populated_hub.url}/api/models/acme/Big-GGUF/tree/main?page=again"
    )
    with pytest.raises(HubError, match="more than 50 pages"):
        list_gguf_files("acme/Big-GGUF")
    populated_hub.hostile.tree_next["acme/Big-GGUF"] = "http://example.invalid/next"
    with pytest.raises(HubError, match="another host"):
        list_gguf_files("acme/Big-GGUF")


def test_hostile_search_answers(populated_hub: FakeHub) -> None:
    hostile = populated_hub.hostile
    hostile.search_body = json.dumps({"models": []}).encode()
    with pytest.raises(HubError, match="not a list of models"):
        search_models("x")
    hostile.search_body = json.dumps(
        [
            "junk",
            {"id": "../../etc"},
            {"id": "ok/Repo-GGUF", "downloads": "many", "likes": None},
            {"id": "a/b", "downloads": 5, "gated": "manual"},
        ]
    ).encode()
    hits = search_models("x")
    assert [(h.repo_id, h.downloads, h.gated) for h in hits] == [
        ("ok/Repo-GGUF", 0, False),
        ("a/b", 5, True),
    ]
    hostile.search_body = b"[" + b'{"id": "a/b"},' * 3_000_000 + b"{}]"  # over 32 MiB
    with pytest.raises(HubError, match="larger than 32 MiB"):
        search_models("x")


@pytest.mark.parametrize("meta", [b'{"etag": null, "size": "abc"}', b"[1, 2]", b"\xff\xfe"])
def test_tampered_resume_record_restarts_cleanly(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes], meta: bytes
) -> None:
    folder = tmp_path / "acme--Big-GGUF"
    folder.mkdir()
    (folder / (BIG + ".part")).write_bytes(b"garbage" * 1000)
    (folder / (BIG + ".part.json")).write_bytes(meta)
    path = Downloader(tmp_path).download("acme/Big-GGUF", BIG)
    assert path.read_bytes() == gguf_bytes[BIG]


def test_listing_duplicates_and_absurd_split_counts(
    fake_hub: FakeHub, gguf_bytes: dict[str, bytes]
) -> None:
    entry = {"type": "file", "path": "m-Q8_0.gguf", "size": 10}
    fake_hub.add(FakeRepo("acme/Dup-GGUF", {}))
    fake_hub.hostile.tree_body["acme/Dup-GGUF"] = json.dumps([entry, entry]).encode()
    (group,) = list_gguf_files("acme/Dup-GGUF")
    assert not group.is_split and len(group.files) == 1
    fake_hub.add(FakeRepo("acme/Parts-GGUF", {"m-00001-of-99999.gguf": gguf_bytes[SMALL]}))
    with pytest.raises(HubError) as caught:
        group_for_file(
            "acme/Parts-GGUF", list_repo_files("acme/Parts-GGUF"), "m-00001-of-99999.gguf"
        )
    assert "m-00002-of-99999.gguf" in str(caught.value) and "99993 more" in str(caught.value)
    assert len(str(caught.value)) < 600
