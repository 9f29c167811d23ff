"""The server on the real SmolLM2-135M-Instruct pair (F16 target, Q4_1 draft)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cores import THREADS
from tests.serve.conftest import ROOT, ServeProcess, app_env

pytestmark = [pytest.mark.real, pytest.mark.timeout(600)]

PROMPT = "List the days of the week, one per line."
TOKENS = 48


def test_smollm2_answers_like_generate_with_its_speculative_figures(
    smollm2_pair: tuple[Path, Path], serve_logs: Path
) -> None:
    target, draft = smollm2_pair
    options = ["--target", str(target), "--draft", str(draft), "--ctx", "2048"]
    options += ["--threads", str(THREADS)]
    direct = subprocess.run(
        [sys.executable, "-m", "app", "generate", *options, "--max-tokens", str(TOKENS)]
        + ["--no-colour", PROMPT],
        cwd=ROOT,
        env=app_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert direct.returncode == 0, direct.stderr
    expected = direct.stdout.removesuffix("\n")
    assert "Monday" in expected

    server = ServeProcess(options, serve_logs)
    try:
        client = server.client()
        messages = [{"role": "user", "content": PROMPT}]
        whole = client.chat.completions.create(
            model=server.model, messages=messages, temperature=0, max_tokens=TOKENS
        )
        assert whole.choices[0].message.content == expected
        timings = whole.model_extra["timings"]
        assert timings["predicted_n"] == whole.usage.completion_tokens > 5
        # a same-family draft agrees often: drafted and accepted, acceptance as their ratio
        assert timings["draft_n"] > 0 and 0 < timings["draft_n_accepted"] <= timings["draft_n"]
        assert timings["acceptance"] == pytest.approx(
            timings["draft_n_accepted"] / timings["draft_n"]
        )
        assert timings["tokens_per_pass"] > 1.0

        chunks = list(
            client.chat.completions.create(
                model=server.model,
                messages=messages,
                temperature=0,
                max_tokens=TOKENS,
                stream=True,
                stop=["Wednesday"],
            )
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert "Wednesday" in expected
        assert streamed == expected[: expected.index("Wednesday")]
        assert chunks[-1].choices[0].finish_reason == "stop"
    finally:
        server.close()
