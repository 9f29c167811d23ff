"""The local model library and the saved pair profiles.

``library.json`` lives in the user data folder (``SPECDECK_DATA_DIR`` overrides it, which
tests use). It lists downloaded and imported GGUF models with the facts read from their
headers, and named profiles (saved pairs: a target, an optional draft and their settings).
Which pair is current is not kept here but in the settings, with the saved pair's name
(``app.store.current_pair`` says why). Writes are atomic so a crash never leaves a
half-written library.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from app.engine.config import DraftSource, ModelSpec
from app.files.fileio import (
    StoredFileError,
    atomic_write_text,
    clean_stale_temps,
    json_text,
    read_json_object,
)
from app.files.paths import data_dir
from app.gguf.facts import model_facts
from app.gguf.reader import GGUFFormatError, read_local_header
from app.models.hub import unsafe_repo_id_reason
from app.models.split_names import part_names
from app.store.current_pair import LIBRARY_FILE, LIBRARY_LIMIT, V1_ACTIVE_KEY, same_file
from app.store.migrations import Document, MigrationError, Schema, upgrade


def _forget_the_active_pair(document: Document) -> Document:
    """Version 1 -> 2: the current pair moved to the settings. What version 1 called active
    is kept, as a record only, for the settings' own upgrade (``app.store.current_pair``)."""
    active = document.pop("active", None)
    if active is not None:
        document[V1_ACTIVE_KEY] = active
    return document


def _name_the_draft_source(document: Document) -> Document:
    """Version 2 -> 3: a saved pair names its draft source (a pair without a draft model is
    no longer always n-gram drafting: a target may draft for itself with its MTP layers)."""
    for profile in document.get("profiles", []):
        if isinstance(profile, dict) and not profile.get("draft_source"):
            profile["draft_source"] = "model" if profile.get("draft") else "ngram"
    return document


# Format versions of library.json ("version"; a file without it is version 1). A change of
# format bumps ``current`` and appends the step from the previous version.
LIBRARY_SCHEMA = Schema(
    "model library", current=3, steps=(_forget_the_active_pair, _name_the_draft_source)
)
LIBRARY_VERSION = LIBRARY_SCHEMA.current


class LibraryError(ValueError):
    pass


class ModelInUseError(LibraryError):
    pass


def models_dir() -> Path:
    return data_dir() / "models"


@dataclass(frozen=True)
class LibraryModel:
    id: str
    path: str  # the first (or only) file; llama.cpp finds the other split parts itself
    parts: tuple[str, ...]
    size: int
    quantization: str
    architecture: str
    context_length: int
    n_params: int
    name: str
    source: str  # "hub" or "import"
    repo_id: str | None = None
    sha256: str | None = None
    added: float = 0.0
    repo_path: str | None = None  # the file's path inside its Hub repository
    # how it drafts, in a few words ("MTP, 1 head", "plain model"…); None: added before this
    # was recorded (the header says, see app.models.drafting)
    drafting: str | None = None

    @property
    def available(self) -> bool:
        return all(Path(p).is_file() for p in self.parts)

    @property
    def label(self) -> str:
        origin = self.repo_id or Path(self.path).parent.name
        return f"{origin} · {self.repo_path or Path(self.path).name}"


@dataclass(frozen=True)
class Profile:
    name: str
    target: str  # LibraryModel.id
    draft: str | None
    n_ctx: int = 4096
    kv_type: str = "f16"
    draft_max: int = 8
    calibration: dict[str, float] = field(default_factory=dict)
    # "model", "ngram" or "mtp" (the target's own next-token layers); "": from ``draft``
    draft_source: Literal["", "model", "ngram", "mtp"] = ""

    @property
    def source(self) -> DraftSource:
        if self.draft_source:
            return DraftSource(self.draft_source)
        return DraftSource.MODEL if self.draft else DraftSource.NGRAM


