"""Lab configurations: what drafts, how long, which acceptance rule, at what temperature.

Each maps onto the engine's own ``SpecConfig``/``SamplerConfig``/``DraftSource``; the lab adds
no knobs of its own. On the command line one configuration is written ``NAME:key=value,...``,
for example ``adaptive:draft=small.gguf``, ``ngram8:ngram,n=8,rule=match`` or ``heads:mtp,n=3``
(the target drafts for itself with its next-token layers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import PurePath
from typing import Annotated, Any

from pydantic import Field

from app.engine.config import MAX_DRAFT_LEN, AcceptRule, DraftSource, SamplerConfig, SpecConfig
from app.files.values import (
    BadValue,
    GivenFinite,
    GivenFlag,
    GivenWide,
    InputSchema,
    member_of,
    text_of,
    validated,
)
from app.store.settings import Invalid, Settings, check_value

NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+")


class ConfigError(ValueError):
    """A configuration that cannot run; the message says which part and why."""


def check_setting(name: str, value: object, what: str) -> None:
    """``value`` checked by the chat setting ``name``'s own rule, so the lab and the chat
    accept the same range (one place for each)."""
    try:
        check_value(name, value)
    except Invalid as refused:
        raise ConfigError(f"{what} {value!r} {refused}") from None


@dataclass(frozen=True)
class LabConfig:
    name: str
    source: DraftSource = DraftSource.MODEL
    draft: str | None = None  # draft GGUF path when the source is a model
    draft_max: int = SpecConfig.draft_max  # fixed length, or the ceiling when adaptive
    adaptive: bool = True
    rule: AcceptRule = AcceptRule.REJECTION
    temperature: float = SamplerConfig.temperature
    p_min: float = 0.0
    ngram_n: int = 3
    collapse_guard: bool = True
    ngram_first: bool = True  # with a model draft: free prompt-lookup drafts go first
    server: str | None = None  # an OpenAI-compatible server that speculates by itself
    server_kind: str = "llama-server"  # "llama-server" (timings) | "vllm" (/metrics counters)
    baseline_server: str | None = None  # the same model served without speculation

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > 40 or not set(self.name) <= NAME_CHARS:
            raise ConfigError(
                f"configuration name {self.name!r}: use 1-40 letters, digits or - _ . +"
            )
        if self.server is not None:
            from app.remote.client import RemoteError, check_url

            if self.server_kind not in ("llama-server", "vllm"):
                raise ConfigError(f"configuration {self.name}: kind is llama-server or vllm")
            try:
                for url in (self.server, self.baseline_server):
                    if url is not None:
                        check_url(url)
            except RemoteError as exc:
                raise ConfigError(f"configuration {self.name}: {exc}") from None
        elif self.source is DraftSource.MODEL and not self.draft:
            raise ConfigError(f"configuration {self.name}: a model draft needs draft=FILE")
        if not 1 <= self.draft_max <= MAX_DRAFT_LEN:
            raise ConfigError(f"configuration {self.name}: n must be 1..{MAX_DRAFT_LEN}")
        where = f"configuration {self.name}:"
        check_setting("temperature", self.temperature, f"{where} temp")
        check_setting("p_min", self.p_min, f"{where} p_min")
        if self.draft is not None:
            check_setting("draft_path", self.draft, f"{where} draft")
        if not 1 <= self.ngram_n <= 16:
            raise ConfigError(f"configuration {self.name}: ngram n must be 1..16")

    def spec(self) -> SpecConfig:
        # a configuration's knobs bear SpecConfig's own names; the rest keep its defaults
        named = [f.name for f in fields(SpecConfig) if hasattr(self, f.name)]
        return SpecConfig(**{name: getattr(self, name) for name in named})

    def sampler(self, seed: int) -> SamplerConfig:
        return SamplerConfig(temperature=self.temperature, seed=seed)

    @property
    def engine_key(self) -> tuple[str, str | None]:
        """Configurations with the same key share one loaded engine."""
        return (self.source.value, self.draft if self.source is DraftSource.MODEL else None)

    @property
    def remote(self) -> bool:
        return self.server is not None

    def describe(self) -> str:
        if self.server is not None:
            against = f", baseline {self.baseline_server}" if self.baseline_server else ""
            return f"remote {self.server_kind} {self.server}{against}, T={self.temperature:g}"
        first = " + n-gram first" if self.ngram_first else ""
        drafting = (
            f"n-gram (n={self.ngram_n})"
            if self.source is DraftSource.NGRAM
            else f"MTP (the target's own heads){first}"
            if self.source is DraftSource.MTP
            else f"draft {self.draft}{first}"
        )
        length = f"adaptive ≤{self.draft_max}" if self.adaptive else f"fixed {self.draft_max}"
        return f"{drafting}, {length}, {self.rule.value}, T={self.temperature:g}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["source"] = self.source.value
        data["rule"] = self.rule.value
        return data

    @staticmethod
    def from_json(data: object) -> LabConfig:
        """A configuration from a result file, each value type-checked by ``ConfigFields``
        before the ranges of ``__post_init__`` apply."""
        try:
            fields = validated(ConfigFields, data, "a configuration")
        except BadValue as exc:
            raise ConfigError(f"not a lab configuration: {exc}") from None
        return LabConfig(**fields.model_dump(exclude_unset=True))


Location = Annotated[str, text_of(4096)]  # a file or an address


class ConfigFields(InputSchema):
    """The schema of a configuration as a result file states it (``LabConfig.to_json``);
    a value not given takes ``LabConfig``'s default."""

    name: Annotated[str, text_of(40)] = Field(None, validate_default=True)
    source: Annotated[DraftSource | None, member_of(DraftSource)] = None
    draft: Location | None = None
    draft_max: GivenWide = None
    adaptive: GivenFlag = None
    rule: Annotated[AcceptRule | None, member_of(AcceptRule)] = None
    temperature: GivenFinite = None
    p_min: GivenFinite = None
    ngram_n: GivenWide = None
    collapse_guard: GivenFlag = None
    ngram_first: GivenFlag = None
    server: Location | None = None
    server_kind: Annotated[str | None, text_of(16)] = None
    baseline_server: Location | None = None


