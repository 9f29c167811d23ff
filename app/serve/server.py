"""Binding rules and the uvicorn server around ``app.serve.http``.

The server listens on 127.0.0.1 unless told otherwise; any address that is not loopback
needs an API key, or it does not start: an open port on a network must not hand a model
(and the machine's compute) to whoever finds it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from app.errors import SpecDeckError
from app.serve.connections import guarded_protocol
from app.serve.defaults import DEFAULT_HOST, DEFAULT_PORT


@dataclass(frozen=True)
class Binding:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_binding(binding: Binding) -> None:
    """Refuse a non-loopback address without an API key, and nonsense ports."""
    if binding.api_key is not None and not binding.api_key.strip():
        raise SpecDeckError("the API key is empty")
    if not 0 <= binding.port <= 65535:
        raise SpecDeckError(f"port {binding.port} is outside 0..65535")
    if not is_loopback(binding.host) and not binding.api_key:
        raise SpecDeckError(
            f"refusing to serve on {binding.host} without an API key: anyone who can reach "
            "that address could use the model. Add --api-key KEY (clients then send it as "
            "'Authorization: Bearer KEY'), or serve on 127.0.0.1"
        )


def bind(binding: Binding) -> socket.socket:
    """The listening socket, bound now (so a taken port fails before the models load)."""
    check_binding(binding)
    host = binding.host.strip("[]")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, binding.port, type=socket.SOCK_STREAM
        )[0]
    except socket.gaierror as exc:
        raise SpecDeckError(f"cannot serve on {binding.host}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise SpecDeckError(
            f"cannot listen on {binding.host}:{binding.port}: {exc.strerror or exc}"
        ) from None
    return sock


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def host_names(host: str, port: int) -> frozenset[str] | None:
    """The ``Host`` header values a request may carry, lower case: the loopback names with
    the port on a loopback address, the configured name on another; None (any) on a
    wildcard address (0.0.0.0, ::), whose names are not known here and where the API key,
    required there, keeps web pages out.

    A web page the user visits can send requests to 127.0.0.1, and through DNS rebinding
    (its own name resolving to 127.0.0.1) read the answers; either way the browser's
    ``Host`` names the page's site, which is refused."""
    bare = host.strip("[]").lower()
    if bare in ("0.0.0.0", "::", ""):
        return None
    if is_loopback(bare):
        names: tuple[str, ...] = LOOPBACK_NAMES
    else:
        names = (f"[{bare}]" if ":" in bare else bare,)
    allowed = {f"{name}:{port}" for name in names}
    if port == 80:  # the default port may go unnamed
        allowed.update(names)
    return frozenset(allowed)


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def run(
    app: object, sock: socket.socket, *, concurrency: int, announce: Callable[[], None]
) -> None:
    """Call ``announce`` (the line that says the server is up), then serve on the bound
    socket until SIGINT/SIGTERM.

    The socket listens already, so a client that connects before uvicorn starts waits in the
    backlog rather than being refused. Ctrl+C and SIGTERM stop the server from before the
    announcement on: between it and uvicorn's own handlers, Python's default SIGINT handler
    would raise KeyboardInterrupt wherever the interpreter was, and inside a weakref or GC
    callback that exception is only printed and lost, so the server went on serving.
    """
    server = uvicorn.Server(_config(app, concurrency, grace=3))

    def stop(sig: int, frame: object) -> None:
        server.handle_exit(sig, None)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        announce()
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with contextlib.suppress(OSError):
            sock.close()


class ServerThread:
    """uvicorn on its own thread (the window's way to serve): ``stop`` ends it in bounded
    time. Signals stay with the main thread; uvicorn installs no handlers off it."""

    def __init__(self, app: object, sock: socket.socket, *, concurrency: int) -> None:
        self._sock = sock
        self._server = uvicorn.Server(_config(app, concurrency, grace=1))
        self._thread = threading.Thread(target=self._run, name="specdeck-serve-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        finally:
            with contextlib.suppress(OSError):
                self._sock.close()

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop listening and end the thread; True when it ended within ``timeout``."""
        self._server.should_exit = True
        if not self._thread.is_alive():
            with contextlib.suppress(OSError):
                self._sock.close()
            return True
        self._thread.join(timeout)
        if self._thread.is_alive():  # a connection outlived the grace: drop it
            self._server.force_exit = True
            self._thread.join(0.5)
        return not self._thread.is_alive()


def _config(app: object, concurrency: int, *, grace: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        # uvicorn's pure-Python h11 protocol, by class (so a frozen bundle finds it), with a
        # header deadline and room made by closing idle connections: past ``concurrency``
        # connections (a quarter of that from one address) the oldest idle one goes, and
        # only when none is idle does a new one get 503 (``app.serve.connections``)
        http=guarded_protocol(concurrency, concurrency // 4),
        loop="asyncio",
        ws="none",
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=grace,
    )
