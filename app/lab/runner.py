"""Runs a lab plan: every configuration and the target-only baseline on every prompt.

Per prompt and repeat the baseline and the configurations run back to back in an order that
rotates from prompt to prompt, so slow drift of a shared machine (thermal, other load) falls
on every configuration alike. Each prompt's results are appended to the result file before
the next prompt starts. Tuning runs first; the best configuration per category (and the one
the claim is about) then runs once on the held-out confirmation prompts.

Every engine runs in an engine process (``EngineHost``), as the chat's does: a GGUF that
aborts llama.cpp, a looping chat template or an engine that ignores Cancel ends that
process with a message, never the Lab's (or the window's) own process. One shared cancel
flag reaches every engine process of a run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app import __version__
from app.engine.bench import BenchSettings, lineage, warm_up
from app.engine.config import DraftSource, GenerationRequest, ModelSpec, SamplerConfig
from app.engine.events import RunSummary
from app.engine.process.host import (
    CancelFlag,
    EngineCrashed,
    EngineHost,
    EngineUnresponsive,
    LoadRequest,
)
from app.errors import GenerationCancelled
from app.files.fileio import file_sha256
from app.lab import interference
from app.lab.configs import LabConfig
from app.lab.plan import BASELINE, LabPlan
from app.lab.results import ResultFileError, ResultLog
from app.lab.stats import choose, rows_from
from app.lab.suites import Prompt
from app.remote.client import RemoteCancelled


@dataclass(frozen=True)
class Progress:
    done: int  # prompt groups finished (this session and before)
    total: int  # groups planned so far (grows when the confirmation part is chosen)
    eta_s: float | None
    phase: str
    prompt: str
    record: dict[str, Any] | None = None  # the record just written


ProgressCallback = Callable[[Progress], None]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def measure(host: EngineHost, request: GenerationRequest) -> tuple[dict[str, Any], RunSummary]:
    """Run one request; its figures as the engine defines them (one place for each)."""
    summary = host.run(request)
    tokens = summary.tokens
    metrics = {
        "tokens": tokens,
        "tok_s": round(summary.tok_s, 4),
        "ttft_ms": round(summary.ttft_ms, 3),
        "acceptance": round(summary.acceptance_rate, 4),
        "tokens_per_pass": round(summary.tokens_per_pass, 4),
        "itl_p50_ms": round(summary.p50_itl_ms, 4),
        "itl_p95_ms": round(summary.p95_itl_ms, 4),
        "itl_p99_ms": round(summary.p99_itl_ms, 4),
        "host_ms_per_token": round(summary.host_ms_per_token, 4),
        "drafted": summary.drafted,
        "accepted": summary.accepted,
        "guard_pauses": summary.guard_pauses,
        "stop_reason": summary.stop_reason.value,
        "peak_rss_mb": None if (rss := host.peak_rss_bytes()) is None else round(rss / 2**20, 1),
        **summary.acceptance_figures(),
    }
    return metrics, summary


class EnginePool:
    """One engine process per distinct draft; the first one also runs the baseline."""

    def __init__(self, plan: LabPlan, cancel: CancelFlag) -> None:
        self.plan = plan
        self.cancel = cancel
        self.hosts: dict[tuple[str, str | None], EngineHost] = {}
        # the threads the first load chose where the plan leaves them to SpecDeck: every
        # later engine process runs on the same count, so the configurations compare
        self.threads = plan.target.n_threads

    def for_config(self, config: LabConfig) -> EngineHost:
        key = config.engine_key
        host = self.hosts.get(key)
        if host is None:
            if self.cancel.is_set():  # no new engine process once the run is cancelled
                raise GenerationCancelled("the lab run was cancelled")
            target = replace(self.plan.target, n_threads=self.threads)
            draft = replace(target, path=config.draft) if config.draft else None
            source = config.source
            if source is not DraftSource.MODEL or draft is None:
                draft = None  # n-gram and MTP drafting load the target alone
                source = source if source is DraftSource.MTP else DraftSource.NGRAM
            host = self.hosts[key] = EngineHost(self.cancel)  # reachable by kill() at once
            info = host.load(LoadRequest(target, draft, source))
            if info.threads is not None:
                self.threads = info.threads.threads
            first = host.tokenize_chat(_user(self.plan.prompts[0].text))
            warm_up(
                host.run,
                first,
                BenchSettings(sampler=config.sampler(self.plan.seed), spec=config.spec()),
            )
        return host

    @property
    def baseline(self) -> EngineHost:
        return self.for_config(self.plan.configs[0])

    def pids(self) -> list[int]:
        """The engine processes' ids: their CPU time is the measurement's own, not outside load."""
        return [pid for host in self.hosts.values() if (pid := host.pid) is not None]

    def kill(self) -> None:
        """End every engine process at once (any thread)."""
        for host in list(self.hosts.values()):
            host.kill()

    def close(self) -> None:
        for host in self.hosts.values():
            host.close()
        self.hosts.clear()


def run_lineage(plan: LabPlan) -> dict[str, Any]:
    first = plan.configs[0]
    base = lineage(
        plan.target,
        None,
        DraftSource.NGRAM,
        BenchSettings(
            max_tokens=plan.max_tokens,
            sampler=first.sampler(plan.seed),
            spec=first.spec(),
            ignore_eos=plan.ignore_eos,
        ),
    )
    base.pop("draft", None)
    drafts = sorted({c.draft for c in plan.configs if c.draft})
    base["drafts"] = {path: file_sha256(Path(path)) for path in drafts}
    base["specdeck"] = __version__
    base["python"] = sys.version.split()[0]
    return base


def header_for(plan: LabPlan) -> dict[str, Any]:
    parts = plan.split
    return {
        "plan": plan.to_json(),
        "lineage": run_lineage(plan),
        "suite_hash": plan.suite_hash,
        "split": {
            "salt": parts.salt,
            "confirm_fraction": parts.confirm_fraction,
            "tuning": [p.id for p in parts.tuning],
            "confirmation": [p.id for p in parts.confirmation],
        },
        "started": time.time(),
        "command": sys.argv[:],
    }


def _check_models_unchanged(log: ResultLog, plan: LabPlan) -> None:
    recorded = log.header.get("lineage") or {}
    now = file_sha256(Path(plan.target.path))
    if (recorded.get("target") or {}).get("sha256") != now:
        raise ResultFileError(
            f"{plan.target.path} is not the file this run started with (sha256 changed); "
            "start a new run instead of resuming"
        )
    for path, digest in (recorded.get("drafts") or {}).items():
        if file_sha256(Path(path)) != digest:
            raise ResultFileError(
                f"the draft {path} changed since this run started; "
                "start a new run instead of resuming"
            )


class LabRunner:
    """Runs a plan; ``cancel`` (shared with the engine processes) stops it between steps,
    inside a prefill or a load; ``kill()`` ends its engine processes at once."""

    def __init__(self, log: ResultLog, plan: LabPlan, cancel: CancelFlag | None = None) -> None:
        self.log = log
        self.plan = plan
        self.cancel = cancel if cancel is not None else CancelFlag()
        self.pool = EnginePool(plan, self.cancel)
        self._durations: list[float] = []

    @staticmethod
    def start(plan: LabPlan, path: Path, cancel: CancelFlag | None = None) -> LabRunner:
        return LabRunner(ResultLog.create(path, header_for(plan)), plan, cancel)

    @staticmethod
    def resume(path: Path, cancel: CancelFlag | None = None) -> LabRunner:
        log = ResultLog.open(path, repair=True)
        plan = LabPlan.from_json(log.header.get("plan") or {})
        _check_models_unchanged(log, plan)
        return LabRunner(log, plan, cancel)

    def kill(self) -> None:
        """Cancel and end the engine processes now (any thread): the window is closing."""
        self.cancel.set()
        self.pool.kill()

    # --- the run --------------------------------------------------------------------------

    def run(self, progress: ProgressCallback | None = None) -> bool:
        """Run what is left; returns True when the whole plan has finished, False when it
        was cancelled (finished prompts are kept)."""
        try:
            return self._run(progress)
        except EngineUnresponsive:
            raise  # worth saying even after a Cancel: the engine had to be killed
        except (GenerationCancelled, EngineCrashed):
            if self.cancel.is_set():  # a cancelled load or prefill, or kill()
                return False
            raise
        finally:
            self.pool.close()

    def _groups(
        self,
        phase: str,
        prompts: Sequence[Prompt],
        configs_for: Callable[[Prompt], list[LabConfig]],
    ) -> list[tuple]:
        return [
            (phase, index, prompt, repeat, configs_for(prompt))
            for index, prompt in enumerate(prompts)
            for repeat in range(self.plan.repeats)
        ]

    def _run(self, progress: ProgressCallback | None) -> bool:
        if self.log.finished:
            return True
        parts = self.plan.split
        tuning = self._groups("tuning", parts.tuning, lambda _: list(self.plan.configs))
        confirmation: list[tuple] = []
        choice = self.log.choice
        if choice is not None:
            confirmation = self._confirmation_groups(choice)
        estimate = len(tuning) + len(parts.confirmation) * self.plan.repeats
        if not self._run_groups(tuning, estimate, progress):
            return False
        if choice is None:
            names = [c.name for c in self.plan.configs]
            choice = {
                "kind": "choice",
                **choose(rows_from(self.log.records), self.plan.claim, self.plan.categories, names),
            }
            self.log.append(choice)
            confirmation = self._confirmation_groups(choice)
        if not self._run_groups(
            confirmation, len(tuning) + len(confirmation), progress, offset=len(tuning)
        ):
            return False
        self.log.append({"kind": "done", "finished": time.time()})
        return True

    def _confirmation_groups(self, choice: dict[str, Any]) -> list[tuple]:
        per_category = choice.get("per_category") or {}
        claim_config = choice.get("claim_config")
        claim_category = self.plan.claim.category

        def configs_for(prompt: Prompt) -> list[LabConfig]:
            names = [per_category.get(prompt.category)]
            if claim_category in (None, prompt.category):
                names.append(claim_config)
            wanted = [n for n in dict.fromkeys(names) if n]
            return [self.plan.config(n) for n in wanted]

        return self._groups("confirmation", self.plan.split.confirmation, configs_for)

    def _run_groups(
        self,
        groups: list[tuple],
        total: int,
        progress: ProgressCallback | None,
        *,
        offset: int = 0,
    ) -> bool:
        done = self.log.done_groups()
        for position, (phase, index, prompt, repeat, configs) in enumerate(groups):
            if (phase, prompt.id, repeat) in done or not configs:
                continue
            if self.cancel.is_set():
                return False
            began = time.perf_counter()
            record = self._run_group(phase, index, prompt, repeat, configs)
            if record is None:
                return False
            self.log.append(record)
            self._durations.append(time.perf_counter() - began)
            if progress is not None:
                left = sum(1 for g in groups[position + 1 :] if (g[0], g[2].id, g[3]) not in done)
                eta = float(np.mean(self._durations)) * left if self._durations else None
                progress(Progress(offset + position + 1, total, eta, phase, prompt.id, record))
        return True

    def _run_remote(self, config: LabConfig, prompt: Prompt, seed: int) -> dict[str, Any]:
        from app.lab.remote_run import run_remote

        def ask(url: str) -> dict[str, Any]:
            return run_remote(
                url,
                prompt.text,
                max_tokens=self.plan.max_tokens,
                temperature=config.temperature,
                seed=seed,
                kind=config.server_kind,
                cancel=self.cancel.is_set,
            )

        assert config.server is not None
        run = ask(config.server)
        if config.baseline_server is not None:  # remote exactness is the server's own business
            run["baseline_tok_s"] = ask(config.baseline_server)["tok_s"]
        return {**run, "temperature": config.temperature}

    def _run_group(
        self,
        phase: str,
        index: int,
        prompt: Prompt,
        repeat: int,
        configs: list[LabConfig],
    ) -> dict[str, Any] | None:
        plan = self.plan
        base_host = self.pool.baseline
        tokens = base_host.tokenize_chat(_user(prompt.text))
        temperatures = list(dict.fromkeys(c.temperature for c in configs))
        units: list[tuple[str, float, LabConfig | None]] = [
            (BASELINE, t, None) for t in temperatures
        ] + [(c.name, c.temperature, c) for c in configs]
        shift = (index + repeat) % len(units)
        units = units[shift:] + units[:shift]
        baselines: dict[str, dict[str, Any]] = {}
        runs: dict[str, dict[str, Any]] = {}
        outputs: dict[str, tuple[int, ...]] = {}
        seed = plan.seed + repeat
        before = interference.sample(self.pool.pids())
        for name, temperature, config in units:
            if config is None:
                host = base_host
                request = GenerationRequest(
                    tokens,
                    max_tokens=plan.max_tokens,
                    sampler=SamplerConfig(temperature=temperature, seed=seed),
                    speculative=False,
                    ignore_eos=plan.ignore_eos,
                    token_probs=False,
                )
            elif config.server is not None:
                try:
                    runs[name] = self._run_remote(config, prompt, seed)
                except RemoteCancelled:
                    return None
                continue
            else:
                host = self.pool.for_config(config)
                request = GenerationRequest(
                    tokens,
                    max_tokens=plan.max_tokens,
                    sampler=config.sampler(seed),
                    spec=config.spec(),
                    ignore_eos=plan.ignore_eos,
                    token_probs=False,
                )
            metrics, summary = measure(host, request)
            if self.cancel.is_set():
                return None
            if config is None:
                baselines[str(temperature)] = metrics
                outputs[f"{BASELINE}@{temperature}"] = summary.token_ids
            else:
                runs[name] = {**metrics, "temperature": temperature}
                outputs[name] = summary.token_ids
        shared = interference.between(
            before,
            interference.sample(self.pool.pids()),
            threads=self.pool.threads or plan.target.threads(),
        )
        for config in configs:
            run = runs[config.name]
            if config.temperature > 0.0 or config.server is not None:
                run["identical"] = None
                continue
            check = base_host.compare(
                tokens, outputs[config.name], outputs[f"{BASELINE}@{config.temperature}"]
            )
            run["identical"] = check.identical
            run["first_divergence"] = check.first_divergence
            run["margin"] = None if check.margin is None else round(check.margin, 5)
        return {
            "kind": "prompt",
            "phase": phase,
            "prompt": prompt.id,
            "category": prompt.category,
            "repeat": repeat,
            "prompt_tokens": len(tokens),
            "order": [u[0] if u[2] is not None else f"{BASELINE}@{u[1]}" for u in units],
            "baselines": baselines,
            "runs": runs,
            "load": shared,
        }


def target_spec(
    path: str, *, n_ctx: int = 4096, threads: int = 0, gpu_layers: int = -1, repack: str = "auto"
) -> ModelSpec:
    return ModelSpec(path, n_gpu_layers=gpu_layers, n_ctx=n_ctx, n_threads=threads, repack=repack)
