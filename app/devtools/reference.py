"""llama.cpp's own ``llama-speculative-simple``, built from the vendored sources of the
installed llama-cpp-python's sdist, as a reference point for the benchmark.

Same llama.cpp revision, same compiler flags family, same machine: the ratio of SpecDeck's
speculative tokens/sec to this binary's says how much the Python loop costs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock

from app.engine.bench import ReferenceRequest, ReferenceRun
from app.engine.llama.repacking import repacking_enabled
from app.errors import SpecDeckError
from app.files.paths import model_cache_dir

BINARY = "llama-speculative-simple"


class ReferenceUnavailableError(SpecDeckError):
    pass


@dataclass(frozen=True)
class ReferenceResult:
    tokens: int
    seconds: float
    tok_s: float
    drafted: int
    accepted: int
    text: str

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


def _run(command: list[str], cwd: Path | None = None) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ReferenceUnavailableError(
            f"{' '.join(command[:3])} failed: {(result.stderr or result.stdout)[-600:]}"
        )


def reference_binary() -> Path:
    """Path of ``llama-speculative-simple``; built on first use (about 10 minutes on 2 cores)."""
    return llama_cpp_tool(BINARY)


def llama_cpp_tool(name: str) -> Path:
    """A llama.cpp program (``llama-speculative-simple``, ``llama-server``) built from the
    sources vendored in the installed llama-cpp-python, so it is the same llama.cpp."""
    llama_version = version("llama-cpp-python")
    root = model_cache_dir() / "reference" / llama_version
    binary = root / "build" / "bin" / name
    root.mkdir(parents=True, exist_ok=True)
    # one build at a time: test runs started together each began their own build in the
    # same folder (three at once were seen here); the later ones wait and find the binary
    # (not looked for before the lock: a build in progress links it in place)
    with FileLock(str(root / "build.lock")):
        if binary.exists():
            return binary
        return _build_tool(name, root, llama_version, binary)


def _build_tool(name: str, root: Path, llama_version: str, binary: Path) -> Path:
    sdist = root / f"llama_cpp_python-{llama_version}.tar.gz"
    if not sdist.exists():
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={llama_version}",
                "-d",
                str(root),
            ]
        )
    source = root / "src"
    if not source.exists():
        with tarfile.open(sdist) as archive:
            archive.extractall(source, filter="data")
    llama_dir = next(source.glob("*/vendor/llama.cpp"))
    jobs = str(os.cpu_count() or 2)
    _run(
        [
            "cmake",
            "-S",
            str(llama_dir),
            "-B",
            str(root / "build"),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_BUILD_SERVER=ON",
        ]
    )
    _run(["cmake", "--build", str(root / "build"), "--target", name, "-j", jobs])
    if not binary.exists():
        raise ReferenceUnavailableError(f"the build did not produce {binary}")
    return binary


_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s")
_DRAFTED = re.compile(r"n_drafted\s*=\s*(\d+)")
_ACCEPTED = re.compile(r"n_accept\s*=\s*(\d+)")


def run_reference(request: ReferenceRequest) -> ReferenceResult:
    command = [
        str(reference_binary()),
        "-m",
        str(request.target),
        "-md",
        str(request.draft),
        "--spec-type",
        "draft-simple",
        "-p",
        request.prompt_text,
        "-n",
        str(request.max_tokens),
        "--temp",
        "0",
        "--top-k",
        "1",
        "--seed",
        str(request.seed),
        "--spec-draft-n-max",
        str(request.draft_max),
        "--spec-draft-n-min",
        "0",
        "--spec-draft-p-min",
        str(request.p_min),
        "-t",
        str(request.threads),
        "-tb",
        str(request.threads),
        "-c",
        str(request.n_ctx),
        "-ngl",
        "99",
        "-ngld",
        "99",
    ]
    if request.ignore_eos:
        command.append("--ignore-eos")
    # the same repacking choice as SpecDeck's own contexts, so the comparison is like for like
    use_repack = repacking_enabled().enabled if request.repack is None else request.repack
    command.append("--repack" if use_repack else "--no-repack")
    result = subprocess.run(command, capture_output=True, text=True, errors="replace")
    log = result.stdout + result.stderr
    decoded = _DECODED.search(log)
    if result.returncode != 0 or decoded is None:
        raise ReferenceUnavailableError(f"{BINARY} failed: {log[-800:]}")
    drafted = _DRAFTED.search(log)
    accepted = _ACCEPTED.search(log)
    return ReferenceResult(
        tokens=int(decoded.group(1)),
        seconds=float(decoded.group(2)),
        tok_s=float(decoded.group(3)),
        drafted=int(drafted.group(1)) if drafted else 0,
        accepted=int(accepted.group(1)) if accepted else 0,
        text=result.stdout,
    )


if TYPE_CHECKING:
    # ``bench --reference`` passes ``run_reference`` to the bench as its ``ReferenceRun``
    # (looked up by name at run time): mypy checks here that it fits
    _AS_THE_BENCH_TAKES_IT: ReferenceRun = run_reference
