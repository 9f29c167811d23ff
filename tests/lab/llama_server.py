"""Start llama.cpp's own ``llama-server`` (built from the vendored sources) on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def llama_server(
    target: Path, draft: Path | None, log: Path, *, spec_type: str = "draft-simple"
) -> Iterator[str]:
    """A running server's base URL; with ``draft`` it speculates (``spec_type``, up to 8;
    ``draft-mtp`` with a Gemma 4 assistant as the draft)."""
    from app.devtools.reference import llama_cpp_tool

    binary = llama_cpp_tool("llama-server")
    port = free_port()
    spec = []
    if draft is not None:
        spec = ["-md", str(draft), "--spec-type", spec_type, "--spec-draft-n-max", "8"]
        spec += ["--spec-draft-n-min", "0", "-ngld", "0"]
    command = [str(binary), "-m", str(target), *spec, "--host", "127.0.0.1", "--port", str(port)]
    command += ["-c", "1024", "-t", "1", "-ngl", "0", "--no-webui", "--parallel", "1"]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(f"llama-server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"llama-server did not start: {log.read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.25)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
