"""User settings: one typed dataclass, validated field by field, saved as JSON.

The file lives under platformdirs' ``user_config_dir("specdeck")``; the environment variable
``SPECDECK_CONFIG_DIR`` overrides the directory (tests, portable installs). Every field can
be parsed from the text a person typed, and a refused value comes back with the reason, so
the settings panel can say why instead of silently clamping. No Qt here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from app.core.config import (
    AcceptRule,
    DraftSource,
    GenerationRequest,
    ModelSpec,
    SamplerConfig,
    SpecConfig,
)
from app.core.fileio import atomic_write_text
from app.core.paths import config_dir
from app.core.repacking import CHOICES as REPACK_CHOICES

SETTINGS_FILE = "settings.json"
COLOUR_STYLES = ("colour", "underline", "background", "off")


@dataclass(frozen=True)
class Settings:
    # conversation
    system_prompt: str = "You are a helpful assistant."
    # sampler
    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = 42
    max_tokens: int = 256
    ignore_eos: bool = False  # keep generating past end-of-generation tokens (benchmarks)
    # speculation
    draft_adaptive: bool = True
    draft_max: int = 16
    p_min: float = 0.0
    rule: str = AcceptRule.REJECTION.value
    # models
    target_path: str = ""
    draft_path: str = ""
    draft_source: str = DraftSource.MODEL.value
    target_gpu_layers: int = -1
    draft_gpu_layers: int = -1
    n_ctx: int = 4096
    n_threads: int = 0  # 0: every core
    weight_repacking: str = "auto"  # CPU weight repacking: auto (probed once), on, off
    # view
    baseline: bool = True
    colour_style: str = "colour"

    # --- conversions -----------------------------------------------------------------

    def sampler(self) -> SamplerConfig:
        return SamplerConfig(
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
            seed=self.seed,
        )

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
        return ModelSpec(
            path=path or self.target_path,
            n_gpu_layers=self.target_gpu_layers,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            repack=self.weight_repacking,
        )

    def draft_spec(self, path: str | None = None) -> ModelSpec:
        return ModelSpec(
            path=path or self.draft_path,
            n_gpu_layers=self.draft_gpu_layers,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            repack=self.weight_repacking,
        )

    def load_key(self) -> tuple[object, ...]:
        """Fields that need the models reloaded when they change."""
        return (
            self.target_gpu_layers,
            self.draft_gpu_layers,
            self.n_ctx,
            self.n_threads,
            self.weight_repacking,
        )


# --- parsing and validation ---------------------------------------------------------------

Parser = Callable[[str], Any]


class Invalid(ValueError):
    """A refused value; the message is the reason, worded for the person typing it."""


def _float_in(low: float, high: float, *, low_open: bool = False, high_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise Invalid(f"'{text}' is not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise Invalid("must be a finite number")
        too_low = value <= low if low_open else value < low
        too_high = value >= high if high_open else value > high
        if too_low or too_high:
            left = "(" if low_open else "["
            right = ")" if high_open else "]"
            raise Invalid(f"must be in {left}{low:g}, {high:g}{right}")
        return value

    return parse


def _int_in(low: int, high: int, note: str = ""):
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise Invalid(f"'{text}' is not a whole number") from None
        if not low <= value <= high:
            raise Invalid(f"must be between {low} and {high}{note}")
        return value

    return parse


def _seed(text: str) -> int | None:
    if not text.strip():
        return None
    return _int_in(0, 2**32 - 1, " (leave empty for a random seed)")(text)


def _choice(options: tuple[str, ...]):
    def parse(text: str) -> str:
        if text not in options:
            raise Invalid(f"must be one of {', '.join(options)}")
        return text

    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise Invalid(f"'{text}' is not true or false")


def _prompt(text: str) -> str:
    if len(text) > 20_000:
        raise Invalid("the system prompt is longer than 20,000 characters")
    return text


PARSERS: dict[str, Parser] = {
    "system_prompt": _prompt,
    "temperature": _float_in(0.0, 5.0),
    "top_k": _int_in(0, 100_000, " (0 turns top-k off)"),
    "top_p": _float_in(0.0, 1.0, low_open=True),
    "min_p": _float_in(0.0, 1.0, high_open=True),
    "seed": _seed,
    "max_tokens": _int_in(1, 131_072),
    "ignore_eos": _bool,
    "draft_adaptive": _bool,
    "draft_max": _int_in(1, 64),
    "p_min": _float_in(0.0, 1.0, high_open=True),
    "rule": _choice(tuple(r.value for r in AcceptRule)),
    "target_path": str,
    "draft_path": str,
    "draft_source": _choice(tuple(s.value for s in DraftSource)),
    "target_gpu_layers": _int_in(-1, 999, " (-1 offloads every layer that fits)"),
    "draft_gpu_layers": _int_in(-1, 999, " (-1 offloads every layer that fits)"),
    "n_ctx": _int_in(256, 1_048_576),
    "n_threads": _int_in(0, 512, " (0 uses every core)"),
    "weight_repacking": _choice(REPACK_CHOICES),
    "baseline": _bool,
    "colour_style": _choice(COLOUR_STYLES),
}


def parse_field(name: str, text: str) -> Any:
    """Parse what a person typed into field ``name``; raises ``Invalid`` with the reason."""
    return PARSERS[name](text)


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
    """``settings`` with one field set from text; raises ``Invalid`` when refused."""
    updated = replace(settings, **{name: parse_field(name, text)})
    problem = cross_check(updated).get(name)
    if problem:
        raise Invalid(problem)
    return updated


def _as_text(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def validate(settings: Settings) -> dict[str, str]:
    """Every refused field of ``settings`` with its reason (empty when all are fine)."""
    problems: dict[str, str] = {}
    for f in fields(Settings):
        value = getattr(settings, f.name)
        text = _as_text(value)
        try:
            parse_field(f.name, text)
        except Invalid as refused:
            problems[f.name] = str(refused)
    for name, why in cross_check(settings).items():
        problems.setdefault(name, why)
    return problems


# --- persistence --------------------------------------------------------------------------


class SettingsStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or config_dir()
        self.path = self.directory / SETTINGS_FILE

    def load(self) -> Settings:
        """Saved settings; unknown keys are dropped and refused values fall back to defaults."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return Settings()
        if not isinstance(raw, dict):
            return Settings()
        defaults = Settings()
        known = {f.name for f in fields(Settings)}
        candidate = replace(defaults, **{k: v for k, v in raw.items() if k in known})
        bad = validate(candidate)
        if bad:
            candidate = replace(candidate, **{k: getattr(defaults, k) for k in bad})
        return candidate

    def save(self, settings: Settings) -> None:
        atomic_write_text(self.path, json.dumps(asdict(settings), indent=2, sort_keys=True))
