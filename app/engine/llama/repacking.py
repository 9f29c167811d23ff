"""Whether llama.cpp's CPU weight repacking ("extra buffer types") is safe on this machine.

Repacking lays weights out for the CPU's fastest kernels (AVX-512/AVX2 repack, Intel AMX
tiles). It is a real speed-up, but the llama.cpp inside llama-cpp-python 0.3.36 segfaults
in ``ggml_backend_amx_mul_mat`` on CPUs with AMX (llama.cpp issue #20824): the first matrix
product with an AMX-type weight (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS) kills the
process. A segfault cannot be caught, so the verdict comes from a child process that loads
a tiny Q4_0 model with repacking on and multiplies with it (``repack_probe``); if the child
dies, repacking is turned off. The verdict is cached per (llama.cpp build, CPU), so the probe
runs once. A model with no weight of those types never reaches the AMX kernels, so loading
it needs no verdict (``repacking_for``).

Precedence: the environment variable ``SPECDECK_REPACK`` (``on``/``off``/``auto``), then the
setting, then the cached or probed verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import platform
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from gguf.constants import GGMLQuantizationType as Quant
from gguf.constants import Keys

from app.engine.llama.repack_probe import probe_child
from app.files.fileio import StoredFileError, atomic_write_text, read_json_object
from app.files.paths import cache_dir
from app.gguf.reader import GGUFHeader

ENV_VAR = "SPECDECK_REPACK"
CHOICES = ("auto", "on", "off")
CACHE_FILE = "repacking.json"
PROBE_TIMEOUT_S = 120.0
_MAX_CACHE_BYTES = 64 * 1024
_AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")
# the weight types llama.cpp's AMX buffer takes (ggml-cpu/amx/common.h qtype_has_amx_kernels)
AMX_WEIGHT_TYPES = frozenset(
    int(t)
    for t in (Quant.Q4_0, Quant.Q4_1, Quant.Q8_0, Quant.Q4_K, Quant.Q5_K, Quant.Q6_K, Quant.IQ4_XS)
)


@dataclass(frozen=True)
class RepackVerdict:
    enabled: bool
    source: str  # "environment", "setting", "cache", "probe", "no AMX", "no AMX weights"
    reason: str

    def describe(self) -> str:
        state = "on" if self.enabled else "off"
        return f"weight repacking {state} ({self.source}: {self.reason})"


def _cpu_flags() -> set[str] | None:
    """CPU feature flags from /proc/cpuinfo (Linux); None where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read(4 * 1024 * 1024)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle.read(1024 * 1024).splitlines():
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _llama_build() -> str:
    try:
        llama_version = version("llama_cpp_python")
    except PackageNotFoundError:
        llama_version = "unknown"
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return f"{llama_version}|{info.decode('utf-8', 'replace') if info else ''}"


def fingerprint() -> str:
    """Identifies (llama.cpp build, CPU): a verdict holds only for the pair it was made on."""
    flags = _cpu_flags()
    parts = [platform.machine(), _cpu_name(), " ".join(sorted(flags or ())), _llama_build()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _cache_path() -> Path:
    return cache_dir() / CACHE_FILE


def _read_cache() -> dict[str, dict[str, object]]:
    try:
        data = read_json_object(_cache_path(), _MAX_CACHE_BYTES, what="repacking verdict cache")
    except (OSError, StoredFileError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, dict)}


def _write_cache(key: str, verdict: RepackVerdict) -> None:
    cache = _read_cache()
    cache[key] = {"enabled": verdict.enabled, "reason": verdict.reason}
    # if it cannot be stored, the verdict still holds for this process and is probed again later
    with contextlib.suppress(OSError):
        atomic_write_text(_cache_path(), json.dumps(cache, indent=1))


