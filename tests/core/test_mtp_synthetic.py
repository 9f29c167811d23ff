"""A tiny synthetic ``qwen35`` (hybrid recurrent + attention) with one next-token (MTP) layer,
loaded by the real llama.cpp with ``load_mtp`` and drafting through an MTP context.

llama.cpp runs in a child process (``app.devtools.mtp_probe``) under a time bound, never in
the test process: a native abort must fail one test, not end the run."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import gguf
import pytest

from app.devtools.test_models.gguf_writing import rewrite_gguf
from app.devtools.test_models.synthetic import TinyQwen35Shape, write_tiny_llama, write_tiny_qwen35
from app.errors import ModelLoadError
from app.gguf.check import validate_gguf_file
from app.gguf.facts import SelfDrafting, model_facts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def qwen35_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen35(tmp_path_factory.mktemp("mtp") / "qwen35-mtp.gguf")


def run_probe(path: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "app.devtools.mtp_probe", str(path), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def probe(path: Path, *args: str) -> dict[str, Any]:
    done = run_probe(path, *args)
    assert done.returncode == 0, f"probe exited {done.returncode}:\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_the_header_says_it_drafts_for_itself(qwen35_mtp: Path) -> None:
    facts = model_facts(validate_gguf_file(qwen35_mtp))
    assert facts.architecture == "qwen35"
    assert facts.n_layer == TinyQwen35Shape().n_trunk + 1  # block_count counts the MTP block
    assert facts.drafting == SelfDrafting("mtp", 1)


def test_llama_cpp_loads_the_next_token_layer_and_decodes(qwen35_mtp: Path) -> None:
    report = probe(qwen35_mtp)
    assert report["loaded"] is True
    assert report["n_layer_nextn"] == 1
    assert report["n_layer"] == TinyQwen35Shape().n_trunk
    assert report["target_decode"] == 0
    assert report["logits_finite"] is True
    assert report["logits_spread"] > 1.0  # real, varied logits, not a constant row
    assert 0 <= report["next_token"] < report["n_vocab"]


def test_an_mtp_context_on_the_target_drafts_a_token(qwen35_mtp: Path) -> None:
    report = probe(qwen35_mtp, "--draft")
    assert report["mtp_context"] is True
    assert report["target_nextn_embeddings"] is True
    # qwen35's MTP block keeps its own attention cache, filled from the target's rows
    assert report["memory_shared_with_target"] is False
    assert report["mtp_prompt_decode"] == 0
    assert report["mtp_decode"] == 0
    assert report["draft_logits_finite"] is True
    assert 0 <= report["drafted_token"] < report["n_vocab"]
    assert report["draft_nextn_embedding"] is True  # the embedding a second head would chain on


def test_more_heads_than_blocks_aborts_llama_cpp_and_is_refused_before_load(
    qwen35_mtp: Path, tmp_path: Path
) -> None:
    data = bytearray(qwen35_mtp.read_bytes())
    key = b"qwen35.nextn_predict_layers"
    at = data.index(key) + len(key)
    assert struct.unpack_from("<II", data, at) == (4, 1)  # a u32 holding 1
    struct.pack_into("<I", data, at + 4, 9)  # the model has 5 blocks
    bad = tmp_path / "bad-nextn.gguf"
    bad.write_bytes(bytes(data))
    # what the header check prevents: llama.cpp asserts and takes the process down
    assert run_probe(bad).returncode in (-signal.SIGABRT, 128 + signal.SIGABRT)
    with pytest.raises(ModelLoadError, match=r"nextn_predict_layers = 9 is more than the 5"):
        validate_gguf_file(bad)


@pytest.fixture(scope="module")
def qwen35_mtp_agreeing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mtp") / "qwen35-mtp-agreeing.gguf"
    return write_tiny_qwen35(path, branch_scale=0.3)


@pytest.mark.parametrize(
    "prompt", ["1,300,310,320,330,301", "1,290,291", "1,275,280,285,270,299,300,301,302,303"]
)
def test_greedy_mtp_speculation_is_token_identical_with_rollbacks(
    qwen35_mtp_agreeing: Path, prompt: str
) -> None:
    report = probe(qwen35_mtp_agreeing, "--greedy", "200", "--prompt", prompt)
    assert len(report["tokens"]) == 200
    assert report["tokens"] == report["target_only"]
    assert report["identical"] is True
    # both paths taken many times: accepted drafts, and rejected ones whose recurrent state
    # was rolled back (without the snapshot llama.cpp refuses the next decode)
    assert report["accepted"] >= 20
    assert report["drafted"] - report["accepted"] >= 20
    assert report["rollbacks_ok"] is True


@pytest.mark.parametrize("block_count", [0, 600])
def test_a_block_count_llama_cpp_asserts_on_is_refused_before_load(
    tmp_path: Path, block_count: int
) -> None:
    data = bytearray(write_tiny_llama(tmp_path / "tiny.gguf").read_bytes())
    key = b"llama.block_count"
    at = data.index(key) + len(key)
    assert struct.unpack_from("<II", data, at) == (4, 2)
    struct.pack_into("<I", data, at + 4, block_count)
    bad = tmp_path / f"blocks-{block_count}.gguf"
    bad.write_bytes(bytes(data))
    assert run_probe(bad).returncode in (-signal.SIGABRT, 128 + signal.SIGABRT)
    with pytest.raises(ModelLoadError, match=rf"llama.block_count = {block_count} is out of range"):
        validate_gguf_file(bad)


@pytest.mark.fast
@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("qwen35.nextn_predict_layers", gguf.GGUFValueType.INT32),
        ("qwen35.nextn_predict_layers", gguf.GGUFValueType.UINT8),
        ("qwen35.block_count", gguf.GGUFValueType.INT32),
    ],
)
def test_a_layer_count_stored_as_another_type_is_refused_not_read_as_mtp(
    qwen35_mtp: Path, tmp_path: Path, key: str, kind: gguf.GGUFValueType
) -> None:
    """llama.cpp reads both counts as UINT32 and as nothing else: it refuses the file with
    only "failed to load", where the app read a next-token layer."""
    value = 1 if key.endswith("nextn_predict_layers") else 5
    bad = rewrite_gguf(qwen35_mtp, tmp_path / "typed.gguf", keys={key: (value, kind, None)})
    with pytest.raises(ModelLoadError, match=rf"{key} should be stored as UINT32"):
        validate_gguf_file(bad)


@pytest.mark.fast
def test_mtp_refused_for_a_mistyped_count_says_why(qwen35_mtp: Path, tmp_path: Path) -> None:
    """Choosing MTP drafting for such a file names what is wrong with it, not only that it
    cannot be read (what the pair bar, the Lab and ``generate --draft-source mtp`` say)."""
    from app.models.drafting import self_drafting_problem

    key = "qwen35.nextn_predict_layers"
    bad = rewrite_gguf(
        qwen35_mtp, tmp_path / "typed.gguf", keys={key: (1, gguf.GGUFValueType.INT32, None)}
    )
    problem = self_drafting_problem(bad) or ""
    assert problem.startswith("typed.gguf cannot be read as a GGUF model: ")
    assert f"{key} should be stored as UINT32" in problem
    assert self_drafting_problem(qwen35_mtp) is None
