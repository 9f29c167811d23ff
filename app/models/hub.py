"""Hugging Face Hub access: search GGUF repos, list their files by quantization, read headers.

Every function takes ``endpoint`` (None: huggingface_hub's configured endpoint, which follows
``HF_ENDPOINT``) and ``token`` (None: the token in huggingface_hub's own store, False: none).
Errors are re-raised as :class:`HubError` with a message a person can act on.
"""

from __future__ import annotations

import errno
import re
import socket
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx2
from huggingface_hub import constants, hf_hub_url
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from app.gguf.reader import GGUFHeader, read_header, read_local_header
from app.models.hub_http import (
    DEFAULT_HEADER_DEADLINE_S,
    BadResponse,
    HttpRangeSource,
    HubError,
    TransferLimits,
    get_json,
)
from app.models.split_names import part_names, split_name, unsplit

Token = str | bool | None

# A listing is untrusted: bounded in bytes, pages, entries and per-file size.
MAX_LISTING_PAGE_BYTES = 32 << 20
MAX_LISTING_PAGES = 50
MAX_LISTING_ENTRIES = 100_000
MAX_FILE_BYTES = 1 << 41  # 2 TiB: far above any single GGUF file
MAX_REPO_PATH_CHARS = 512
MAX_NAME_BYTES = 255  # the longest file name most file systems accept
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_WINDOWS_DEVICES = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    *(f"COM{i}" for i in range(10)),
    *(f"LPT{i}" for i in range(10)),
}

# Longest names first so "Q4_K_M" wins over "Q4_K" and "IQ4_XS" over "Q4".
_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])("
    r"IQ[1-4]_(?:XXS|XS|NL|S|M)|Q[2-6]_K_(?:XL|S|M|L)|Q[2-8]_K|Q[4-8]_[01]|TQ[12]_0|"
    r"MXFP4(?:_MOE)?|BF16|F16|F32|FP16|FP32"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def as_sha256(value: object) -> str | None:
    """``value`` if it is a sha256 in lowercase hex (an LFS object id, an ETag), else None."""
    return value if isinstance(value, str) and _SHA256_RE.fullmatch(value) else None


def unsafe_repo_id_reason(repo_id: object) -> str | None:
    if not isinstance(repo_id, str) or not _REPO_ID_RE.match(repo_id) or ".." in repo_id:
        return "is not a repository name of the form owner/name"
    return None


def unsafe_path_reason(path: object) -> str | None:
    """Why a file name from a listing cannot be stored under the models folder, or None.

    Names are checked for every platform at once, so a listing that would escape the
    folder on Windows is refused on Linux too.
    """
    if not isinstance(path, str) or not path:
        return "is empty"
    if len(path) > MAX_REPO_PATH_CHARS:
        return f"is longer than {MAX_REPO_PATH_CHARS} characters"
    if any(
        ord(c) < 32 or ord(c) == 127 or unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in path
    ):
        return "contains control or invisible formatting characters"
    if "\\" in path:
        return "contains a backslash"
    if ":" in path:
        return "contains a colon (a drive letter or a stream name)"
    if path.startswith("/"):
        return "is an absolute path"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' folder"
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            return f"has a name longer than {MAX_NAME_BYTES} bytes"
        if part != part.rstrip(". ") or part.split(".")[0].upper() in _WINDOWS_DEVICES:
            return "has a name Windows cannot store"
    return None


def check_repo_file(repo_id: str, path: str) -> None:
    """Raise HubError unless ``repo_id`` and ``path`` are safe to use as local names."""
    reason = unsafe_repo_id_reason(repo_id)
    if reason is not None:
        raise HubError(f"{repo_id!r} {reason}")
    reason = unsafe_path_reason(path)
    if reason is not None:
        raise HubError(f"{repo_id}: refusing the file name {path!r}: it {reason}")


def endpoint_or_default(endpoint: str | None) -> str:
    return (endpoint or constants.ENDPOINT).rstrip("/")


def explain(exc: BaseException, what: str) -> HubError:
    """Turn a huggingface_hub / HTTP exception into a message a person can act on."""
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"{what}: offline mode is on, so only downloaded models can be used")
    if isinstance(exc, GatedRepoError):
        repo = exc.repo_id or "/".join(what.split("/")[:2])
        return HubError(
            f"{repo} is a gated repository: accept its license on the Hugging Face website, "
            "then save an access token that can read it (first page of the pair wizard, "
            "or `hf auth login`)"
        )
    if isinstance(exc, DisabledRepoError):
        return HubError(f"{what}: the repository has been disabled on the Hub")
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(
            f"{what}: repository not found. Check the name; if it is private or gated, "
            "add a Hugging Face access token that can read it"
        )
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"{what}: that revision does not exist in the repository")
    if isinstance(exc, RemoteEntryNotFoundError):
        return HubError(f"{what}: the file does not exist in the repository")
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        if status == 401:
            return HubError(
                f"{what}: the Hub refused the access token (HTTP 401); check or replace it"
            )
        return HubError(f"{what}: the Hub answered HTTP {status}")
    if isinstance(exc, OSError) and not isinstance(
        exc, ConnectionError | TimeoutError | socket.gaierror
    ):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return HubError(
                f"{what}: the disk is full ({exc.filename or exc.strerror}). "
                "Free some space or choose another models folder, then try again"
            )
        return HubError(
            f"{what}: cannot write or read {exc.filename or 'a file'}: {exc.strerror or exc}"
        )
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror | httpx2.TransportError):
        return HubError(
            f"{what}: cannot reach the Hugging Face Hub ({exc}). "
            "Check the network, or switch to offline mode"
        )
    return HubError(f"{what}: {exc}")


