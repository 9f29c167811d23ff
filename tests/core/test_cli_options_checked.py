"""The numbers ``generate``, ``bench`` and ``serve`` take are held to the chat's own ranges
and refused in words before any model loads. Before, none was checked: ``--threads 100000``
crashed llama.cpp and read "The file is damaged", ``--ctx -5`` read "probably out of
memory", ``--seed -1`` failed after the load with "expected non-negative integer", and
``--temperature nan``, ``--max-tokens -3`` or ``--draft-max 0`` ran as if they meant
something (an empty answer, no drafting at all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.main import run
from tests.processes import run_app

CASES = [
    ("--threads", "100000", "must be between 0 and 512"),
    ("--ctx", "-5", "must be between 256 and 1048576"),
    ("--seed", "-1", "must be between 0 and 4294967295"),
    ("--temperature", "nan", "must be a finite number"),
    ("--top-p", "0", "must be in (0, 1]"),
    ("--top-p", "1.0000001", "must be in (0, 1]"),  # not "1"
    ("--max-tokens", "-3", "must be between 1 and 131072"),
    ("--draft-max", "0", "must be between 1 and 64"),
    ("--adaptive-max", "100000", "must be between 1 and 64"),
    ("--p-min", "2", "must be in [0, 1)"),
    ("--gpu-layers", "-100", "must be between -1 and 999"),
    ("--draft-gpu-layers", "5000", "must be between -1 and 999"),
    ("--top-k", "-5", "must be between 0 and 100000"),
]


def _command(command: str, pair: tuple[Path, Path], tmp_path: Path) -> list[str]:
    common = ["--target", str(pair[0]), "--draft", str(pair[1])]
    if command == "generate":
        return ["generate", "hello", *common]
    if command == "bench":
        prompts = tmp_path / "p.jsonl"
        prompts.write_text('{"id": "a", "prompt": "hi"}\n')
        return ["bench", *common, "--prompts", str(prompts), "--json", str(tmp_path / "o.json")]
    return ["serve", *common, "--port", "0"]


@pytest.mark.parametrize(("option", "value", "reason"), CASES)
@pytest.mark.parametrize("command", ["generate", "bench", "serve"])
def test_an_option_out_of_range_is_refused_before_any_load(
    tiny_pair: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    option: str,
    value: str,
    reason: str,
) -> None:
    args = [*_command(command, tiny_pair, tmp_path), option, value]
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith(f"error: {option} {value}: {reason}"), err
    assert "[threads]" not in err  # nothing was loaded


def test_the_command_line_says_it_in_one_line_and_starts_no_engine(
    tiny_pair: tuple[Path, Path],
) -> None:
    args = ["generate", "--target", str(tiny_pair[0]), "--threads", "100000", "hi"]
    done, _ = run_app(args, timeout_s=120)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --threads 100000: must be between 0 and 512 (0 fits them to the free cores)"
    ), done.stderr


@pytest.mark.parametrize("ctx", ["-5", "0"])
def test_fit_refuses_a_context_outside_the_chats_range(
    tiny_pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str], ctx: str
) -> None:
    """``fit --ctx -5`` said the pair fits."""
    assert run(["fit", str(tiny_pair[0]), "--ctx", ctx]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --ctx {ctx}: must be between 256 and 1048576"), err


def test_fit_names_a_folder_as_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``fit /tmp`` said "no such file" of a folder that is there."""
    assert run(["fit", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}: a folder"