def _number(kind: type, key: str, value: str, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"configuration {name}: {key}={value!r} is not a number") from None


def parse_config(text: str) -> LabConfig:
    """``NAME:key=value,...`` with keys draft, ngram[=N], mtp (the target's own next-token
    layers), n, adaptive[=MAX], rule, temp, p_min, guard=on|off, lookup=on|off (n-gram drafts
    first with a model or MTP), server=URL, kind=llama-server|vllm, baseline=URL."""
    name, sep, rest = text.partition(":")
    name = name.strip()
    fields: dict[str, Any] = {"name": name}
    if not sep:
        raise ConfigError(f"{text!r}: write a configuration as NAME:key=value,...")
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, has_value, value = item.partition("=")
        key = key.strip().lower()
        value = value.strip()
        if key == "draft" and value:
            fields["source"] = DraftSource.MODEL
            fields["draft"] = value
        elif key == "ngram":
            fields["source"] = DraftSource.NGRAM
            if has_value:
                fields["ngram_n"] = _number(int, key, value, name)
        elif key == "mtp" and not has_value:
            fields["source"] = DraftSource.MTP
        elif key == "n" and has_value:
            fields["draft_max"] = _number(int, key, value, name)
            fields["adaptive"] = False
        elif key == "adaptive":
            fields["adaptive"] = True
            if has_value:
                fields["draft_max"] = _number(int, key, value, name)
        elif key == "rule" and value in {r.value for r in AcceptRule}:
            fields["rule"] = AcceptRule(value)
        elif key in ("temp", "temperature") and has_value:
            fields["temperature"] = _number(float, key, value, name)
        elif key == "p_min" and has_value:
            fields["p_min"] = _number(float, key, value, name)
        elif key == "guard" and value in ("on", "off"):
            fields["collapse_guard"] = value == "on"
        elif key == "lookup" and value in ("on", "off"):
            fields["ngram_first"] = value == "on"
        elif key == "server" and value:
            fields["server"] = value
        elif key == "kind" and value:
            fields["server_kind"] = value
        elif key == "baseline" and value:
            fields["baseline_server"] = value
        else:
            raise ConfigError(
                f"configuration {name}: cannot use {item!r} (keys: draft=FILE, ngram[=N], mtp, "
                "n=N, adaptive[=MAX], rule=rejection|match, temp=T, p_min=P, guard=on|off, "
                "lookup=on|off, "
                "server=URL, kind=llama-server|vllm, baseline=URL)"
            )
    return LabConfig(**fields)


def check_drafting(configs: tuple[LabConfig, ...], target: str) -> None:
    """Refuse, before any run, an MTP configuration for a target without next-token layers."""
    from app.models.drafting import self_drafting_problem

    for config in configs:
        if config.source is DraftSource.MTP and not config.remote:
            problem = self_drafting_problem(target)
            if problem is not None:
                raise ConfigError(f"configuration {config.name}: {problem}")


def settings_changes(config: LabConfig) -> dict[str, Any]:
    """The chat ``Settings`` fields that make the chat use ``config``."""
    changes: dict[str, Any] = {
        "temperature": config.temperature,
        "draft_adaptive": config.adaptive,
        "draft_max": config.draft_max,
        "p_min": config.p_min,
        "rule": config.rule.value,
        "draft_source": config.source.value,
    }
    if config.source is DraftSource.MODEL and config.draft:
        changes["draft_path"] = config.draft
    return changes


# What each field Apply changes means in the chat's words, for the confirmation
SETTING_NAMES = {
    "draft_source": "drafting",
    "draft_path": "draft model",
    "draft_adaptive": "draft length",
    "draft_max": "longest draft",
    "rule": "acceptance rule",
    "temperature": "temperature",
    "p_min": "p_min",
}


def _shown(name: str, value: Any) -> str:
    if name == "draft_source":
        return {
            "ngram": "n-gram (prompt lookup)",
            "model": "draft model",
            "mtp": "MTP (the target's own heads)",
        }.get(value, str(value))
    if name == "draft_path":
        return PurePath(str(value)).name or "none"
    if name == "draft_adaptive":
        return "adaptive" if value else "fixed"
    if name == "draft_max":
        return f"{value} tokens"
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe_changes(changes: dict[str, Any], current: Settings) -> list[str]:
    """One line per chat setting that ``changes`` would change: "name: old → new"."""
    lines = []
    for name, value in changes.items():
        before = getattr(current, name, None)
        if before == value or (name == "draft_path" and changes.get("draft_source") != "model"):
            continue
        label = SETTING_NAMES.get(name, name)
        lines.append(f"{label}: {_shown(name, before)} → {_shown(name, value)}")
    return lines