def describe_gguf(
    paths: Sequence[Path],
    *,
    source: str,
    repo_id: str | None = None,
    sha256: str | None = None,
    repo_path: str | None = None,
) -> LibraryModel:
    """A library entry for a GGUF (all parts of a split one), validated by its header."""
    first = paths[0]
    try:
        facts = model_facts(read_local_header(first))
    except GGUFFormatError as exc:
        raise LibraryError(f"{first.name} is not a usable GGUF model: {exc}") from exc
    except OSError as exc:
        raise LibraryError(f"cannot read {first}: {exc.strerror or exc}") from exc
    if facts.n_layer <= 0 or facts.vocab_size <= 0:
        raise LibraryError(
            f"{first.name} has no layers or no vocabulary: "
            "it is not a language model llama.cpp can run"
        )
    if facts.split_count != len(paths):
        expected = split_parts(first)
        if len(expected) == facts.split_count:
            missing = [p.name for p in expected if not p.is_file()]
            raise LibraryError(
                f"{first.name} is part 1 of a model split into "
                f"{facts.split_count} files; missing {', '.join(missing)}"
            )
        raise LibraryError(
            f"{first.name} says the model is split into {facts.split_count} "
            "files, but its name does not follow the "
            "NAME-00001-of-0000N.gguf pattern, so the other parts cannot be "
            "found; rename the parts to that pattern"
        )
    model_id = f"{repo_id}:{repo_path or first.name}" if repo_id else f"file:{first.resolve()}"
    return LibraryModel(
        id=model_id,
        path=str(first),
        parts=tuple(str(p) for p in paths),
        size=sum(p.stat().st_size for p in paths),
        quantization=facts.quantization,
        architecture=facts.architecture,
        context_length=facts.context_length,
        n_params=facts.n_params,
        name=facts.name,
        source=source,
        repo_id=repo_id,
        sha256=sha256,
        added=time.time(),
        repo_path=repo_path,
        drafting=facts.drafting.name,
    )


def split_parts(first: Path) -> list[Path]:
    return [first.with_name(name) for name in part_names(first.name)]


def _list_of(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"{key!r} is not a list")
    return value


def _checked(cls: type, raw: object, what: str) -> dict[str, Any]:
    """The fields of ``raw`` for ``cls``, each of the type the dataclass declares."""
    if not isinstance(raw, dict):
        raise ValueError(f"a {what} entry is not an object")
    hints = get_type_hints(cls)
    names = {f.name for f in fields(cls)}
    unknown = sorted(str(k) for k in raw if k not in names)
    if unknown:
        raise ValueError(f"a {what} entry has unknown field(s) {', '.join(unknown[:5])}")
    for name, value in raw.items():
        if not _json_value_fits(value, hints[name]):
            label = raw.get("id") or raw.get("name")
            raise ValueError(
                f"{what} {str(label)[:60]!r}: {name} is {str(value)[:40]!r}, not {hints[name]}"
            )
    return dict(raw)


