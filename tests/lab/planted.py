"""Result files with planted numbers, written as the runner writes them: for the analysis,
the report and the Lab tab without a run (a run's figures depend on the machine)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.lab.configs import parse_config
from app.lab.plan import Claim, LabPlan
from app.lab.runner import target_spec
from app.lab.suites import Prompt
from tests.cores import THREADS

QUIET = {"wall_s": 2.0, "own_cpu_s": 3.6, "busy_cpu_s": 3.7, "cpus": 2, "threads": 2}
BUSY = {"wall_s": 2.0, "own_cpu_s": 2.0, "busy_cpu_s": 4.0, "cpus": 2, "threads": 2}


def model_files(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    target, draft = folder / "target-q4.gguf", folder / "draft-q2.gguf"
    target.write_bytes(b"planted target")
    draft.write_bytes(b"planted draft")
    return target, draft


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(
    path: Path,
    target: Path,
    draft: Path,
    runs: Sequence[tuple[str, str, str, dict[str, float]]],
    *,
    claim: Claim,
    claim_config: str,
    per_category: dict[str, str],
    load: dict[str, float] | None = None,
    busy_prompts: frozenset[str] = frozenset(),
) -> Path:
    """``runs``: (phase, prompt id, category, {configuration: speedup}), one prompt each."""
    prompts = tuple(dict.fromkeys(Prompt(p, c, f"prompt {p}") for _, p, c, _ in runs))
    plan = LabPlan(
        target=target_spec(str(target), n_ctx=1024, threads=THREADS),
        configs=(parse_config(f"adaptive:draft={draft}"), parse_config("ngram:ngram")),
        prompts=prompts,
        claim=claim,
    )
    header = {
        "kind": "header",
        "format": "specdeck-lab/1",
        "plan": plan.to_json(),
        "lineage": {
            "target": {"path": str(target), "sha256": _sha(target)},
            "drafts": {str(draft): _sha(draft)},
        },
        "suite_hash": plan.suite_hash,
        "command": ["app", "lab", "run", "--target", str(target), "--out", str(path)],
    }
    lines: list[dict[str, Any]] = [header]
    choice_written = False
    for phase, prompt, category, speedups in runs:
        if phase == "confirmation" and not choice_written:
            lines.append(
                {"kind": "choice", "per_category": per_category, "claim_config": claim_config}
            )
            choice_written = True
        base = {"tok_s": 10.0, "itl_p50_ms": 50.0, "itl_p95_ms": 60.0, "tokens": 32}
        lines.append(
            {
                "kind": "prompt",
                "phase": phase,
                "prompt": prompt,
                "category": category,
                "repeat": 0,
                "baselines": {"0.0": base},
                "runs": {
                    name: {
                        "tok_s": 10.0 * speedup,
                        "acceptance": 0.6,
                        "tokens_per_pass": 2.0,
                        "host_ms_per_token": 0.55,
                        "tokens": 32,
                        "temperature": 0.0,
                        "identical": True,
                    }
                    for name, speedup in speedups.items()
                },
                "load": BUSY if prompt in busy_prompts else (load or QUIET),
            }
        )
    lines.append({"kind": "done", "finished": 1.0})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def falsified_ngram(folder: Path) -> Path:
    """As found: the n-gram claim falsified at 0.97× overall (five held-out runs), yet
    code's two held-out n-gram runs at a median 1.05×."""
    target, draft = model_files(folder / "models")
    runs = [
        ("tuning", f"code{i}", "code", {"adaptive": 0.9, "ngram": s})
        for i, s in enumerate((1.1, 1.12, 1.08, 1.15))
    ]
    runs += [
        ("tuning", f"edit{i}", "edit", {"adaptive": 1.2, "ngram": s})
        for i, s in enumerate((1.6, 1.7, 1.5, 1.65))
    ]
    runs += [
        ("confirmation", "code8", "code", {"ngram": 1.02}),
        ("confirmation", "code9", "code", {"ngram": 1.08}),
        ("confirmation", "edit8", "edit", {"ngram": 0.92}),
        ("confirmation", "edit9", "edit", {"ngram": 0.95}),
        ("confirmation", "edit7", "edit", {"ngram": 0.97}),  # five: enough to judge the claim
    ]
    return write(
        folder / "falsified.jsonl",
        target,
        draft,
        runs,
        claim=Claim(1.3),
        claim_config="ngram",
        per_category={"code": "ngram", "edit": "ngram"},
    )


def confirmed_ngram(
    folder: Path, *, busy_prompts: frozenset[str] = frozenset(), held_out: int = 6
) -> Path:
    """n-gram clearly faster on code, on ``held_out`` held-out runs."""
    target, draft = model_files(folder / "models")
    runs = [
        ("tuning", f"code{i}", "code", {"adaptive": 1.1, "ngram": 1.5 + 0.02 * i}) for i in range(6)
    ]
    runs += [
        ("confirmation", f"held{i}", "code", {"ngram": 1.4 + 0.03 * i}) for i in range(held_out)
    ]
    return write(
        folder / "confirmed.jsonl",
        target,
        draft,
        runs,
        claim=Claim(1.3, category="code"),
        claim_config="ngram",
        per_category={"code": "ngram"},
        busy_prompts=busy_prompts,
    )
