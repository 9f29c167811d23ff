"""User settings: one typed dataclass, validated field by field, saved as JSON.

The file lives under platformdirs' ``user_config_dir("specdeck")``; the environment variable
``SPECDECK_CONFIG_DIR`` overrides the directory (tests, portable installs). Every field can
be parsed from the text a person typed, and a refused value comes back with the reason, so
the settings panel can say why instead of silently clamping. No Qt here.

The settings own the current pair: its files, its draft source and the name of the saved
pair it came from (``app.store.current_pair`` says why here and not in the library).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, PlainValidator, ValidationError, create_model

from app.engine.config import (
    DEFAULT_SEED,
    MAX_DRAFT_LEN,
    AcceptRule,
    DraftSource,
    GenerationRequest,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
    default_threads,
)
from app.engine.llama.repacking import CHOICES as REPACK_CHOICES
from app.files.fileio import (
    StoredFileError,
    atomic_write_text,
    clean_stale_temps,
    error_text,
    json_text,
    move_aside,
    read_json_object,
)
from app.files.paths import config_dir, data_dir
from app.files.values import kind, quoted
from app.store.current_pair import LIBRARY_FILE, MAX_PAIR_NAME, adopt_v1_active_pair
from app.store.migrations import Document, MigrationError, Schema, upgrade

SETTINGS_FILE = "settings.json"
MAX_SEED = 2**32 - 1  # llama.cpp's sampler seeds are 32-bit
COLOUR_STYLES = ("colour", "underline", "background", "off")
# the settings the models are loaded with: changing one reloads the pair
LOAD_FIELDS = ("target_gpu_layers", "draft_gpu_layers", "n_ctx", "n_threads", "weight_repacking")


@dataclass(frozen=True)
class Settings:
    # conversation
    system_prompt: str = "You are a helpful assistant."
    # sampler
    temperature: float = SamplerConfig.temperature
    top_k: int = SamplerConfig.top_k
    top_p: float = SamplerConfig.top_p
    min_p: float = SamplerConfig.min_p
    seed: int | None = DEFAULT_SEED
    max_tokens: int = 256
    ignore_eos: bool = False  # keep generating past end-of-generation tokens (benchmarks)
    # speculation
    draft_adaptive: bool = True
    draft_max: int = SpecConfig.draft_max
    p_min: float = 0.0
    rule: str = AcceptRule.REJECTION.value
    # models
    target_path: str = ""
    draft_path: str = ""
    draft_source: str = DraftSource.MODEL.value
    pair_name: str = ""  # the saved pair the files came from; "" for files chosen directly
    target_gpu_layers: int = -1
    draft_gpu_layers: int = -1
    n_ctx: int = 4096
    n_threads: int = 0  # 0: the cores other programs leave free, measured at each load
    weight_repacking: str = "auto"  # CPU weight repacking: auto (probed once), on, off
    # view
    baseline: bool = True
    colour_style: str = "colour"
    # serving
    serve_port: int = 8080  # "Serve on localhost" (app.serve.defaults.DEFAULT_PORT, as the CLI)
    # the last "Remote server…" chosen, offered again the next time the dialog opens
    remote_url: str = ""
    remote_server: str = "llama-server"
    remote_baseline_url: str = ""

    # --- conversions -----------------------------------------------------------------

    def sampler(self) -> SamplerConfig:
        # the sampler's settings bear SamplerConfig's own names; the rest keep its defaults
        named = [f.name for f in fields(SamplerConfig) if hasattr(self, f.name)]
        return SamplerConfig(**{name: getattr(self, name) for name in named})

    def spec(self) -> SpecConfig:
        return SpecConfig(
            draft_max=self.draft_max,
            adaptive=self.draft_adaptive,
            p_min=self.p_min,
            rule=AcceptRule(self.rule),
        )

    def request(self, prompt: tuple[int, ...], *, speculative: bool) -> GenerationRequest:
        return GenerationRequest(
            prompt_tokens=prompt,
            max_tokens=self.max_tokens,
            sampler=self.sampler(),
            spec=self.spec(),
            speculative=speculative,
            ignore_eos=self.ignore_eos,
        )

    def target_spec(self, path: str | None = None) -> ModelSpec:
        return self._model_spec(path or self.target_path, self.target_gpu_layers)

    def draft_spec(self, path: str | None = None) -> ModelSpec:
        return self._model_spec(path or self.draft_path, self.draft_gpu_layers)

    def _model_spec(self, path: str, gpu_layers: int) -> ModelSpec:
        """One model of the pair: its own GPU layers, the load settings both share."""
        return ModelSpec(
            path=path,
            n_gpu_layers=gpu_layers,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            repack=self.weight_repacking,
        )

    def load_key(self) -> tuple[object, ...]:
        """Fields that need the models reloaded when they change (``LOAD_FIELDS``)."""
        return tuple(getattr(self, name) for name in LOAD_FIELDS)


# --- parsing and validation ---------------------------------------------------------------

Parser = Callable[[str], Any]
Check = Callable[[Any], None]


class Invalid(ValueError):
    """A refused value; the message is the reason, worded for the person typing it."""


class WrongType(Invalid):
    """A value of the wrong type in the settings file (true for a number, "7" for 7)."""

    def __init__(self, expected: str) -> None:
        super().__init__(f"is not {expected}")
        self.expected = expected


_KIND_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}


@dataclass(frozen=True)
class Rule:
    """What one setting accepts: its type, from the settings file (a JSON value) or as a
    person typed it (text), then its range (``check``, which raises ``Invalid``)."""

    takes: type
    check: Check = lambda value: None
    optional: bool = False  # None is a value too: empty text, null (the seed: a new one)

    @property
    def expected(self) -> str:
        return _KIND_WORDS[self.takes] + (" or null" if self.optional else "")

    def from_json(self, value: object) -> Any:
        """A value from the file: true is not a number and "7" is not 7; a whole number
        is a number."""
        if value is None and self.optional:
            return None
        if isinstance(value, bool) != (self.takes is bool):
            raise WrongType(self.expected)
        if self.takes is float and isinstance(value, int):
            value = float(value) if abs(value) < 1e308 else math.inf
        if not isinstance(value, self.takes):
            raise WrongType(self.expected)
        self.check(value)
        return value

    def from_text(self, text: str) -> Any:
        """What a person typed into the field."""
        if self.optional and not text.strip():
            return None
        value: Any = text
        if self.takes is bool:
            value = _bool(text)
        elif self.takes in (int, float):
            try:
                value = self.takes(text.strip())
            except ValueError:
                raise Invalid(f"'{text}' is not {_KIND_WORDS[self.takes]}") from None
        self.check(value)
        return value


def _float_in(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Rule:
    def check(value: float) -> None:
        if not math.isfinite(value):
            raise Invalid("must be a finite number")
        too_low = value <= low if low_open else value < low
        too_high = value >= high if high_open else value > high
        if too_low or too_high:
            left = "(" if low_open else "["
            right = ")" if high_open else "]"
            raise Invalid(f"must be in {left}{low:g}, {high:g}{right}")

    return Rule(float, check)


def _int_in(low: int, high: int, note: str = "", *, optional: bool = False) -> Rule:
    def check(value: int) -> None:
        if not low <= value <= high:
            raise Invalid(f"must be between {low} and {high}{note}")

    return Rule(int, check, optional)


def _choice(options: tuple[str, ...]) -> Rule:
    def check(value: str) -> None:
        if value not in options:
            raise Invalid(f"must be one of {', '.join(options)}")

    return Rule(str, check)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise Invalid(f"'{text}' is not true or false")


def _prompt(text: str) -> None:
    if len(text) > 20_000:
        raise Invalid("the system prompt is longer than 20,000 characters")


def _model_path(text: str) -> None:
    if "\x00" in text:  # pathlib refuses it with a ValueError wherever the path is used
        raise Invalid("a file path must not contain a NUL character")
    if len(text) > 4096:
        raise Invalid("a file path must be at most 4096 characters long")


def _address(text: str) -> None:
    """A server address as typed: checked for what it is when it is used (the dialog says
    what is wrong with it); here only for what no address holds."""
    if len(text) > 2048:
        raise Invalid("an address must be at most 2048 characters long")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise Invalid("an address must not contain control characters")


def _pair_name(text: str) -> None:
    if "\x00" in text:
        raise Invalid("a pair name must not contain a NUL character")
    if len(text) > MAX_PAIR_NAME:
        raise Invalid(f"a pair name must be at most {MAX_PAIR_NAME} characters long")


@dataclass(frozen=True)
class FieldInfo:
    """Everything said about one setting, in one place: what it accepts (from the file and
    as typed), and the label and hint the settings panel shows."""

    rule: Rule
    label: str = ""
    hint: str = ""

    @property
    def parse(self) -> Parser:
        return self.rule.from_text


_LAYERS = " (-1 offloads every layer that fits)"
FIELDS: dict[str, FieldInfo] = {
    "system_prompt": FieldInfo(Rule(str, _prompt), "System prompt"),
    "temperature": FieldInfo(
        _float_in(0.0, 5.0),
        "Temperature",
        "0 = greedy (exact match with the baseline is expected)",
    ),
    "top_k": FieldInfo(_int_in(0, 100_000, " (0 turns top-k off)"), "Top-k", "0 turns top-k off"),
    "top_p": FieldInfo(
        _float_in(0.0, 1.0, low_open=True), "Top-p", "nucleus sampling mass, (0, 1]"
    ),
    "min_p": FieldInfo(
        _float_in(0.0, 1.0, high_open=True),
        "Min-p",
        "drop tokens below this fraction of the top probability",
    ),
    "seed": FieldInfo(
        _int_in(0, MAX_SEED, " (leave empty for a random seed)", optional=True),
        "Seed",
        "empty = a new random seed every answer",
    ),
    "max_tokens": FieldInfo(_int_in(1, 131_072), "Max tokens", "longest answer, in tokens"),
    "ignore_eos": FieldInfo(Rule(bool), "Ignore end of generation"),
    "draft_adaptive": FieldInfo(Rule(bool), "Draft length mode"),
    "draft_max": FieldInfo(
        _int_in(1, MAX_DRAFT_LEN),
        "Draft length",
        "fixed draft length, or the ceiling when adaptive",
    ),
    "p_min": FieldInfo(
        _float_in(0.0, 1.0, high_open=True),
        "Confidence cut-off",
        "stop drafting when the draft's confidence falls below this",
    ),
    "rule": FieldInfo(_choice(tuple(r.value for r in AcceptRule)), "Acceptance rule"),
    "target_path": FieldInfo(Rule(str, _model_path), "Target model"),
    "draft_path": FieldInfo(Rule(str, _model_path), "Draft model"),
    "draft_source": FieldInfo(_choice(tuple(s.value for s in DraftSource)), "Draft source"),
    "pair_name": FieldInfo(Rule(str, _pair_name), "Saved pair"),
    "target_gpu_layers": FieldInfo(
        _int_in(-1, 999, _LAYERS), "Target GPU layers", "-1 = every layer that fits; 0 = CPU only"
    ),
    "draft_gpu_layers": FieldInfo(
        _int_in(-1, 999, _LAYERS), "Draft GPU layers", "-1 = every layer that fits; 0 = CPU only"
    ),
    "n_ctx": FieldInfo(
        _int_in(256, 1_048_576), "Context size", "tokens of conversation both models can hold"
    ),
    "n_threads": FieldInfo(
        _int_in(0, 512, " (0 fits them to the free cores)"),
        "CPU threads",
        "0 = the cores other programs leave free, measured at each load; fewer threads "
        "help with tiny models",
    ),
    "weight_repacking": FieldInfo(
        _choice(REPACK_CHOICES),
        "Weight repacking",
        "auto, on or off. auto: on unless a one-time check finds that it crashes this CPU's "
        "llama.cpp (Intel AMX); the SPECDECK_REPACK environment variable overrides it",
    ),
    "baseline": FieldInfo(Rule(bool), "Baseline side-by-side"),
    "colour_style": FieldInfo(_choice(COLOUR_STYLES), "Token colours"),
    "serve_port": FieldInfo(
        _int_in(1, 65535), "Serve port", "the port Serve on localhost listens on, on 127.0.0.1"
    ),
    "remote_url": FieldInfo(Rule(str, _address), "Remote server address"),
    "remote_server": FieldInfo(Rule(str, _address), "Remote server kind"),
    "remote_baseline_url": FieldInfo(Rule(str, _address), "Remote baseline address"),
}
PARSERS: dict[str, Parser] = {name: info.parse for name, info in FIELDS.items()}


def parse_field(name: str, text: str) -> Any:
    """Parse what a person typed into field ``name``; raises ``Invalid`` with the reason."""
    return PARSERS[name](text)


def check_value(name: str, value: object) -> Any:
    """``value`` as setting ``name`` takes it from a file; raises ``Invalid`` with the
    reason (the Lab holds its values to the chat's ranges with it)."""
    return FIELDS[name].rule.from_json(value)


def cross_check(settings: Settings) -> dict[str, str]:
    """Reasons for combinations that are individually valid but not together."""
    problems: dict[str, str] = {}
    if settings.max_tokens >= settings.n_ctx:
        problems["max_tokens"] = (
            f"must be smaller than the context size ({settings.n_ctx} tokens), "
            "which also has to hold the prompt"
        )
    return problems


def with_field(settings: Settings, name: str, text: str) -> Settings:
    """``settings`` with one field set from text; raises ``Invalid`` when refused. The rule
    between Max tokens and the context size holds whichever of the two is typed."""
    updated = replace(settings, **{name: parse_field(name, text)})
    problems = cross_check(updated)
    problem = problems.get(name)
    if problem:
        raise Invalid(problem)
    if name == "n_ctx" and "max_tokens" in problems:
        raise Invalid(
            f"must be larger than Max tokens ({updated.max_tokens}), since the context holds "
            "the prompt and the answer; lower Max tokens first"
        )
    return updated


def advice(settings: Settings) -> dict[str, str]:
    """Accepted values that will probably hurt, by field, in words (warnings, not refusals)."""
    notes: dict[str, str] = {}
    cores = default_threads()
    if settings.n_threads > cores:
        notes["n_threads"] = (
            f"more threads than this computer's {cores} cores: they wait for each other and "
            "answers get slower; 0 fits them to the free cores"
        )
    return notes


def _as_text(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- persistence --------------------------------------------------------------------------

SETTINGS_LIMIT = 1 << 20  # bytes; real files are about 1 KB plus the system prompt


def _name_the_current_pair(document: Document) -> Document:
    """Version 1 -> 2: "pair_name" joins the files (version 1 kept it in the library)."""
    return adopt_v1_active_pair(document, data_dir() / LIBRARY_FILE)


# Format versions of settings.json: a file without "version" is version 1. A change of format
# bumps SETTINGS_SCHEMA.current and appends the step from the previous version.
SETTINGS_SCHEMA = Schema("settings", current=2, steps=(_name_the_current_pair,))
# The schema of settings.json: one field per setting, checked by its rule in ``FIELDS``;
# keys it does not declare are ignored (``SettingsStore.read`` names them).
_FILE_FIELDS: dict[str, Any] = {
    name: (Annotated[Any, PlainValidator(info.rule.from_json)], None)
    for name, info in FIELDS.items()
}
SettingsFile = create_model("SettingsFile", __config__=ConfigDict(extra="ignore"), **_FILE_FIELDS)


def settings_from_json(raw: dict[str, Any], source: str) -> tuple[Settings, list[str]]:
    """Settings from a decoded file, checked by ``SettingsFile``; a refused value falls
    back to its default, with a note naming the field."""
    defaults = Settings()
    given = {name: raw[name] for name in FIELDS if name in raw}
    refused: dict[str, Invalid | None] = {}
    try:
        checked = SettingsFile.model_validate(given)
    except ValidationError as exc:
        for error in exc.errors():
            refused.setdefault(str(error["loc"][0]), error.get("ctx", {}).get("error"))
        checked = SettingsFile.model_validate({k: v for k, v in given.items() if k not in refused})
    notes: list[str] = []
    for name, why in refused.items():
        value, default = given[name], _as_text(getattr(defaults, name)) or "empty"
        if isinstance(why, WrongType):
            said = f" ({kind(value)}, expected {why.expected})"
        else:
            said = f": {why}"
        notes.append(
            f'{source}: setting "{name}" is {quoted(value)}{said}; using the default {default}'
        )
    candidate = replace(defaults, **checked.model_dump(exclude_unset=True))
    for name, problem in cross_check(candidate).items():
        notes.append(f'{source}: setting "{name}" {problem}; using the default')
        candidate = replace(candidate, **{name: getattr(defaults, name)})
    if cross_check(candidate):  # a small context that even the default answer length exceeds
        notes.append(f'{source}: setting "n_ctx" is too small for any answer; using the default')
        candidate = replace(candidate, max_tokens=defaults.max_tokens, n_ctx=defaults.n_ctx)
    return candidate, notes


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    notes: tuple[str, ...]  # what was refused or repaired, one sentence each


class SettingsStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or config_dir()
        self.path = self.directory / SETTINGS_FILE
        self.notes: tuple[str, ...] = ()  # from the latest ``load``

    def load(self) -> Settings:
        """Saved settings; what was refused or repaired is left in ``self.notes``."""
        loaded = self.read()
        self.notes = loaded.notes
        return loaded.settings

    def read(self) -> LoadedSettings:
        """Saved settings, never raising: unknown keys are dropped, refused values fall back
        to their defaults and an unusable file is moved aside, each with a note."""
        clean_stale_temps(self.directory)
        try:
            raw = read_json_object(self.path, SETTINGS_LIMIT, what="settings file")
        except FileNotFoundError:
            return LoadedSettings(Settings(), ())
        except StoredFileError as exc:
            return LoadedSettings(Settings(), (self._set_aside(str(exc), exc.damaged),))
        except OSError as exc:
            note = f"cannot read the settings file {self.path}: {error_text(exc)}"
            return LoadedSettings(Settings(), (note + "; using the defaults",))
        try:
            upgraded = upgrade(raw, SETTINGS_SCHEMA)
        except MigrationError as exc:
            return LoadedSettings(Settings(), (self._set_aside(f"{self.path}: {exc}", True),))
        notes: list[str] = []
        if upgraded.newer:
            notes.append(self._keep_newer(raw, upgraded.found))
        settings, refused = settings_from_json(upgraded.data, self.path.name)
        notes += refused
        known = {f.name for f in fields(Settings)} | {SETTINGS_SCHEMA.key}
        unknown = sorted(str(k) for k in upgraded.data if k not in known)
        if unknown and not upgraded.newer:
            shown = ", ".join(quoted(k, 30) for k in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            notes.append(f"{self.path.name}: ignored unknown setting(s) {shown}{more}")
        return LoadedSettings(settings, tuple(notes))

    def _set_aside(self, reason: str, damaged: bool) -> str:
        if not damaged:
            return f"{reason}; using the defaults"
        moved = move_aside(self.path, "damaged")
        where = f"it was moved to {moved.name}" if moved else "it could not be moved aside"
        return f"{reason}; {where} and the defaults are used"

    def _keep_newer(self, raw: dict[str, Any], found: int) -> str:
        copy_path = self.path.with_name(f"{self.path.name}.v{found}")
        try:
            atomic_write_text(copy_path, json_text(raw, indent=2, sort_keys=True))
            kept = f"a copy is kept as {copy_path.name}"
        except OSError as exc:
            kept = f"no copy could be kept ({error_text(exc)})"
        return (
            f"{self.path.name} was written by a newer SpecDeck (format {found}; this one "
            f"reads format {SETTINGS_SCHEMA.current}): only the settings this version "
            f"knows are used; {kept}"
        )

    def save(self, settings: Settings) -> None:
        """Raises ``OSError`` when the folder is read-only or full; the caller says so."""
        document = {SETTINGS_SCHEMA.key: SETTINGS_SCHEMA.current, **asdict(settings)}
        atomic_write_text(self.path, json_text(document, indent=2, sort_keys=True))