def run_probe(
    child: Callable[[str], None] = probe_child, timeout_s: float = PROBE_TIMEOUT_S
) -> tuple[bool, str]:
    """Run ``child`` in a fresh process; (survived, what happened)."""
    spawn = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="specdeck-probe-") as work:
        process = spawn.Process(target=child, args=(work,), name="specdeck-repack-probe")
        process.start()
        process.join(timeout_s)
        if process.is_alive():
            process.kill()
            process.join()
            return False, f"the probe did not finish within {timeout_s:.0f} s"
        code = process.exitcode
    if code == 0:
        return True, "a repacked Q4_0 matrix product ran in a child process"
    if code is not None and code < 0:
        return False, f"a repacked Q4_0 matrix product crashed a child process (signal {-code})"
    return False, f"the repacking probe failed in a child process (exit code {code})"


def _forced(value: str | None, source: str) -> RepackVerdict | None:
    choice = (value or "auto").strip().lower()
    if choice == "on":
        return RepackVerdict(True, source, f"forced on by {source}")
    if choice == "off":
        return RepackVerdict(False, source, f"forced off by {source}")
    return None


def _chosen(setting: str) -> RepackVerdict | None:
    """The person's choice: the environment variable, then the setting (None: automatic)."""
    return _forced(os.environ.get(ENV_VAR), f"${ENV_VAR}") or _forced(setting, "setting")


_decided: RepackVerdict | None = None


def decide(
    setting: str = "auto",
    *,
    probe: Callable[[], tuple[bool, str]] = run_probe,
    cpu_flags: Callable[[], set[str] | None] = _cpu_flags,
    machine: str | None = None,
) -> RepackVerdict:
    """The verdict: environment, then setting, then the cached verdict, then a probe."""
    forced = _chosen(setting)
    if forced is not None:
        return forced
    machine = machine or platform.machine()
    if machine.lower() not in ("x86_64", "amd64", "x86", "i386", "i686"):
        return RepackVerdict(True, "no AMX", f"{machine} CPUs have no Intel AMX")
    flags = cpu_flags()
    if flags is not None and not flags.intersection(_AMX_FLAGS):
        return RepackVerdict(True, "no AMX", "this CPU has no AMX tiles")
    key = fingerprint()
    cached = _read_cache().get(key)
    if cached is not None and isinstance(cached.get("enabled"), bool):
        reason = cached.get("reason")
        return RepackVerdict(
            bool(cached["enabled"]), "cache", reason[:200] if isinstance(reason, str) else ""
        )
    survived, reason = probe()
    verdict = RepackVerdict(survived, "probe", reason)
    _write_cache(key, verdict)
    return verdict


def repacking_enabled(setting: str = "auto") -> RepackVerdict:
    """The verdict, decided once per process for the automatic case."""
    global _decided
    forced = _chosen(setting)
    if forced is not None:
        return forced
    if _decided is None:
        _decided = decide("auto")
    return _decided


def repacking_for(setting: str, weight_types: Iterable[int] | None) -> RepackVerdict:
    """The verdict for loading one model whose weights have ``weight_types`` (ggml type
    ids; None or none at all: not known, ``weights_in``): where none is a type the AMX
    kernels take, repacking is on without a verdict for the machine (an F16 or F32 model
    never waits for the probe); otherwise as ``repacking_enabled``."""
    forced = _chosen(setting)
    if forced is not None:
        return forced
    types = set(weight_types or ())
    if types and AMX_WEIGHT_TYPES.isdisjoint(types):
        return RepackVerdict(
            True, "no AMX weights", "the model has no weights of the types the AMX kernels take"
        )
    return repacking_enabled(setting)


def weights_in(header: GGUFHeader) -> set[int] | None:
    """The ggml types of a model's weights where ``header``'s file holds all of them; None
    for a part of a split model (its first part may hold F32 norms alone, or no tensor at
    all, while a later part holds Q4_K matrices)."""
    parts = header.get(Keys.Split.LLM_KV_SPLIT_COUNT)
    if parts is not None and not (type(parts) is int and parts == 1):
        return None
    return {t.ggml_type for t in header.tensors}
