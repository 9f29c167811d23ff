"""Hugging Face Hub access: search GGUF repos, list their files by quantization, read headers.

Every function takes ``endpoint`` (None: huggingface_hub's configured endpoint, which follows
``HF_ENDPOINT``) and ``token`` (None: the token in huggingface_hub's own store, False: none).
Errors are re-raised as :class:`HubError` with a message a person can act on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from huggingface_hub import HfApi, constants
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from app.core.gguf_header import GGUFHeader, HttpRangeSource, read_header, read_local_header

Token = str | bool | None

SPLIT_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
# Longest names first so "Q4_K_M" wins over "Q4_K" and "IQ4_XS" over "Q4".
_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])("
    r"IQ[1-4]_(?:XXS|XS|NL|S|M)|Q[2-6]_K_(?:XL|S|M|L)|Q[2-8]_K|Q[4-8]_[01]|TQ[12]_0|"
    r"MXFP4(?:_MOE)?|BF16|F16|F32|FP16|FP32"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)


class HubError(RuntimeError):
    """A Hub request failed; the message says what to do about it."""


def endpoint_or_default(endpoint: str | None) -> str:
    return (endpoint or constants.ENDPOINT).rstrip("/")


def explain(exc: BaseException, what: str) -> HubError:
    """Turn a huggingface_hub / HTTP exception into a message a person can act on."""
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"{what}: offline mode is on, so only downloaded models can be used")
    if isinstance(exc, GatedRepoError):
        repo = exc.repo_id or what
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
    if isinstance(exc, OSError | ConnectionError) or type(exc).__module__.startswith("httpx"):
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
    query: str, *, limit: int = 30, endpoint: str | None = None, token: Token = None
) -> list[ModelHit]:
    """GGUF repositories matching ``query``, most downloaded first."""
    api = HfApi(endpoint=endpoint_or_default(endpoint), token=token)
    with hub_errors(f"searching the Hub for {query!r}"):
        models = api.list_models(filter="gguf", search=query or None, sort="downloads", limit=limit)
        return [
            ModelHit(m.id, int(m.downloads or 0), int(m.likes or 0), bool(m.gated)) for m in models
        ]


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
            else (f"{Path(SPLIT_RE.sub('', self.first.path)).name} ({len(self.files)} parts)")
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
        key = SPLIT_RE.sub("", f.path)
        groups.setdefault(key, []).append(f)
    result = []
    for key, parts in groups.items():
        parts.sort(key=lambda f: f.path)
        match = SPLIT_RE.search(parts[0].path)
        if match and len(parts) != int(match.group(2)):
            continue  # an incomplete split upload cannot be loaded
        result.append(QuantGroup(quant_from_filename(key), tuple(parts)))
    result.sort(key=lambda g: g.size)
    return result


def list_gguf_files(
    repo_id: str, *, revision: str = "main", endpoint: str | None = None, token: Token = None
) -> list[QuantGroup]:
    """The repository's GGUF models with sizes, smallest first."""
    api = HfApi(endpoint=endpoint_or_default(endpoint), token=token)
    files = []
    with hub_errors(f"listing {repo_id}"):
        for entry in api.list_repo_tree(repo_id, recursive=True, revision=revision):
            size = getattr(entry, "size", None)
            if size is None:
                continue  # a folder
            lfs = getattr(entry, "lfs", None)
            files.append(GGUFFile(entry.path, int(size), lfs.sha256 if lfs else None))
    return group_gguf_files(files)


def file_url(
    repo_id: str, filename: str, *, revision: str = "main", endpoint: str | None = None
) -> str:
    return (
        f"{endpoint_or_default(endpoint)}/{repo_id}/resolve/"
        f"{quote(revision, safe='')}/{quote(filename)}"
    )


def read_remote_header(
    repo_id: str,
    filename: str,
    *,
    revision: str = "main",
    endpoint: str | None = None,
    token: Token = None,
) -> GGUFHeader:
    """The header of a GGUF on the Hub, fetched by range requests (a few MiB at most)."""
    url = file_url(repo_id, filename, revision=revision, endpoint=endpoint)
    with hub_errors(f"{repo_id}/{filename}"):
        return read_header(HttpRangeSource(url, token=token))


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
                raise FileNotFoundError(f"{self.path}: no such file")
            return read_local_header(self.path)
        assert self.repo_id is not None and self.filename is not None
        return read_remote_header(self.repo_id, self.filename, endpoint=endpoint, token=token)

    def size(self, *, endpoint: str | None = None, token: Token = None) -> int:
        """Bytes on disk of the whole model (all split parts)."""
        if self.path is not None:
            match = SPLIT_RE.search(self.path.name)
            if match is None:
                return self.path.stat().st_size
            pattern = SPLIT_RE.sub("", self.path.name) + "-*-of-" + match.group(2) + ".gguf"
            return sum(p.stat().st_size for p in self.path.parent.glob(pattern))
        assert self.repo_id is not None and self.filename is not None
        for group in list_gguf_files(self.repo_id, endpoint=endpoint, token=token):
            if any(f.path == self.filename for f in group.files):
                return group.size
        raise HubError(f"{self}: the file is not in the repository")
