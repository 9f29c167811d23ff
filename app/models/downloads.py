"""Resumable, verified GGUF downloads from the Hub.

huggingface_hub no longer resumes across runs by itself, so bytes go into ``<file>.part``
next to a small ``.part.json`` naming the remote ETag; a later run (or a retry after a
dropped connection) continues with a ``Range`` request. The finished file is checked
against the sha256 the Hub reports for LFS files before it is moved into place, and a
``<file>.done.json`` record (size, sha256, ETag, mtime) lets a later run trust it without
hashing it again, notice when it was damaged, and notice when the Hub has a newer version.

Every name from the Hub is checked and the resolved path must stay inside the models
folder; one download of a file runs at a time, across processes (a ``filelock`` on
``<file>.part.lock``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from filelock import FileLock, Timeout
from huggingface_hub import constants, get_hf_file_metadata, login
from huggingface_hub.utils import build_hf_headers, get_token

from app.models.fit import gib
from app.models.hub import (
    MAX_FILE_BYTES,
    GGUFFile,
    HubError,
    Token,
    as_sha256,
    check_repo_file,
    explain,
    file_url,
    hub_errors,
)
from app.models.hub_http import (
    DEFAULT_STALL_TIMEOUT_S,
    BadResponse,
    RetryPolicy,
    TransferLimits,
    Watch,
    answered_range,
    pause,
    retryable,
    stream,
)

DEFAULT_RESERVE_BYTES = 64 << 20  # keep some room so the disk is not filled to the last byte


class DownloadError(HubError):
    pass


class DownloadCancelled(DownloadError):
    pass


class NotEnoughDiskSpace(DownloadError):
    pass


class HashMismatchError(DownloadError):
    pass


class AlreadyDownloading(DownloadError):
    pass


class UnsafeFileName(DownloadError):
    pass


_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


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


def free_bytes(folder: Path, disk_usage: DiskUsageFn = shutil.disk_usage) -> int:
    """Free space where ``folder`` is, or would be once created (its nearest existing parent)."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return int(disk_usage(str(probe)).free)


def is_offline(offline: bool = False) -> bool:
    return offline or constants.is_offline_mode()


def has_stored_token() -> bool:
    return get_token() is not None


