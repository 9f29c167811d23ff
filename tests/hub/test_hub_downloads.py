"""Resumable, verified downloads against the fake Hub."""

from __future__ import annotations

import hashlib
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.models.downloads import (
    DownloadCancelled,
    Downloader,
    DownloadError,
    DownloadProgress,
    HashMismatchError,
    NotEnoughDiskSpace,
    has_stored_token,
    save_token,
)
from app.models.hub import HubError, list_gguf_files
from tests.hub.fake_hub import FakeHub, FakeRepo

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

BIG = "big-Q8_0.gguf"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_download_verifies_and_reports_progress(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    seen: list[DownloadProgress] = []
    downloader = Downloader(tmp_path / "models", progress_interval_s=0)
    path = downloader.download("acme/Big-GGUF", BIG, on_progress=seen.append)
    assert path == tmp_path / "models" / "acme--Big-GGUF" / BIG
    assert _sha(path.read_bytes()) == _sha(gguf_bytes[BIG])
    assert not path.with_name(BIG + ".part").exists()
    assert seen[-1].done == seen[-1].total == len(gguf_bytes[BIG])
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert any(p.speed_bps > 0 for p in seen)
    # a second call finds the verified file and does not touch the network
    before = len(populated_hub.log)
    assert downloader.download("acme/Big-GGUF", BIG) == path
    assert len(populated_hub.log) == before


def test_dropped_connection_is_retried_with_range(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.drop_after[BIG] = [300_000, 700_000]
    downloader = Downloader(tmp_path, retry_wait_s=0.01)
    path = downloader.download("acme/Big-GGUF", BIG)
    assert _sha(path.read_bytes()) == _sha(gguf_bytes[BIG])
    ranges = [e.range for e in populated_hub.requests_for(BIG)]
    assert ranges[0] is None and ranges[1].startswith("bytes=") and len(ranges) == 3


def test_resume_after_restart(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.drop_after[BIG] = [400_000]
    first = Downloader(tmp_path, max_retries=0)
    with pytest.raises(HubError, match="cannot reach"):
        first.download("acme/Big-GGUF", BIG)
    part = tmp_path / "acme--Big-GGUF" / (BIG + ".part")
    assert 0 < part.stat().st_size <= 400_000
    kept = part.stat().st_size

    restarted = Downloader(tmp_path)  # a new object, as after an app restart
    path = restarted.download("acme/Big-GGUF", BIG)
    assert _sha(path.read_bytes()) == _sha(gguf_bytes[BIG])
    assert populated_hub.requests_for(BIG)[-1].range == f"bytes={kept}-"


def test_changed_remote_file_restarts_from_zero(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.drop_after[BIG] = [400_000]
    with pytest.raises(HubError):
        Downloader(tmp_path, max_retries=0).download("acme/Big-GGUF", BIG)
    repo = populated_hub.repos["acme/Big-GGUF"]
    repo.files[BIG] = gguf_bytes["big-Q4_K_M.gguf"]  # new upload, new ETag
    path = Downloader(tmp_path).download("acme/Big-GGUF", BIG)
    assert path.read_bytes() == gguf_bytes["big-Q4_K_M.gguf"]
    assert populated_hub.requests_for(BIG)[-1].range is None


def test_hash_mismatch_is_refused(populated_hub: FakeHub, tmp_path: Path) -> None:
    populated_hub.repos["acme/Big-GGUF"].wrong_sha.add(BIG)
    with pytest.raises(HashMismatchError, match="corrupt.*download it again"):
        Downloader(tmp_path).download("acme/Big-GGUF", BIG)
    folder = tmp_path / "acme--Big-GGUF"
    assert list(folder.iterdir()) == []  # neither the final file nor the .part remain


def test_listed_sha256_is_used(populated_hub: FakeHub, tmp_path: Path) -> None:
    group = list_gguf_files("acme/Big-GGUF")[1]
    bad = [type(f)(f.path, f.size, "0" * 64) for f in group.files]
    with pytest.raises(HashMismatchError):
        Downloader(tmp_path).download_files("acme/Big-GGUF", bad)
    assert Downloader(tmp_path).download_files("acme/Big-GGUF", list(group.files))[0].is_file()


def test_disk_full_refused_before_any_byte(populated_hub: FakeHub, tmp_path: Path) -> None:
    def tiny_disk(_path: str) -> SimpleNamespace:
        return SimpleNamespace(total=10 << 20, used=10 << 20, free=100_000)

    downloader = Downloader(tmp_path / "models", disk_usage=tiny_disk, reserve_bytes=0)
    with pytest.raises(NotEnoughDiskSpace, match="not enough disk space.*Free some space"):
        downloader.download("acme/Big-GGUF", BIG)
    assert populated_hub.requests_for(BIG, "GET") == []
    real = Downloader(tmp_path / "models", disk_usage=shutil.disk_usage)
    assert real.download("acme/Big-GGUF", BIG).is_file()


def test_cancel_keeps_the_part_for_later(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.chunk_delay_s = 0.01
    cancel = threading.Event()

    def stop_half_way(progress: DownloadProgress) -> None:
        if progress.done > 200_000:
            cancel.set()

    downloader = Downloader(tmp_path, progress_interval_s=0)
    with pytest.raises(DownloadCancelled, match="cancelled"):
        downloader.download("acme/Big-GGUF", BIG, cancel=cancel, on_progress=stop_half_way)
    part = tmp_path / "acme--Big-GGUF" / (BIG + ".part")
    assert 200_000 < part.stat().st_size < len(gguf_bytes[BIG])
    populated_hub.chunk_delay_s = 0
    path = downloader.download("acme/Big-GGUF", BIG)
    assert _sha(path.read_bytes()) == _sha(gguf_bytes[BIG])


def test_gated_download_needs_token(populated_hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(HubError, match="acme/Gated-GGUF is a gated repository"):
        Downloader(tmp_path, token=False).download("acme/Gated-GGUF", "small-Q8_0.gguf")
    assert not has_stored_token()
    with pytest.raises(HubError, match="token"):
        save_token("hf_wrong")
    save_token("hf_valid_test_token")  # into huggingface_hub's token store (a temp HF home)
    assert has_stored_token()
    path = Downloader(tmp_path).download("acme/Gated-GGUF", "small-Q8_0.gguf")
    assert path.is_file()


def test_offline_uses_only_downloaded_files(populated_hub: FakeHub, tmp_path: Path) -> None:
    online = Downloader(tmp_path)
    path = online.download("acme/Small-GGUF", "small-Q8_0.gguf")
    offline = Downloader(tmp_path, offline=True)
    before = len(populated_hub.log)
    assert offline.download("acme/Small-GGUF", "small-Q8_0.gguf") == path
    with pytest.raises(DownloadError, match="offline mode is on"):
        offline.download("acme/Big-GGUF", BIG)
    assert len(populated_hub.log) == before


def test_split_model_downloads_all_parts(
    fake_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    data = gguf_bytes[BIG]
    half = len(data) // 2
    fake_hub.add(
        FakeRepo(
            "acme/Split-GGUF",
            {"m-Q8_0-00001-of-00002.gguf": data[:half], "m-Q8_0-00002-of-00002.gguf": data[half:]},
        )
    )
    (group,) = list_gguf_files("acme/Split-GGUF")
    seen: list[DownloadProgress] = []
    paths = Downloader(tmp_path, progress_interval_s=0).download_files(
        "acme/Split-GGUF", list(group.files), on_progress=seen.append
    )
    assert b"".join(p.read_bytes() for p in paths) == data
    assert seen[-1].total == len(data) and seen[-1].parts == 2
