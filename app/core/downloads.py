"""Resumable, verified GGUF downloads from the Hub.

huggingface_hub no longer resumes across runs by itself, so bytes go into ``<file>.part``
next to a small ``.part.json`` naming the remote ETag; a later run (or a retry after a
dropped connection) continues with a ``Range`` request. The finished file is checked
against the sha256 the Hub reports for LFS files before it is moved into place, so a file
at its final path is always complete and verified.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import constants, get_hf_file_metadata, login, logout
from huggingface_hub.utils import build_hf_headers, get_session, get_token, hf_raise_for_status

from app.core.hub import GGUFFile, HubError, Token, explain, file_url, hub_errors

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
DEFAULT_RESERVE_BYTES = 64 << 20  # keep some room so the disk is not filled to the last byte


class DownloadError(HubError):
    pass


class DownloadCancelled(DownloadError):
    pass


class NotEnoughDiskSpace(DownloadError):
    pass


class HashMismatchError(DownloadError):
    pass


@dataclass(frozen=True)
class DownloadProgress:
    filename: str
    part: int  # 1-based index of the file being fetched
    parts: int
    done: int  # bytes of all files, including those already on disk
    total: int
    speed_bps: float
    eta_s: float | None

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ProgressFn = Callable[[DownloadProgress], None]
DiskUsageFn = Callable[[str], Any]  # returns an object with .free, like shutil.disk_usage


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def is_offline(offline: bool = False) -> bool:
    return offline or constants.is_offline_mode()


def has_stored_token() -> bool:
    return get_token() is not None


def save_token(token: str) -> None:
    """Validate ``token`` with the Hub and keep it in huggingface_hub's own token store."""
    with hub_errors("saving the Hugging Face token"):
        login(token=token, add_to_git_credential=False)


def forget_token() -> None:
    with hub_errors("removing the Hugging Face token"):
        logout()


class _Rate:
    """Speed over the last few seconds, so the ETA follows the current connection."""

    def __init__(self, window_s: float = 3.0) -> None:
        self.window_s = window_s
        self.samples: list[tuple[float, int]] = []

    def add(self, t: float, done: int) -> float:
        self.samples.append((t, done))
        while len(self.samples) > 2 and t - self.samples[0][0] > self.window_s:
            self.samples.pop(0)
        t0, d0 = self.samples[0]
        return (done - d0) / (t - t0) if t > t0 else 0.0


