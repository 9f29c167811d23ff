"""An engine process starts whatever the temporary folder: on Linux the fork server that
starts them listens on a socket there, and a long TMPDIR makes that socket's path longer
than a Unix socket's may be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARENT = (
    "import sys\n"
    "from app.engine.config import ModelSpec\n"
    "from app.engine.process.host import EngineHost, LoadRequest, engine_start_method\n"
    "host = EngineHost()\n"
    "info = host.load(LoadRequest(ModelSpec(sys.argv[1], n_ctx=256), None))\n"
    "print(engine_start_method().get_start_method(), info.n_ctx, flush=True)\n"
    "host.close()\n"
)
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path on Linux
# what the fork server adds to TMPDIR for its socket: /pymp-XXXXXXXX/listener-XXXXXXXX
SOCKET_SUFFIX = len("/pymp-XXXXXXXX/listener-XXXXXXXX")


def _load_in_a_new_app(model: Path, temp: Path | None = None) -> list[str]:
    """How a new app's engine processes start, and the loaded model's context, with TMPDIR
    at ``temp`` (None: as it is)."""
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if temp is not None:
        env.update(TMPDIR=str(temp), TEMP=str(temp), TMP=str(temp))
    done = subprocess.run(
        [sys.executable, "-c", PARENT, str(model)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def _fork_server_socket_is_a_path() -> bool:
    """Whether this Python's fork server listens on a socket with a path (not in Linux's
    abstract namespace, which has no folder)."""
    if not sys.platform.startswith("linux"):
        return False
    from multiprocessing.connection import arbitrary_address

    return not str(arbitrary_address("AF_UNIX")).startswith("\0")


def test_an_engine_starts_under_a_temporary_folder_too_long_for_the_fork_servers_socket(
    tmp_path: Path, tiny_pair: tuple[Path, Path]
) -> None:
    # a folder whose socket path would be 9 bytes past the limit (8, and the "/" after tmp_path)
    name = "t" * max(1, SOCKET_PATH_MAX - SOCKET_SUFFIX - len(str(tmp_path)) + 8)
    folder = tmp_path / name
    folder.mkdir()
    assert len(str(folder)) + SOCKET_SUFFIX > SOCKET_PATH_MAX
    method, n_ctx = _load_in_a_new_app(tiny_pair[0], folder)
    assert n_ctx == "256"
    if _fork_server_socket_is_a_path():  # so it could not listen there: started afresh
        assert method == "spawn"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")
def test_engines_keep_the_fork_server_under_an_ordinary_temporary_folder(
    tiny_pair: tuple[Path, Path],
) -> None:
    assert _load_in_a_new_app(tiny_pair[0]) == ["forkserver", "256"]