@contextmanager
def hub_errors(what: str) -> Iterator[None]:
    try:
        yield
    except HubError:
        raise
    except Exception as exc:
        raise explain(exc, what) from exc


@dataclass(frozen=True)
class ModelHit:
    repo_id: str
    downloads: int
    likes: int
    gated: bool


def search_models(
    query: str,
    *,
    limit: int = 30,
    endpoint: str | None = None,
    token: Token = None,
    limits: TransferLimits | None = None,
) -> list[ModelHit]:
    """GGUF repositories matching ``query``, most downloaded first (one bounded request)."""
    from urllib.parse import urlencode

    from huggingface_hub.utils import build_hf_headers

    what = f"searching the Hub for {query!r}"
    params: list[tuple[str, str]] = [
        ("filter", "gguf"),
        ("sort", "downloads"),
        ("direction", "-1"),
        ("limit", str(max(1, min(limit, 1000)))),
    ]
    if query:
        params.append(("search", query))
    # The Hub leaves "gated" out of search results unless it is asked for by name.
    params += [("expand[]", name) for name in ("downloads", "likes", "gated")]
    url = f"{endpoint_or_default(endpoint)}/api/models?{urlencode(params)}"
    watch = (limits or TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S)).watch(what)
    with hub_errors(what):
        body, _next = get_json(
            url, build_hf_headers(token=token), watch, max_bytes=MAX_LISTING_PAGE_BYTES
        )
        if not isinstance(body, list):
            raise BadResponse(f"{what}: the Hub's answer is not a list of models")
        return [hit for hit in map(_model_hit, body[:limit]) if hit is not None]


def _model_hit(entry: object) -> ModelHit | None:
    if not isinstance(entry, dict):
        return None
    repo_id = entry.get("id") or entry.get("modelId")
    if unsafe_repo_id_reason(repo_id) is not None:
        return None  # a name no download could use
    assert isinstance(repo_id, str)
    downloads, likes = entry.get("downloads", 0), entry.get("likes", 0)
    return ModelHit(
        repo_id,
        downloads if type(downloads) is int else 0,
        likes if type(likes) is int else 0,
        entry.get("gated") not in (None, False, "false"),
    )


@dataclass(frozen=True)
class GGUFFile:
    path: str
    size: int
    sha256: str | None  # the LFS object id, when the Hub reports one


