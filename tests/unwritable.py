"""A folder in which this process cannot create files, even as root.

As a normal user the folder is made read-only (mode 0555). Root ignores permission bits, so
there the folder is made immutable (``chattr +i``), which refuses new files to root too; where
neither works the test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def make_unwritable(folder: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("read-only folders are not enforced by mode bits on Windows")
    if _as_root():
        chattr = shutil.which("chattr")
        done = chattr and subprocess.run([chattr, "+i", str(folder)], capture_output=True)
        if not done or done.returncode != 0:
            pytest.skip("running as root and chattr +i is not available to refuse writes")
    else:
        folder.chmod(0o555)
    probe = folder / f".probe-{uuid.uuid4().hex}"
    try:
        probe.write_text("x")
    except OSError:
        return
    probe.unlink()
    make_writable(folder)
    pytest.skip(f"{folder} stays writable for this process (file system ignores it)")


def make_writable(folder: Path) -> None:
    if _as_root():
        chattr = shutil.which("chattr")
        if chattr:
            subprocess.run([chattr, "-i", str(folder)], capture_output=True, check=False)
    else:
        folder.chmod(0o755)


@contextmanager
def unwritable(folder: Path) -> Iterator[Path]:
    """``folder`` refuses new files inside the block; it is writable again afterwards."""
    make_unwritable(folder)
    try:
        yield folder
    finally:
        make_writable(folder)
