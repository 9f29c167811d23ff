"""``bench --prompts FILE`` reads its file like every other prompt file: bounded, a regular
file, each line an object with an id and a prompt that is text, each fault named by file and
line in one ``error:`` line. Before, a line holding a number ended in a TypeError traceback,
deep nesting in a RecursionError traceback, a FIFO blocked the command forever, /dev/zero
was read until memory ran out, bytes that are not UTF-8 read "'utf-8' codec can't decode
byte 0xff in position 0" without naming the file, and a prompt holding a lone surrogate
loaded the models and then failed with the empty message "error: "."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from app.cli.main import bench_prompts, results_file, run, write_results
from app.errors import SpecDeckError
from app.lab.suites import SuiteError, load_jsonl
from tests.processes import run_app


def _bench(pair: tuple[Path, Path], prompts: Path, tmp_path: Path) -> list[str]:
    return [
        "bench",
        "--target",
        str(pair[0]),
        "--draft",
        str(pair[1]),
        "--max-tokens",
        "4",
        "--prompts",
        str(prompts),
        "--json",
        str(tmp_path / "out.json"),
    ]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"5\n", "p.jsonl:1: each line must be a JSON object"),
        (b'["id", "prompt"]\n', "p.jsonl:1: each line must be a JSON object"),
        (b"[" * 5000 + b"]" * 5000 + b"\n", "p.jsonl:1: not valid JSON"),
        (b'{"id": "a", "prompt": 5}\n', "p.jsonl:1: 'prompt' must be a non-empty string"),
        (b'{"id": "a", "prompt": "\\ud800"}\n', "p.jsonl:1: the prompt holds a lone surrogate"),
        (b'{"id": "a", "prompt": "hi"}\n\xff\n', "p.jsonl is not UTF-8 text"),
        (b'{"id": "a", "prompt": NaN}\n', "p.jsonl:1: not valid JSON"),
        (b"", "p.jsonl holds no prompts"),
    ],
)
def test_a_broken_prompts_file_is_named_in_one_line_before_any_load(
    tiny_pair: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    said: str,
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(content)
    assert run(_bench(tiny_pair, prompts, tmp_path)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert said in err, err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero")
def test_a_fifo_or_a_device_as_the_prompts_file_is_refused_at_once(
    tiny_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    fifo = tmp_path / "prompts.jsonl"
    os.mkfifo(fifo)  # no writer: reading it would wait forever
    for path, said in ((fifo, "is not a regular file"), (Path("/dev/zero"), "not a regular")):
        done, seconds = run_app(_bench(tiny_pair, path, tmp_path), timeout_s=60)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    "where", ["folder", "missing folder", "file in place of the folder", "a FIFO"]
)
def test_a_results_path_that_cannot_be_written_is_refused_before_the_bench_runs(
    tiny_pair: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """Before, the whole bench ran (an hour on a real pair) and then its results were lost
    to "[Errno 21] Is a directory" or "[Errno 2] No such file or directory"."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n')
    (tmp_path / "plain").write_text("a file")
    results = {
        "folder": tmp_path,
        "missing folder": tmp_path / "nowhere" / "out.json",
        "file in place of the folder": tmp_path / "plain" / "out.json",
        "a FIFO": tmp_path / "fifo.json",
    }[where]
    if where == "a FIFO":
        if sys.platform == "win32":
            pytest.skip("no FIFOs")
        os.mkfifo(results)  # as /dev/null would be: the write replaced it with a file
    args = _bench(tiny_pair, prompts, tmp_path)
    args[args.index("--json") + 1] = str(results)
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --json ") and len(err.strip().splitlines()) == 1, err
    assert str(results) in err and "Errno" not in err
    assert (tmp_path / "plain").read_text() == "a file"


def test_a_link_as_the_results_path_is_followed_and_kept(tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("symbolic links need a privilege on Windows")
    real = tmp_path / "results.json"
    real.write_text("{}")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_results(results_file(str(link)), '{"prompts": []}')
    assert link.is_symlink() and real.read_text() == '{"prompts": []}'


def test_results_that_cannot_be_written_are_kept_in_the_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "plain").write_text("a file put where the folder was during the run")
    with pytest.raises(SpecDeckError, match="they were kept in") as kept:
        write_results(tmp_path / "plain" / "out.json", '{"prompts": []}')
    path = Path(str(kept.value).rpartition("kept in ")[2])
    assert path.parent == tmp_path and path.read_text() == '{"prompts": []}'


def test_results_that_cannot_be_kept_anywhere_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no temporary folder"))
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(SpecDeckError, match="nor keep them in the temporary folder"):
        write_results(tmp_path / "plain" / "out.json", "{}")


def test_a_prompt_longer_than_the_labs_is_a_bench_prompt(tmp_path: Path) -> None:
    """``depth_prompts`` writes prompts of thousands of tokens for the bench; the Lab keeps
    its own shorter bound."""
    long = "def f():\n    return 1\n" * 2_000  # 44,000 characters
    path = tmp_path / "depth.jsonl"
    path.write_text(json.dumps({"id": "deep", "prompt": long}) + "\n")
    assert bench_prompts(path) == [{"id": "deep", "prompt": long}]
    with pytest.raises(SuiteError, match="longer than 16,000 characters"):
        load_jsonl(path)