@dataclass(frozen=True)
class QuantGroup:
    """One downloadable model: a single GGUF or all parts of a split GGUF."""

    quant: str
    files: tuple[GGUFFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def first(self) -> GGUFFile:
        return self.files[0]

    @property
    def is_split(self) -> bool:
        return len(self.files) > 1

    @property
    def label(self) -> str:
        return (
            Path(self.first.path).name
            if not self.is_split
            else f"{Path(unsplit(self.first.path)).name} ({len(self.files)} parts)"
        )


def quant_from_filename(name: str) -> str:
    matches = _QUANT_RE.findall(Path(name).name)
    if not matches:
        return "unknown"
    quant = matches[-1].upper()
    return {"FP16": "F16", "FP32": "F32"}.get(quant, quant)


def group_gguf_files(files: list[GGUFFile]) -> list[QuantGroup]:
    """Group files by model: split parts together, ``mmproj`` projectors left out."""
    groups: dict[str, list[GGUFFile]] = {}
    for f in files:
        name = Path(f.path).name
        if not name.lower().endswith(".gguf") or name.lower().startswith("mmproj"):
            continue
        groups.setdefault(unsplit(f.path), []).append(f)
    result = []
    for key, parts in groups.items():
        parts.sort(key=lambda f: f.path)
        if [f.path for f in parts] != part_names(parts[0].path):
            continue  # an incomplete split upload cannot be loaded
        result.append(QuantGroup(quant_from_filename(key), tuple(parts)))
    result.sort(key=lambda g: g.size)
    return result


HEAD_FILE_PREFIXES = ("mtp-", "dflash-", "dspark-")


def is_head_file(path: str) -> bool:
    """Whether a file's name marks it as a drafting head that rides beside a target in the
    same repository: llama.cpp's converter writes a separate next-token head as
    ``mtp-NAME.gguf`` (ggml-org's conversions name a block drafter ``dflash-NAME.gguf`` or
    ``dspark-NAME.gguf``), and repositories keep Gemma 4 assistants as ``mtp-…`` files, under
    an ``MTP/`` folder or named ``…-assistant…``. Its header has the last word; the name only
    keeps such a file from being offered as one of the target's quantizations."""
    parts = path.lower().split("/")
    return (
        parts[-1].startswith(HEAD_FILE_PREFIXES) or "mtp" in parts[:-1] or "-assistant" in parts[-1]
    )


def split_heads(groups: list[QuantGroup]) -> tuple[list[QuantGroup], list[QuantGroup]]:
    """(models, heads) of a repository's groups; all of them models when every file looks
    like a head (a repository of heads alone is read as it is, and its header explains)."""
    heads = [g for g in groups if is_head_file(g.first.path)]
    models = [g for g in groups if not is_head_file(g.first.path)]
    return (models, heads) if models else (groups, [])


def group_for_file(repo_id: str, files: list[GGUFFile], filename: str) -> QuantGroup:
    """The downloadable model ``filename`` belongs to; the error names what is wrong."""
    check_repo_file(repo_id, filename)
    names = {f.path for f in files}
    if filename not in names:
        raise HubError(f"{repo_id} has no file {filename!r}")
    for group in group_gguf_files(files):
        if any(f.path == filename for f in group.files):
            return group
    split = split_name(filename)
    if split is None:
        raise HubError(f"{filename!r} in {repo_id} is not a GGUF model file")
    count = split.count
    missing = [name for name in part_names(filename) if name not in names]
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    raise HubError(
        f"{repo_id}: {filename} is one of {count} parts of a split model, and "
        f"the repository lacks {shown or 'a consistent set of parts'}; "
        "it cannot be loaded until the uploader adds the missing parts"
    )


def list_gguf_files(
    repo_id: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: Token = None,
    limits: TransferLimits | None = None,
) -> list[QuantGroup]:
    """The repository's GGUF models with sizes, smallest first.

    Entries whose names could not be stored safely under the models folder are left out.
    """
    return group_gguf_files(
        list_repo_files(repo_id, revision=revision, endpoint=endpoint, token=token, limits=limits)
    )


def list_repo_files(
    repo_id: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: Token = None,
    limits: TransferLimits | None = None,
) -> list[GGUFFile]:
    """Every file of the repository with a safe name, read with bounded requests."""
    from huggingface_hub.utils import build_hf_headers

    what = f"listing {repo_id}"
    reason = unsafe_repo_id_reason(repo_id)
    if reason is not None:
        raise HubError(f"{repo_id!r} {reason}")
    base = endpoint_or_default(endpoint)
    url: str | None = (
        f"{base}/api/models/{repo_id}/tree/{quote(revision, safe='')}?recursive=true&expand=false"
    )
    watch = (limits or TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S)).watch(what)
    files: list[GGUFFile] = []
    seen_paths: set[str] = set()
    seen = 0
    with hub_errors(what):
        for _page in range(MAX_LISTING_PAGES):
            if url is None:
                break
            body, url = get_json(
                url, build_hf_headers(token=token), watch, max_bytes=MAX_LISTING_PAGE_BYTES
            )
            if not isinstance(body, list):
                raise BadResponse(f"{what}: the Hub's answer is not a list of files")
            seen += len(body)
            if seen > MAX_LISTING_ENTRIES:
                raise BadResponse(
                    f"{what}: the repository lists more than {MAX_LISTING_ENTRIES:,} files"
                )
            for f in map(_listed_file, body):
                if f is not None and f.path not in seen_paths:
                    seen_paths.add(f.path)
                    files.append(f)
            if url is not None and not url.startswith(base + "/"):
                raise BadResponse(f"{what}: the next page is on another host ({url})")
        else:
            if url is not None:
                raise BadResponse(f"{what}: the listing has more than {MAX_LISTING_PAGES} pages")
    return files