class Downloader:
    def __init__(
        self,
        dest_root: Path,
        *,
        endpoint: str | None = None,
        token: Token = None,
        offline: bool = False,
        disk_usage: DiskUsageFn = shutil.disk_usage,
        max_retries: int = 5,
        retry_wait_s: float = 1.0,
        reserve_bytes: int = DEFAULT_RESERVE_BYTES,
        progress_interval_s: float = 0.1,
    ) -> None:
        self.dest_root = Path(dest_root)
        self.endpoint = endpoint
        self.token = token
        self.offline = offline
        self.disk_usage = disk_usage
        self.max_retries = max_retries
        self.retry_wait_s = retry_wait_s
        self.reserve_bytes = reserve_bytes
        self.progress_interval_s = progress_interval_s

    def local_path(self, repo_id: str, filename: str) -> Path:
        return self.dest_root / repo_id.replace("/", "--") / filename

    def download(
        self,
        repo_id: str,
        filename: str,
        *,
        sha256: str | None = None,
        revision: str = "main",
        cancel: threading.Event | None = None,
        on_progress: ProgressFn | None = None,
    ) -> Path:
        files = [GGUFFile(filename, -1, sha256)]
        return self.download_files(
            repo_id, files, revision=revision, cancel=cancel, on_progress=on_progress
        )[0]

    def download_files(
        self,
        repo_id: str,
        files: Sequence[GGUFFile],
        *,
        revision: str = "main",
        cancel: threading.Event | None = None,
        on_progress: ProgressFn | None = None,
    ) -> list[Path]:
        """Fetch all ``files`` (e.g. the parts of a split GGUF); return their local paths."""
        cancel = cancel or threading.Event()
        finals = [self.local_path(repo_id, f.path) for f in files]
        missing = [(f, p) for f, p in zip(files, finals, strict=True) if not p.is_file()]
        if not missing:
            return finals
        if is_offline(self.offline):
            names = ", ".join(f.path for f, _ in missing)
            raise DownloadError(
                f"offline mode is on and {repo_id} is not downloaded yet "
                f"({names}); go online to fetch it"
            )
        remote = {f.path: self._remote_info(repo_id, f, revision) for f, _ in missing}
        total = sum(
            remote[f.path][0] if f.path in remote else p.stat().st_size
            for f, p in zip(files, finals, strict=True)
        )
        resumable = sum(_part_size(p, remote[f.path][1]) for f, p in missing)
        remaining = sum(remote[f.path][0] for f, _ in missing) - resumable
        self._check_disk_space(remaining)
        state = _Progress(
            total, total - remaining, on_progress, self.progress_interval_s, len(files)
        )
        for f, final in missing:
            size, etag = remote[f.path]
            state.part = files.index(f) + 1
            state.filename = f.path
            expected = f.sha256 or (etag if etag and _SHA256_RE.match(etag) else None)
            url = file_url(repo_id, f.path, revision=revision, endpoint=self.endpoint)
            self._fetch(url, final, size, etag, expected, cancel, state)
        state.emit(force=True)
        return finals

    def _remote_info(self, repo_id: str, f: GGUFFile, revision: str) -> tuple[int, str | None]:
        url = file_url(repo_id, f.path, revision=revision, endpoint=self.endpoint)
        with hub_errors(f"{repo_id}/{f.path}"):
            meta = get_hf_file_metadata(
                url, token=self.token, endpoint=self.endpoint, retry_on_errors=True
            )
        if meta.size is None:
            raise DownloadError(f"{repo_id}/{f.path}: the Hub did not report the file size")
        return meta.size, meta.etag

    def _check_disk_space(self, needed: int) -> None:
        probe = self.dest_root
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        free = int(self.disk_usage(str(probe)).free)
        if needed + self.reserve_bytes > free:
            raise NotEnoughDiskSpace(
                f"not enough disk space in {self.dest_root}: the download needs "
                f"{human_bytes(needed)} and only {human_bytes(free)} is free. Free some space "
                "or choose another models folder"
            )

    def _fetch(
        self,
        url: str,
        final: Path,
        size: int,
        etag: str | None,
        expected_sha256: str | None,
        cancel: threading.Event,
        state: _Progress,
    ) -> None:
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(final.name + ".part")
        meta = final.with_name(final.name + ".part.json")
        offset = _part_size(final, etag)
        if offset == 0:
            part.unlink(missing_ok=True)
        meta.write_text(json.dumps({"url": url, "etag": etag, "size": size}))
        digest = hashlib.sha256()
        with part.open("ab") as out:
            if offset:
                _hash_prefix(part, offset, digest)
            failures = 0
            while offset < size:
                if cancel.is_set():
                    raise DownloadCancelled(
                        f"download of {final.name} cancelled; it resumes where it stopped next time"
                    )
                try:
                    self._stream(url, out, offset, size, digest, cancel, state)
                    if out.tell() < size and not cancel.is_set():
                        raise ConnectionResetError(f"connection closed at byte {out.tell()}")
                    failures = 0
                except _RestartFromZero:
                    out.truncate(0)
                    out.seek(0)
                    state.add(-offset)
                    digest = hashlib.sha256()
                except DownloadError:
                    raise
                except Exception as exc:
                    failures += 1
                    if failures > self.max_retries or not _is_transient(exc):
                        raise explain(exc, f"downloading {final.name}") from exc
                    time.sleep(self.retry_wait_s * failures)
                out.flush()
                offset = out.tell()
        if offset != size:
            raise DownloadError(f"{final.name}: got {offset} bytes, expected {size}")
        if expected_sha256 is not None and digest.hexdigest() != expected_sha256:
            part.unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
            raise HashMismatchError(
                f"{final.name} is corrupt: its sha256 {digest.hexdigest()[:16]}… does not match "
                f"the Hub's {expected_sha256[:16]}…. The partial file was deleted; "
                "download it again"
            )
        os.replace(part, final)
        meta.unlink(missing_ok=True)

    def _stream(
        self,
        url: str,
        out: Any,
        offset: int,
        size: int,
        digest: Any,
        cancel: threading.Event,
        state: _Progress,
    ) -> None:
        headers = build_hf_headers(token=self.token)
        headers["Accept-Encoding"] = "identity"
        if offset:
            headers["Range"] = f"bytes={offset}-"
        with get_session().stream("GET", url, headers=headers, timeout=60) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            if offset and response.status_code != 206:
                raise _RestartFromZero
            for chunk in response.iter_bytes():
                out.write(chunk)
                digest.update(chunk)
                offset += len(chunk)
                state.add(len(chunk))
                if cancel.is_set():
                    return
                if offset > size:
                    raise DownloadError(f"{url}: the server sent more than {size} bytes")


class _RestartFromZero(Exception):
    """The server ignored the Range request and sent the file from its start."""


def _part_size(final: Path, etag: str | None) -> int:
    """Bytes of a previous run that can be kept: only when the remote file is unchanged."""
    part = final.with_name(final.name + ".part")
    meta = final.with_name(final.name + ".part.json")
    if not part.is_file() or not meta.is_file():
        return 0
    try:
        info = json.loads(meta.read_text())
    except (OSError, ValueError):
        return 0
    if info.get("etag") != etag or part.stat().st_size > int(info.get("size", -1)):
        return 0
    return part.stat().st_size


def _hash_prefix(part: Path, length: int, digest: Any) -> None:
    with part.open("rb") as handle:
        remaining = length
        while remaining:
            block = handle.read(min(remaining, 8 << 20))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)


def _is_transient(exc: Exception) -> bool:
    import httpx2

    if isinstance(exc, httpx2.TransportError | ConnectionError):
        return True
    response = getattr(exc, "response", None)
    return response is not None and response.status_code in (408, 429, 500, 502, 503, 504)


class _Progress:
    def __init__(
        self, total: int, done: int, callback: ProgressFn | None, interval_s: float, parts: int
    ) -> None:
        self.total = total
        self.done = done
        self.callback = callback
        self.interval_s = interval_s
        self.rate = _Rate()
        self.last_emit = 0.0
        self.part = 1
        self.parts = parts
        self.filename = ""
        self.rate.add(time.monotonic(), done)

    def add(self, n: int) -> None:
        self.done += n
        self.emit()

    def emit(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.callback is None or (not force and now - self.last_emit < self.interval_s):
            return
        self.last_emit = now
        speed = self.rate.add(now, self.done)
        remaining = self.total - self.done
        eta = remaining / speed if speed > 0 else None
        self.callback(
            DownloadProgress(
                self.filename, self.part, self.parts, self.done, self.total, speed, eta
            )
        )
