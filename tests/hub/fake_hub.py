"""A small fake Hugging Face Hub on 127.0.0.1 for tests.

It speaks the part of the Hub HTTP API that huggingface_hub 2.x uses for our features:
``/api/models`` search, ``/api/models/{repo}/tree/{rev}``, ``/api/models/{repo}/revision/{rev}``,
``/api/whoami-v2`` and ``/{repo}/resolve/{rev}/{file}`` (HEAD, GET, Range) with the ETag /
X-Linked-Etag / X-Linked-Size / X-Repo-Commit headers. It can answer 401 for a gated repo,
404, drop a connection part-way through a file, report a wrong sha256, slow down, and answer
a given status (503, 429 with ``Retry-After``…) to the next requests for a path (``fail_next``).

It can also be hostile (``FakeHub.hostile``, see :class:`Hostile`): endless bodies, a byte
every few seconds, wrong ranges, redirects elsewhere, raw listing bodies, endless pages.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Hostile:
    """Misbehaviours, keyed by file name (or repo id for listings)."""

    endless: set[str] = field(default_factory=set)  # 206/200 bodies that never end
    endless_errors: set[str] = field(default_factory=set)  # 404 with a body that never ends
    drip_s: dict[str, float] = field(default_factory=dict)  # one byte every N seconds
    drip_headers_s: dict[str, float] = field(default_factory=dict)  # the same, in the headers
    wrong_range: set[str] = field(default_factory=set)  # 206 always starting at byte 0
    content_length: dict[str, str] = field(default_factory=dict)  # raw Content-Length value
    gzip: set[str] = field(default_factory=set)  # claims Content-Encoding: gzip
    redirect: dict[str, str] = field(default_factory=dict)  # 302 to this URL
    linked_size: dict[str, str] = field(default_factory=dict)  # raw X-Linked-Size for HEAD
    no_sha: set[str] = field(default_factory=set)  # listed without an LFS sha256
    tree_body: dict[str, bytes] = field(default_factory=dict)  # raw listing answer per repo
    tree_next: dict[str, str] = field(default_factory=dict)  # Link: next page URL per repo
    search_body: bytes | None = None  # raw answer to every search
    endless_cap: int = 64 << 20  # an "endless" body stops here, to keep a failing test alive


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes | Path]  # a Path is served from disk (large real models)
    downloads: int = 0
    likes: int = 0
    token: str | None = None  # gated: this Bearer token is needed to resolve files
    wrong_sha: set[str] = field(default_factory=set)  # files whose reported sha256 is wrong

    def size(self, name: str) -> int:
        data = self.files[name]
        return data.stat().st_size if isinstance(data, Path) else len(data)

    def read(self, name: str, start: int, end: int) -> bytes:
        data = self.files[name]
        if isinstance(data, Path):
            with data.open("rb") as handle:
                handle.seek(start)
                return handle.read(end - start)
        return data[start:end]

    def sha256(self, name: str) -> str:
        data = self.files[name]
        real = _file_sha256(data) if isinstance(data, Path) else hashlib.sha256(data).hexdigest()
        return (
            hashlib.sha256(b"wrong" + real.encode()).hexdigest() if name in self.wrong_sha else real
        )


@lru_cache(maxsize=32)
def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Logged:
    method: str
    path: str
    range: str | None
    authorization: str | None


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.valid_tokens = {"hf_valid_test_token"}
        self.drop_after: dict[str, list[int]] = {}  # file name -> byte counts, one per GET
        # "GET /api/models/a/b/tree/main" -> (status, extra headers), one per request, then normal
        self.fail_next: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.chunk_delay_s = 0.0
        self.hostile = Hostile()
        self.sent: dict[str, int] = {}  # file name -> body bytes the client accepted
        self.log: list[Logged] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.hub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, repo: FakeRepo) -> FakeRepo:
        # the Hub stores each file's sha256; hashing a 400 MB file on the first request instead
        # held its response headers past the client's 30 s stall limit on a busy machine
        for data in repo.files.values():
            if isinstance(data, Path):
                _file_sha256(data)
        self.repos[repo.repo_id] = repo
        return repo

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def requests_for(self, name: str, method: str = "GET") -> list[Logged]:
        return [e for e in self.log if e.method == method and e.path.endswith("/" + name)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def hub(self) -> FakeHub:
        return self.server.hub  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch(head=True)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch(head=False)

    def _dispatch(self, head: bool) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        self.hub.log.append(
            Logged(self.command, path, self.headers.get("Range"), self.headers.get("Authorization"))
        )
        failures = self.hub.fail_next.get(f"{self.command} {path}")
        if failures:
            status, headers = failures.pop(0)
            return self._json({"error": f"HTTP {status} from the test Hub"}, status, headers)
        query = parse_qs(parts.query)
        if path == "/api/models":
            return self._search(query)
        if path == "/api/whoami-v2":
            return self._whoami()
        if path.startswith("/api/models/"):
            return self._repo_api(path.removeprefix("/api/models/"))
        if "/resolve/" in path:
            repo_id, _, rest = path.lstrip("/").partition("/resolve/")
            _rev, _, name = rest.partition("/")
            return self._resolve(repo_id, name, head)
        self._json({"error": "not found"}, 404)

    def _json(self, body: object, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def _search(self, query: dict[str, list[str]]) -> None:
        raw = self.hub.hostile.search_body
        if raw is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        text = query.get("search", [""])[0].lower()
        limit = int(query.get("limit", ["1000"])[0])
        hits = [r for r in self.hub.repos.values() if text in r.repo_id.lower()]
        if query.get("sort", [""])[0] == "downloads":
            hits.sort(key=lambda r: r.downloads, reverse=True)
        # Like the Hub: "gated" only when asked for with expand[]=gated, and then only the
        # expanded properties (and the id) come back.
        expand = query.get("expand[]", [])
        entries = []
        for r in hits[:limit]:
            full = {
                "id": r.repo_id,
                "_id": r.repo_id,
                "modelId": r.repo_id,
                "downloads": r.downloads,
                "likes": r.likes,
                "gated": "manual" if r.token else False,
                "private": False,
                "tags": ["gguf"],
                "library_name": "gguf",
            }
            if expand:
                entries.append({k: v for k, v in full.items() if k in (*expand, "id", "_id")})
            else:
                entries.append({k: v for k, v in full.items() if k != "gated"})
        self._json(entries)

    def _whoami(self) -> None:
        auth = self.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ")
        if token not in self.hub.valid_tokens:
            return self._error(401, "Unauthorized", "Invalid credentials in Authorization header")
        self._json(
            {
                "type": "user",
                "name": "tester",
                "auth": {
                    "type": "access_token",
                    "accessToken": {"displayName": "specdeck-test", "role": "read"},
                },
            }
        )

    def _repo_api(self, rest: str) -> None:
        for marker in ("/tree/", "/revision/"):
            if marker in rest:
                repo_id = rest.partition(marker)[0]
                break
        else:
            return self._error(404, "RepoNotFound", "Repository not found")
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        hostile = self.hub.hostile
        if marker == "/tree/" and repo_id in hostile.tree_body:
            body = hostile.tree_body[repo_id]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if repo_id in hostile.tree_next:
                self.send_header("Link", f'<{hostile.tree_next[repo_id]}>; rel="next"')
            self.end_headers()
            self.wfile.write(body)
            return None
        if marker == "/revision/":
            return self._json(
                {
                    "id": repo_id,
                    "sha": COMMIT,
                    "gated": bool(repo.token),
                    "downloads": repo.downloads,
                    "private": False,
                    "siblings": [{"rfilename": n} for n in repo.files],
                }
            )
        self._json(
            [
                {
                    "type": "file",
                    "oid": hashlib.sha1(name.encode()).hexdigest(),
                    "size": repo.size(name),
                    "path": name,
                    **(
                        {}
                        if name in hostile.no_sha
                        else {
                            "lfs": {
                                "oid": repo.sha256(name),
                                "size": repo.size(name),
                                "pointerSize": 134,
                            }
                        }
                    ),
                }
                for name in sorted(repo.files)
            ],
            headers={"Link": f'<{hostile.tree_next[repo_id]}>; rel="next"'}
            if repo_id in hostile.tree_next
            else None,
        )

    def _resolve(self, repo_id: str, name: str, head: bool) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        if repo.token and self.headers.get("Authorization") != f"Bearer {repo.token}":
            return self._error(
                401,
                "GatedRepo",
                f"Access to model {repo_id} is restricted. You must have access "
                "to it and be authenticated to access it. Please log in.",
            )
        hostile = self.hub.hostile
        if name in hostile.drip_headers_s and not head:
            status = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n" + b"X: y\r\n" * 500
            self.close_connection = True
            return self._drip(name, status, hostile.drip_headers_s[name])
        if name in hostile.redirect:
            self.send_response(302)
            self.send_header("Location", hostile.redirect[name])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if name in hostile.endless_errors:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            return None if head else self._send_endless(name, b"x")
        if name not in repo.files:
            return self._error(404, "EntryNotFound", f'{name} does not exist on "main"')
        size = repo.size(name)
        start, end = 0, size - 1
        status = 200
        requested = self.headers.get("Range")
        if requested and requested.startswith("bytes="):
            first, _, last = requested.removeprefix("bytes=").partition("-")
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        sha = repo.sha256(name)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        endless = name in hostile.endless and not head
        if endless:
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header(
                "Content-Length", hostile.content_length.get(name, str(end - start + 1))
            )
        if name in hostile.gzip:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{sha}"')
        self.send_header("X-Linked-Etag", f'"{sha}"')
        self.send_header("X-Linked-Size", hostile.linked_size.get(name, str(size)))
        self.send_header("X-Repo-Commit", COMMIT)
        if status == 206:
            first = 0 if name in hostile.wrong_range else start
            self.send_header("Content-Range", f"bytes {first}-{end}/{size}")
        self.end_headers()
        if head:
            return
        body = repo.read(name, start, end + 1)
        if endless:
            return self._send_endless(name, body)
        if name in hostile.drip_s:
            return self._drip(name, body, hostile.drip_s[name])
        drops = self.hub.drop_after.get(name)
        limit = drops.pop(0) if drops else None
        self._send_body(repo.read(name, start, end + 1), limit)

    def _count(self, name: str, n: int) -> None:
        self.hub.sent[name] = self.hub.sent.get(name, 0) + n

    def _send_endless(self, name: str, first: bytes) -> None:
        """``first``, then zeros until the client hangs up (or the cap, to spare the test)."""
        filler = bytes(64 << 10)
        piece = first
        try:
            while self.hub.sent.get(name, 0) < self.hub.hostile.endless_cap:
                self.wfile.write(piece)
                self.wfile.flush()
                self._count(name, len(piece))
                piece = filler
        except OSError:
            pass
        self.close_connection = True

    def _drip(self, name: str, body: bytes, every_s: float) -> None:
        try:
            for i in range(len(body)):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                self._count(name, 1)
                time.sleep(every_s)
        except OSError:
            pass
        self.close_connection = True

    def _send_body(self, body: bytes, limit: int | None) -> None:
        sent, chunk = 0, 16 << 10
        while sent < len(body):
            piece = body[sent : sent + chunk]
            if limit is not None and sent + len(piece) > limit:
                self.wfile.write(piece[: max(0, limit - sent)])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            try:
                self.wfile.write(piece)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            sent += len(piece)
            if self.hub.chunk_delay_s:
                time.sleep(self.hub.chunk_delay_s)