def save_token(token: str) -> None:
    """Validate ``token`` with the Hub and keep it in huggingface_hub's own token store."""
    with hub_errors("saving the Hugging Face token"):
        login(token=token, add_to_git_credential=False)


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
        stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
        lock_wait_s: float = 0.0,
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
        self.stall_timeout_s = stall_timeout_s
        self.lock_wait_s = lock_wait_s

    def local_path(self, repo_id: str, filename: str) -> Path:
        """Where ``filename`` of ``repo_id`` is stored; refuses names that would escape."""
        try:
            check_repo_file(repo_id, filename)
        except HubError as exc:
            raise UnsafeFileName(str(exc)) from None
        path = self.dest_root / repo_id.replace("/", "--") / filename
        root = self.dest_root.resolve()
        for candidate in (path, _sidecar(path, ".part"), _sidecar(path, ".part.lock")):
            if not candidate.resolve().is_relative_to(root):
                raise UnsafeFileName(
                    f"{repo_id}/{filename}: the file would be stored outside "
                    f"the models folder {self.dest_root}; refused"
                )
        return path

    def local_state(self, repo_id: str, f: GGUFFile) -> str:
        """ "missing", "current", "damaged" or "changed on the Hub", from local facts only.

        ``f`` carries the listing's size and sha256 when known (size -1: unknown).
        """
        final = self.local_path(repo_id, f.path)
        if not final.is_file():
            return "missing"
        stat = final.stat()
        record = _read_record(final)
        if f.size >= 0 and stat.st_size != f.size:
            if record is not None and record.get("size") == stat.st_size:
                return "changed on the Hub"
            return "damaged"
        if record is None or record.get("mtime_ns") != stat.st_mtime_ns:
            return "unverified"  # no record of a verified download, or touched since
        if record.get("size") != stat.st_size:
            return "damaged"
        if f.sha256 is not None and record.get("sha256") not in (None, f.sha256):
            return "changed on the Hub"
        return "current"

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
        states = {f.path: self.local_state(repo_id, f) for f in files}
        offline = is_offline(self.offline)
        if offline:
            # Offline nothing can be compared with the Hub: a file with its completion record
            # is trusted, one without only after the checks possible here.
            for f, final in zip(files, finals, strict=True):
                if states[f.path] == "changed on the Hub" or (
                    states[f.path] == "unverified" and self._verify_offline(final, f)
                ):
                    states[f.path] = "current"
        missing = [
            (f, p) for f, p in zip(files, finals, strict=True) if states[f.path] != "current"
        ]
        if not missing:
            return finals
        if offline:
            names = ", ".join(f"{f.path} ({states[f.path]})" for f, _ in missing)
            raise DownloadError(
                f"offline mode is on and {repo_id} is not downloaded yet "
                f"({names}); go online to fetch it"
            )
        remote = {f.path: self._remote_info(repo_id, f, revision) for f, _ in missing}
        for f, final in list(missing):
            if states[f.path] == "unverified" and self._verify_existing(final, f, remote[f.path]):
                missing.remove((f, final))
        if not missing:
            return finals
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
            expected = f.sha256 or as_sha256(etag)
            url = file_url(repo_id, f.path, revision=revision, endpoint=self.endpoint)
            with self._locked(final, cancel):
                if self.local_state(repo_id, GGUFFile(f.path, size, expected)) == "current":
                    continue  # another process finished it while this one waited
                self._fetch(url, final, size, etag, expected, cancel, state)
        state.emit(force=True)
        return finals

    def _verify_existing(self, final: Path, f: GGUFFile, remote: tuple[int, str | None]) -> bool:
        """Trust a file found at its final path without a record only after checking it."""
        size, etag = remote
        expected = f.sha256 or as_sha256(etag)
        if final.stat().st_size != size or expected is None:
            return False
        digest = hashlib.sha256()
        _hash_prefix(final, size, digest)
        if digest.hexdigest() != expected:
            return False
        _write_record(final, size, expected, etag)
        return True

    def _verify_offline(self, final: Path, f: GGUFFile) -> bool:
        size = final.stat().st_size
        if f.sha256 is not None:
            return self._verify_existing(final, f, (size, None))
        return size > 0 and f.size in (-1, size)

    def changed_on_hub(self, repo_id: str, files: Sequence[GGUFFile]) -> list[GGUFFile]:
        """Files downloaded before that the listing now shows with another size or sha256."""
        return [f for f in files if self.local_state(repo_id, f) == "changed on the Hub"]

    @contextmanager
    def _locked(self, final: Path, cancel: threading.Event) -> Iterator[None]:
        final.parent.mkdir(parents=True, exist_ok=True)
        path = _sidecar(final, ".part.lock")
        lock = FileLock(path)
        try:
            lock.acquire(timeout=self.lock_wait_s, poll_interval=0.1, cancel_check=cancel.is_set)
        except Timeout:
            if cancel.is_set():
                raise DownloadCancelled(
                    f"download of {final.name} cancelled while waiting"
                ) from None
            raise AlreadyDownloading(
                f"{final.name} is already being downloaded by another SpecDeck window or "
                "command; wait for it to finish, then try again"
            ) from None
        except OSError as exc:
            raise _write_error(exc, path) from exc
        try:
            yield
        finally:
            # Removed while still held, so no lock file is left beside the model; a waiter
            # that opened the removed file sees it unlinked and locks a new one.
            with suppress(OSError):
                path.unlink()
            lock.release()

    def _remote_info(self, repo_id: str, f: GGUFFile, revision: str) -> tuple[int, str | None]:
        url = file_url(repo_id, f.path, revision=revision, endpoint=self.endpoint)
        with hub_errors(f"{repo_id}/{f.path}"):
            meta = get_hf_file_metadata(
                url, token=self.token, endpoint=self.endpoint, retry_on_errors=True
            )
        if meta.size is None:
            raise DownloadError(f"{repo_id}/{f.path}: the Hub did not report the file size")
        if not 0 <= meta.size <= MAX_FILE_BYTES:
            raise DownloadError(
                f"{repo_id}/{f.path}: the Hub reports an impossible size {meta.size}"
            )
        if f.size >= 0 and meta.size != f.size:
            raise DownloadError(
                f"{repo_id}/{f.path}: the file list says {f.size:,} bytes but "
                f"the file has {meta.size:,}; the repository is changing, "
                "try again in a moment"
            )
        return meta.size, meta.etag

    def _check_disk_space(self, needed: int) -> None:
        free = free_bytes(self.dest_root, self.disk_usage)
        if needed + self.reserve_bytes > free:
            raise NotEnoughDiskSpace(
                f"not enough disk space in {self.dest_root}: the download needs "
                f"{gib(needed)} and only {gib(free)} is free. Free some space "
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
        part = _sidecar(final, ".part")
        meta = _sidecar(final, ".part.json")
        offset = _part_size(final, etag)
        try:
            if offset == 0:
                part.unlink(missing_ok=True)
            meta.write_text(json.dumps({"url": url, "etag": etag, "size": size}))
        except OSError as exc:
            raise _write_error(exc, part) from exc
        digest = hashlib.sha256()
        with _open_part(part) as out:
            if offset:
                _hash_prefix(part, offset, digest)
            retry = RetryPolicy(retries=self.max_retries, first_wait_s=self.retry_wait_s)
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
                except (DownloadError, BadResponse):
                    raise
                except Exception as exc:
                    # huggingface_hub's http_backoff would start the file again from byte 0:
                    # this loop resumes from the .part file, by the same rules and waits.
                    failures += 1
                    if failures > retry.retries or not retryable(exc):
                        raise explain(exc, f"downloading {final.name}") from exc
                    pause(retry.wait_s(failures, exc), cancel)
                try:
                    out.flush()
                except OSError as exc:
                    raise _write_error(exc, part) from exc
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
        _write_record(final, size, expected_sha256 or digest.hexdigest(), etag)

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
        watch = TransferLimits(stall_timeout_s=self.stall_timeout_s).watch(url.rsplit("/")[-1])
        with stream(url, headers, watch) as response:
            if offset and response.status_code != 206:
                raise _RestartFromZero
            if response.status_code not in (200, 206):
                raise BadResponse(f"{url}: unexpected HTTP {response.status_code}")
            if response.status_code == 206:
                answered_range(response, offset, url, f"from byte {offset}")
            if response.headers.get("Content-Encoding", "identity").lower() not in ("identity", ""):
                raise BadResponse(f"{url}: the server sent compressed data although none was asked")
            self._copy_body(response, out, offset, size, digest, cancel, state, watch)

    def _copy_body(
        self,
        response: Any,
        out: IO[bytes],
        offset: int,
        size: int,
        digest: Any,
        cancel: threading.Event,
        state: _Progress,
        watch: Watch,
    ) -> None:
        try:
            for chunk in response.iter_raw():
                if offset + len(chunk) > size:
                    raise DownloadError(
                        f"{response.url}: the server sent more than the {size:,} bytes the file has"
                    )
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise _write_error(exc, Path(out.name)) from exc
                digest.update(chunk)
                offset += len(chunk)
                state.add(len(chunk))
                watch.progress(len(chunk), size - offset)
                if cancel.is_set():
                    return
        except (HubError, OSError):
            raise
        except Exception as exc:
            import httpx2

            if isinstance(exc, httpx2.TimeoutException):
                raise watch.stalled() from exc
            raise


class _RestartFromZero(Exception):
    """The server ignored the Range request and sent the file from its start."""


def _sidecar(final: Path, suffix: str) -> Path:
    return final.with_name(final.name + suffix)


def _read_record(final: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(_sidecar(final, ".done.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write_record(final: Path, size: int, sha256: str | None, etag: str | None) -> None:
    stat = final.stat()
    record = {"size": size, "sha256": sha256, "etag": etag, "mtime_ns": stat.st_mtime_ns}
    try:
        _sidecar(final, ".done.json").write_text(json.dumps(record), encoding="utf-8")
    except OSError as exc:
        raise _write_error(exc, final) from exc


def _write_error(exc: OSError, path: Path) -> DownloadError:
    if exc.errno in _DISK_FULL_ERRNOS:
        why = (
            "the disk is full"
            if exc.errno != errno.EFBIG
            else "the disk is full or the file is larger than its file system allows"
        )
        return NotEnoughDiskSpace(
            f"{why}: cannot write {path} ({exc.strerror}). Free some space or choose another "
            "models folder; the download resumes where it stopped"
        )
    return DownloadError(f"cannot write {path}: {exc.strerror or exc}")


@contextmanager
def _open_part(part: Path) -> Iterator[IO[bytes]]:
    try:
        handle = part.open("ab")
    except OSError as exc:
        raise _write_error(exc, part) from exc
    with handle:
        yield handle


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
    if not isinstance(info, dict) or type(info.get("size")) is not int:
        return 0  # not written by this code: start over
    if info.get("etag") != etag or part.stat().st_size > info["size"]:
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