def _listed_file(entry: object) -> GGUFFile | None:
    if not isinstance(entry, dict):
        raise BadResponse("the Hub's file listing contains an entry that is not an object")
    if entry.get("type") != "file":
        return None
    path, size, lfs = entry.get("path"), entry.get("size"), entry.get("lfs")
    if type(size) is not int or not 0 <= size <= MAX_FILE_BYTES:
        raise BadResponse(f"the Hub's file listing gives {path!r} an impossible size {size!r}")
    if unsafe_path_reason(path) is not None:
        return None
    assert isinstance(path, str)
    return GGUFFile(path, size, as_sha256(lfs.get("oid")) if isinstance(lfs, dict) else None)


def file_url(
    repo_id: str, filename: str, *, revision: str = "main", endpoint: str | None = None
) -> str:
    check_repo_file(repo_id, filename)
    return hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint_or_default(endpoint))


def read_remote_header(
    repo_id: str,
    filename: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: Token = None,
    limits: TransferLimits | None = None,
) -> GGUFHeader:
    """The header of a GGUF on the Hub, fetched by range requests (a few MiB at most).

    ``limits`` bounds the whole inspection (default: a stall timeout and a total deadline)
    and carries the cancel flag.
    """
    url = file_url(repo_id, filename, revision=revision, endpoint=endpoint)
    limits = limits or TransferLimits(deadline_s=DEFAULT_HEADER_DEADLINE_S)
    with hub_errors(f"{repo_id}/{filename}"):
        return read_header(
            HttpRangeSource(url, token=token, limits=limits, name=f"{repo_id}/{filename}")
        )


@dataclass(frozen=True)
class ModelRef:
    """A model named on the command line: a local path or ``repo:file`` on the Hub."""

    path: Path | None = None
    repo_id: str | None = None
    filename: str | None = None

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        local = Path(text).expanduser()
        if local.exists() or ":" not in text:
            return cls(path=local)
        repo_id, _, filename = text.partition(":")
        if repo_id.count("/") != 1 or not filename:
            raise ValueError(f"{text!r}: expected a local .gguf path or owner/repo:file.gguf")
        return cls(repo_id=repo_id, filename=filename)

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else f"{self.repo_id}:{self.filename}"

    def read_header(self, *, endpoint: str | None = None, token: Token = None) -> GGUFHeader:
        if self.path is not None:
            if not self.path.is_file():
                kind = "a folder" if self.path.is_dir() else "not a regular file"
                said = kind if self.path.exists() else "no such file"
                raise FileNotFoundError(f"{self.path}: {said}")
            return read_local_header(self.path)
        assert self.repo_id is not None and self.filename is not None
        return read_remote_header(self.repo_id, self.filename, endpoint=endpoint, token=token)

    def size(self, *, endpoint: str | None = None, token: Token = None) -> int:
        """Bytes on disk of the whole model (all split parts)."""
        if self.path is not None:
            parts = [self.path.with_name(name) for name in part_names(self.path.name)]
            return sum(p.stat().st_size for p in parts if p.is_file())
        assert self.repo_id is not None and self.filename is not None
        for group in list_gguf_files(self.repo_id, endpoint=endpoint, token=token):
            if any(f.path == self.filename for f in group.files):
                return group.size
        raise HubError(f"{self}: the file is not in the repository")