def _json_value_fits(value: object, hint: object) -> bool:
    origin, args = get_origin(hint), get_args(hint)
    if args and origin in (UnionType, Union):
        return any(_json_value_fits(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:  # a NUL makes pathlib raise wherever the text is used as a path
        return isinstance(value, str) and "\x00" not in value
    if origin is Literal:
        return value in args
    if origin is tuple:  # tuple[str, ...], stored as a JSON list
        return isinstance(value, list) and all(_json_value_fits(v, args[0]) for v in value)
    if origin is dict:  # dict[str, float]
        return isinstance(value, dict) and all(
            isinstance(k, str) and _json_value_fits(v, args[1]) for k, v in value.items()
        )
    return False


def _model_from_json(raw: object) -> LibraryModel:
    checked = _checked(LibraryModel, raw, "model")
    checked["parts"] = tuple(checked["parts"])
    return LibraryModel(**checked)


def _profile_from_json(raw: object) -> Profile:
    return Profile(**_checked(Profile, raw, "pair"))


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path``, with every link followed, lies inside ``folder``."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


class Library:
    def __init__(self, root: Path | None = None, *, models_root: Path | None = None) -> None:
        self.root = root or data_dir()
        # Only files in here are SpecDeck's own downloads, which delete_model may remove.
        self.models_root = models_root or self.root / "models"
        self.file = self.root / LIBRARY_FILE
        self.models: dict[str, LibraryModel] = {}
        self.profiles: dict[str, Profile] = {}
        self.v1_active: str | None = None  # a record for the settings' upgrade, nothing more
        self._load()

    def _load(self) -> None:
        """Read ``library.json``; a damaged one raises ``LibraryError`` and stays untouched."""
        clean_stale_temps(self.root)
        try:
            data = read_json_object(self.file, LIBRARY_LIMIT, what="model library")
        except FileNotFoundError:
            return
        except (StoredFileError, OSError) as exc:
            raise self._damaged(exc) from exc
        try:
            upgraded = upgrade(data, LIBRARY_SCHEMA)
        except MigrationError as exc:
            raise self._damaged(exc) from exc
        if upgraded.newer:
            raise LibraryError(
                f"the model library {self.file} was written by a newer SpecDeck (format "
                f"{upgraded.found}; this one reads format {LIBRARY_SCHEMA.current}); "
                "use that version, or move the file away to start with an empty library"
            )
        try:
            models = [_model_from_json(raw) for raw in _list_of(upgraded.data, "models")]
            profiles = [_profile_from_json(raw) for raw in _list_of(upgraded.data, "profiles")]
            v1_active = upgraded.data.get(V1_ACTIVE_KEY)
            if v1_active is not None and not isinstance(v1_active, str):
                raise ValueError("'active' is not a pair name")
        except (ValueError, TypeError, KeyError) as exc:
            raise self._damaged(exc) from exc
        self.models = {model.id: model for model in models}
        self.profiles = {profile.name: profile for profile in profiles}
        self.v1_active = v1_active

    def _damaged(self, exc: Exception) -> LibraryError:
        reason = exc if isinstance(exc, StoredFileError) else f"{type(exc).__name__}: {exc}"
        return LibraryError(
            f"the model library {self.file} is damaged ({reason}); "
            "move it away to start with an empty library"
        )

    def save(self) -> None:
        data: dict[str, Any] = {
            LIBRARY_SCHEMA.key: LIBRARY_SCHEMA.current,
            "models": [asdict(m) for m in self.models.values()],
            "profiles": [asdict(p) for p in self.profiles.values()],
        }
        if self.v1_active is not None:
            data[V1_ACTIVE_KEY] = self.v1_active
        atomic_write_text(self.file, json_text(data, indent=2))

    # --- models -------------------------------------------------------------------------

    def add_downloaded(
        self,
        repo_id: str,
        paths: Sequence[Path],
        sha256: str | None = None,
        *,
        models_root: Path | None = None,
    ) -> LibraryModel:
        """Register files the downloader put under ``models_root/<owner>--<name>/``.

        Anything elsewhere is refused: only files SpecDeck fetched itself may be marked as
        downloads, because deleting a model deletes its downloaded files.
        """
        paths = [Path(p) for p in paths]
        if not paths:
            raise LibraryError(f"{repo_id}: no files to add")
        reason = unsafe_repo_id_reason(repo_id)
        if reason is not None:
            raise LibraryError(f"{repo_id!r} {reason}")
        folder = (models_root or self.models_root) / repo_id.replace("/", "--")
        outside = [str(p) for p in paths if not _inside(p, folder) or p.is_symlink()]
        if outside:
            raise LibraryError(
                f"{', '.join(outside)} is not a file SpecDeck downloaded into "
                f"{folder}; use import to add a file of your own"
            )
        repo_path = paths[0].resolve().relative_to(folder.resolve()).as_posix()
        model = describe_gguf(
            paths, source="hub", repo_id=repo_id, sha256=sha256, repo_path=repo_path
        )
        self.models[model.id] = model
        self.save()
        return model

    def import_gguf(self, path: Path) -> LibraryModel:
        """Add a GGUF already on disk (left where it is); all split parts must be present."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise LibraryError(f"{path}: no such file")
        if path.suffix.lower() != ".gguf":
            raise LibraryError(f"{path.name}: not a .gguf file")
        parts = split_parts(path)
        missing = [p.name for p in parts if not p.is_file()]
        if missing:
            raise LibraryError(f"{path.name} is a split model; missing {', '.join(missing)}")
        model = describe_gguf(parts, source="import")
        self.models[model.id] = model
        self.save()
        return model

    def find_by_path(self, path: str | Path) -> LibraryModel | None:
        resolved = Path(path).resolve()
        return next((m for m in self.models.values() if Path(m.path).resolve() == resolved), None)

    def pairs_using(self, model_id: str) -> list[str]:
        return [p.name for p in self.profiles.values() if model_id in (p.target, p.draft)]

    def delete_model(self, model_id: str, *, force: bool = False) -> list[Path]:
        """Forget a model; downloaded files are deleted, imported files stay on disk.

        A model used by profiles is only removed with ``force``, which removes the profiles.
        Only files that resolve inside the models folder are ever deleted, whatever the
        library file says; the deleted files are returned.
        """
        model = self.models.get(model_id)
        if model is None:
            raise LibraryError(f"{model_id} is not in the library")
        users = self.pairs_using(model_id)
        if users and not force:
            raise ModelInUseError(
                f"{model.label} is used by the pair(s) {', '.join(users)}; "
                "delete those pairs too or keep the model"
            )
        for name in users:
            self.delete_profile(name, save=False)
        deleted = []
        if model.source == "hub":
            for part in map(Path, model.parts):
                if part.is_file() and not part.is_symlink() and _inside(part, self.models_root):
                    part.unlink(missing_ok=True)
                    deleted.append(part)
        del self.models[model_id]
        self.save()
        return deleted

    # --- profiles -----------------------------------------------------------------------

    def save_profile(self, profile: Profile) -> Profile:
        if profile.source is DraftSource.MODEL and profile.draft is None:
            raise LibraryError(f"pair {profile.name!r} drafts with a model but names none")
        if profile.source is not DraftSource.MODEL and profile.draft is not None:
            raise LibraryError(
                f"pair {profile.name!r} drafts with {profile.source.value}: it takes no draft model"
            )
        for model_id in (profile.target, profile.draft):
            if model_id is not None and model_id not in self.models:
                raise LibraryError(
                    f"profile {profile.name!r} names {model_id}, which is not in the library"
                )
        if not profile.name.strip():
            raise LibraryError("a pair needs a name")
        profile = replace(profile, draft_source=profile.source.value)  # stored by name
        self.profiles[profile.name] = profile
        self.save()
        return profile

    def delete_profile(self, name: str, *, save: bool = True) -> None:
        self.profiles.pop(name, None)
        if save:
            self.save()

    def rename_profile(self, old: str, new: str) -> Profile:
        """Rename a saved pair (the settings follow when it is the current one)."""
        if old not in self.profiles:
            raise LibraryError(f"there is no pair named {old!r}")
        if not new.strip():
            raise LibraryError("a pair needs a name")
        if new != old and new in self.profiles:
            raise LibraryError(f"there is already a pair named {new!r}; choose another name")
        renamed = replace(self.profiles[old], name=new)
        self.profiles = {
            (new if k == old else k): (renamed if k == old else v) for k, v in self.profiles.items()
        }
        self.save()
        return renamed

    def current_profile(self, name: str, target_path: str | None) -> Profile | None:
        """The saved pair ``name`` when it describes the current pair, whose target is
        ``target_path``: None when there is no such pair or its target is another file."""
        profile = self.profiles.get(name) if name else None
        model = self.models.get(profile.target) if profile is not None else None
        if model is None or not target_path or not same_file(model.path, target_path):
            return None
        return profile

    def unique_profile_name(self, base: str) -> str:
        name, n = base, 2
        while name in self.profiles:
            name, n = f"{base} ({n})", n + 1
        return name

    def model_specs(self, profile: Profile) -> tuple[ModelSpec, ModelSpec | None]:
        """Engine specs for a profile; raises when a file has gone missing."""
        specs: list[ModelSpec | None] = []
        for model_id in (profile.target, profile.draft):
            if model_id is None:
                specs.append(None)
                continue
            model = self.models.get(model_id)
            if model is None or not model.available:
                raise LibraryError(
                    f"pair {profile.name!r}: {model_id} is missing from disk; "
                    "download or import it again"
                )
            specs.append(ModelSpec(path=model.path, n_ctx=profile.n_ctx, kv_type=profile.kv_type))
        target, draft = specs
        if target is None:
            raise LibraryError(f"pair {profile.name!r} has no target model")
        return target, draft
