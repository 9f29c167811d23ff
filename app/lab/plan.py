"""What a lab run will do, stated before it starts: prompts, configurations, the claim."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from pydantic import Field, PlainValidator

from app.engine.config import DEFAULT_SEED, KV_TYPES, ModelSpec
from app.files.values import (
    BadValue,
    GivenFinite,
    GivenFlag,
    GivenWide,
    InputSchema,
    Refusal,
    Wide,
    kind,
    text_of,
    validated,
)
from app.lab.configs import ConfigError, LabConfig, check_setting
from app.lab.suites import Prompt, Split, SuiteError, check_prompt, split, suite_hash

BASELINE = "baseline"


@dataclass(frozen=True)
class Claim:
    """ "Configuration X is at least ``threshold``× faster than the target alone on
    ``category`` at the median." ``config`` None: the best one on the tuning part;
    ``category`` None: every category together."""

    threshold: float = 1.3
    category: str | None = None
    config: str | None = None

    def describe(self, config: str | None = None) -> str:
        who = config or self.config or "the best configuration on the tuning part"
        where = f"on {self.category}" if self.category else "on all categories"
        return (
            f"{who} is at least {self.threshold:g}× faster than the target alone {where} "
            "at the median"
        )


@dataclass(frozen=True)
class LabPlan:
    target: ModelSpec
    configs: tuple[LabConfig, ...]
    prompts: tuple[Prompt, ...]
    repeats: int = 1
    max_tokens: int = 64
    seed: int = DEFAULT_SEED
    ignore_eos: bool = False
    salt: str = "specdeck-lab"
    confirm_fraction: float = 1 / 3
    claim: Claim = field(default_factory=Claim)

    def __post_init__(self) -> None:
        # the target's load settings: the chat's own ranges (a context of 2**31 tokens from a
        # hand-edited result file would ask llama.cpp for all the memory there is)
        target = self.target
        check_setting("target_path", target.path, "the target path")
        check_setting("n_ctx", target.n_ctx, "the context size")
        check_setting("target_gpu_layers", target.n_gpu_layers, "the GPU layers")
        check_setting("n_threads", target.n_threads, "the CPU threads")
        check_setting("weight_repacking", target.repack, "the weight repacking")
        check_setting("seed", self.seed, "the seed")
        if target.kv_type not in KV_TYPES:
            raise ConfigError(f"the KV cache type must be one of {', '.join(KV_TYPES)}")
        if not 0.0 < self.confirm_fraction < 1.0:
            raise ConfigError("the confirmation fraction must be between 0 and 1")
        if not self.configs:
            raise ConfigError("the lab needs at least one configuration")
        names = [c.name for c in self.configs]
        if len(set(names)) != len(names) or BASELINE in names:
            raise ConfigError("configuration names must be unique and not 'baseline'")
        ids = [p.id for p in self.prompts]
        if not ids:
            raise SuiteError("the lab needs at least one prompt")
        if len(set(ids)) != len(ids):
            raise SuiteError("prompt ids must be unique across the chosen suites")
        if not 1 <= self.repeats <= 100:
            raise ConfigError("repeats must be 1..100")
        if not 1 <= self.max_tokens <= 8192:
            raise ConfigError("max tokens must be 1..8192")
        if self.claim.config is not None and self.claim.config not in names:
            raise ConfigError(f"the claim names {self.claim.config!r}, which is not configured")
        if self.claim.category is not None and self.claim.category not in self.categories:
            raise ConfigError(
                f"the claim names category {self.claim.category!r}, which no chosen suite has"
            )
        if not 0.0 < self.claim.threshold <= 100.0:
            raise ConfigError("the claimed speedup must be above 0")

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.category for p in self.prompts))

    @property
    def split(self) -> Split:
        return split(self.prompts, salt=self.salt, confirm_fraction=self.confirm_fraction)

    @property
    def suite_hash(self) -> str:
        return suite_hash(self.prompts)

    def config(self, name: str) -> LabConfig:
        for config in self.configs:
            if config.name == name:
                return config
        raise ConfigError(f"no configuration named {name!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "target": asdict(self.target),
            "configs": [c.to_json() for c in self.configs],
            "prompts": [p.to_json() for p in self.prompts],
            "repeats": self.repeats,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "ignore_eos": self.ignore_eos,
            "salt": self.salt,
            "confirm_fraction": self.confirm_fraction,
            "claim": asdict(self.claim),
        }

    @staticmethod
    def from_json(data: object) -> LabPlan:
        """The plan a result file states, every value type-checked by ``PlanFields`` and
        range-checked by the same rules as a plan made here; ``ConfigError``/``SuiteError``
        name what is wrong."""
        try:
            plan = validated(PlanFields, data, "the plan")
        except BadValue as exc:
            raise ConfigError(f"the result file's plan cannot be read: {exc}") from None
        claim = plan.claim.model_dump(exclude_unset=True) if plan.claim else {}
        return LabPlan(
            target=ModelSpec(**plan.target.model_dump(exclude_unset=True)),
            configs=tuple(LabConfig.from_json(c) for c in plan.configs),
            prompts=tuple(
                check_prompt(p, f"the result file's prompt {i + 1}")
                for i, p in enumerate(plan.prompts)
            ),
            seed=plan.seed,
            claim=Claim(**claim),
            **plan.model_dump(exclude_unset=True, include=PLAN_SETTINGS),
        )


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise Refusal(f"is {kind(value)}; configs and prompts must be lists")
    return value


Entries = Annotated[list[Any], PlainValidator(_list)]  # each read by its own reader
Name = Annotated[str, text_of(80)]
Setting = Annotated[str | None, text_of(16)]


class TargetFields(InputSchema):
    path: Annotated[str, text_of(4096)] = Field(None, validate_default=True)
    n_gpu_layers: GivenWide = None
    n_ctx: GivenWide = None
    n_threads: GivenWide = None
    kv_type: Setting = None
    flash_attn: Setting = None
    repack: Setting = None


class ClaimFields(InputSchema):
    threshold: GivenFinite = None
    category: Name | None = None
    config: Annotated[str, text_of(40)] | None = None


class PlanFields(InputSchema):
    """The schema of a plan as a result file states it (``LabPlan.to_json``); a value not
    given takes ``LabPlan``'s default."""

    target: TargetFields
    configs: Entries = Field(None, validate_default=True)
    prompts: Entries = Field(None, validate_default=True)
    repeats: GivenWide = None
    max_tokens: GivenWide = None
    seed: Wide = 0  # absent: 0, as result files have always been read
    ignore_eos: GivenFlag = None
    salt: Annotated[str | None, text_of(200)] = None
    confirm_fraction: GivenFinite = None
    claim: ClaimFields | None = None


PLAN_SETTINGS = {"repeats", "max_tokens", "ignore_eos", "salt", "confirm_fraction"}
