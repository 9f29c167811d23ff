"""What a lab run will do, stated before it starts: prompts, configurations, the claim."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from app.engine.config import ModelSpec
from app.lab.configs import ConfigError, LabConfig
from app.lab.suites import Prompt, Split, SuiteError, split, suite_hash

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
    seed: int = 0
    ignore_eos: bool = False
    salt: str = "specdeck-lab"
    confirm_fraction: float = 1 / 3
    claim: Claim = field(default_factory=Claim)

    def __post_init__(self) -> None:
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
    def from_json(data: dict[str, Any]) -> LabPlan:
        try:
            target = data["target"]
            claim = data.get("claim") or {}
            return LabPlan(
                target=ModelSpec(
                    path=str(target["path"]),
                    n_gpu_layers=int(target.get("n_gpu_layers", -1)),
                    n_ctx=int(target.get("n_ctx", 4096)),
                    n_threads=int(target.get("n_threads", 0)),
                    kv_type=str(target.get("kv_type", "f16")),
                    flash_attn=str(target.get("flash_attn", "auto")),
                    repack=str(target.get("repack", "auto")),
                ),
                configs=tuple(LabConfig.from_json(c) for c in data["configs"]),
                prompts=tuple(
                    Prompt(str(p["id"]), str(p["category"]), str(p["prompt"]))
                    for p in data["prompts"]
                ),
                repeats=int(data.get("repeats", 1)),
                max_tokens=int(data.get("max_tokens", 64)),
                seed=int(data.get("seed", 0)),
                ignore_eos=bool(data.get("ignore_eos", False)),
                salt=str(data.get("salt", "specdeck-lab")),
                confirm_fraction=float(data.get("confirm_fraction", 1 / 3)),
                claim=Claim(
                    threshold=float(claim.get("threshold", 1.3)),
                    category=None if claim.get("category") is None else str(claim["category"]),
                    config=None if claim.get("config") is None else str(claim["config"]),
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError | SuiteError):
                raise
            raise ConfigError(f"the result file's plan cannot be read: {exc}") from exc
