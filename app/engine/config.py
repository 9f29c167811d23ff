"""Configuration dataclasses shared by the engine, the CLI and the UI."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum


class AcceptRule(str, Enum):
    REJECTION = "rejection"  # Leviathan et al. / Chen et al. rejection sampling
    MATCH = "match"  # llama.cpp: sample from the target, accept while equal


class DraftSource(str, Enum):
    MODEL = "model"  # a separate small draft model
    NGRAM = "ngram"  # prompt lookup: no model
    MTP = "mtp"  # the target's own next-token (MTP) layers: no second file


KV_TYPES = ("f16", "q8_0", "q4_0", "f32", "bf16")


def usable_cores() -> list[int]:
    """The cores this process may run on (a container's or ``taskset``'s, not the machine's)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def default_threads() -> int:
    return max(1, len(usable_cores()))


@dataclass(frozen=True)
class ModelSpec:
    path: str
    n_gpu_layers: int = -1  # -1: all layers that fit on the GPU; ignored on CPU builds
    n_ctx: int = 4096
    n_threads: int = 0  # 0: the cores other programs leave free at load (thread_fit.py)
    kv_type: str = "f16"
    flash_attn: str = "auto"  # "auto" | "on" | "off"
    repack: str = "auto"  # CPU weight repacking: "auto" (probed, see repacking.py) | "on" | "off"
    # where the sampler chain runs: "auto" (on the device where the output layer is on a GPU,
    # else on the host), "device" or "host"
    sampling: str = "auto"

    def threads(self) -> int:
        return self.n_threads if self.n_threads > 0 else default_threads()


# The seed a person's runs start from (the chat, the command line, the Lab): fixed, so two
# runs of one configuration can be compared. The engine itself, like a server, draws a fresh
# one when none is given (``SamplerConfig.seed``).
DEFAULT_SEED = 42


@dataclass(frozen=True)
class SamplerConfig:
    """The sampler, and its defaults for everyone who offers the same choices."""

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None
    # the random number for context position i depends only on (seed, i): seeded sampling
    # under sample-and-match then reproduces seeded target-only sampling token for token
    position_keyed: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


MAX_DRAFT_LEN = 64  # the longest draft the chat, the Lab and a saved pair may ask for


@dataclass(frozen=True)
class SpecConfig:
    draft_max: int = 16  # fixed draft length, or the ceiling when adaptive
    draft_min: int = 1
    adaptive: bool = True
    p_min: float = 0.0  # stop drafting when the draft's own top probability falls below this
    rule: AcceptRule = AcceptRule.REJECTION
    collapse_guard: bool = True
    guard_window: int = 8  # verification steps in the rolling acceptance window
    probe_every: int = 16  # target-only tokens before the draft is probed again
    ngram_n: int = 3  # longest n-gram to match for prompt-lookup drafting
    ngram_first: bool = True  # with a draft model or a head: free prompt-lookup drafts go first


@dataclass(frozen=True)
class GenerationRequest:
    prompt_tokens: tuple[int, ...]
    max_tokens: int = 256
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    spec: SpecConfig = field(default_factory=SpecConfig)
    stop: tuple[str, ...] = ()
    speculative: bool = True  # False: target-only baseline
    ignore_eos: bool = False  # like llama.cpp --ignore-eos: end-of-generation does not stop
    token_probs: bool = True  # compute p(x)/q(x) for every token (hover details in the UI)
    # False: nothing another prompt left in the caches is kept, so neither the figures
    # (reused tokens) nor the prefill's time say how much of this prompt it shared
    reuse_prefix: bool = True
