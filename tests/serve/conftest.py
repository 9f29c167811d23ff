"""Fixtures for ``python -m app serve``: the real server in a child process on a free port.

Each server is the command a person runs (``python -m app serve ... --port 0``), with the
real engine on a tiny synthetic pair that carries a ChatML template (or the real SmolLM2
pair); tests talk to it over 127.0.0.1 with the official ``openai`` client or raw sockets.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from app.remote.client import tls_context
from tests.conftest import CHATML

ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 120.0
READY = re.compile(r"serving (?P<model>\S+) on (?P<url>http://\S+/v1)")


def openai_client(base_url: str, **kwargs: object):  # noqa: ANN201
    """The official client, as a caller uses it, with one TLS context for the whole session:
    each new client would read the CA bundle again (50 ms), for a server on plain http."""
    import openai

    options: dict[str, object] = {"api_key": "unused", "max_retries": 0, "timeout": 120.0}
    options.update(kwargs)
    options.setdefault("http_client", openai.DefaultHttpxClient(verify=tls_context()))
    return openai.OpenAI(base_url=base_url, **options)


def app_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SPECDECK_API_KEY", None)
    return env


class ServeProcess:
    """``python -m app serve`` in a child process; ``url`` once it says it is serving."""

    def __init__(self, args: Sequence[str], log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"serve-{time.monotonic_ns()}.err"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", "0", *args],
            cwd=ROOT,
            env=app_env(),
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        threading.Thread(target=lambda: [lines.put(x) for x in stdout], daemon=True).start()
        deadline = time.monotonic() + READY_SECONDS
        while True:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"the server did not start:\n{self.stderr()}") from None
                continue
            found = READY.search(line)
            if found:
                self.url, self.model = found["url"], found["model"]
                self.host, port = self.url.removeprefix("http://").split("/")[0].split(":")
                self.port = int(port)
                return

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def client(self, **kwargs: object):
        return openai_client(self.url, **kwargs)

    def stop(self, timeout: float = 20.0, sig: int = signal.SIGINT) -> int:
        """Ctrl+C, as a person stops it (or ``sig``, as a service manager does); the exit
        code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def close(self) -> None:
        self.stop()
        self._stderr.close()


@pytest.fixture(scope="session")
def chat_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny target and draft of ``tiny_pair``, with a ChatML template."""
    from app.devtools.test_models.synthetic import write_tiny_llama

    folder = tmp_path_factory.mktemp("serve-pair")
    target = write_tiny_llama(folder / "target.gguf", seed=1, chat_template=CHATML)
    draft = write_tiny_llama(
        folder / "draft.gguf", seed=2, noise_from=1, noise=0.15, chat_template=CHATML
    )
    return target, draft


def pair_args(pair: tuple[Path, Path], *extra: str) -> list[str]:
    target, draft = pair
    return ["--target", str(target), "--draft", str(draft), "--threads", "1", *extra]


@pytest.fixture(scope="session")
def serve_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-logs")


@pytest.fixture(scope="session")
def tiny_server(chat_pair: tuple[Path, Path], serve_logs: Path) -> Iterator[ServeProcess]:
    """The tiny pair behind the server; end-of-generation ignored so answers run their length."""
    server = ServeProcess(pair_args(chat_pair, "--ignore-eos", "--max-tokens", "48"), serve_logs)
    yield server
    server.close()


class HeldEngine:
    """An engine that takes every call and answers none: each generation request keeps its
    connection busy until the client leaves (the HTTP layer's side only, no model)."""

    def __init__(self) -> None:
        self.tickets: list[object] = []

    def submit(self, call, deliver):
        from app.serve.tickets import Ticket

        ticket = Ticket(call, deliver)
        self.tickets.append(ticket)
        return ticket

    def cancel(self, ticket) -> None:
        ticket.cancelled = True

    def stats(self):
        from app.serve.tickets import ServingStats

        return ServingStats(0, 0, 0, 0, False, None, None)


class BareServer:
    """The real HTTP server (``ServerThread``, uvicorn, the guarded protocol) on 127.0.0.1
    in this process, in front of a ``HeldEngine``."""

    def __init__(
        self, concurrency: int, api_key: str | None = None, body_seconds: float | None = None
    ) -> None:
        from app.serve.http import BODY_SECONDS, build_app
        from app.serve.params import Sampling
        from app.serve.server import Binding, ServerThread, bind, host_names

        sock = bind(Binding("127.0.0.1", 0, api_key))
        self.host, self.port = sock.getsockname()[:2]
        self.engine = HeldEngine()
        app = build_app(
            self.engine,
            model="held",
            defaults=Sampling(),
            hosts=host_names("127.0.0.1", self.port),
            api_key=api_key,
            body_seconds=BODY_SECONDS if body_seconds is None else body_seconds,
        )
        self._thread = ServerThread(app, sock, concurrency=concurrency)
        self._thread.start()

    def close(self) -> None:
        from app.serve.tickets import Cancelled

        for ticket in self.engine.tickets:  # what it held ends, as a stopped engine's does
            ticket.deliver(Cancelled())
        assert self._thread.stop(5.0)


@pytest.fixture
def bare_server() -> Iterator[BareServer]:
    """Room for 8 connections, 2 from one address."""
    server = BareServer(concurrency=8)
    yield server
    server.close()
