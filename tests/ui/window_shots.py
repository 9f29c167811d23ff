"""Offscreen screenshots of issue 20's window fixes (a developer script, not a test):
``python -m tests.ui.window_shots OUT_DIR``.

- ``first-start-1024x640.png``: the first window on a 1024x640 screen (a child process on an
  offscreen screen of that size, as ``tests.ui.first_window`` starts it);
- ``stranded-pair-refused.png``: with the demo pair (Qwen2.5-Coder F32 + Q2_K) loaded,
  Change pair → Local GGUF files… with the Qwen F32 target and the SmolLM2 draft: the
  refusal over the window, which still has the demo pair;
- ``stranded-pair-answered.png``: the same window answering afterwards with that pair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_home = tempfile.mkdtemp(prefix="specdeck-shots-")
os.environ["SPECDECK_CONFIG_DIR"] = f"{_home}/config"
os.environ["SPECDECK_DATA_DIR"] = f"{_home}/data"

from PySide6.QtCore import QPoint  # noqa: E402
from PySide6.QtGui import QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from app.devtools.screenshots import settle, wait  # noqa: E402
from app.engine.config import DraftSource  # noqa: E402
from app.models.shipped import qwen_coder_pair, smollm2_pair  # noqa: E402
from app.store.settings import Settings, SettingsStore  # noqa: E402
from tests.ui.dialogs import Dialogs, pick, press  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = Settings(max_tokens=48, n_ctx=2048, temperature=0.0, seed=42, n_threads=2)


def first_start(out: Path, width: int, height: int) -> None:
    config = out / f"screen-{width}x{height}.json"
    screen = {"name": "s", "x": 0, "y": 0, "width": width, "height": height}
    screen |= {"logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}
    config.write_text(json.dumps({"screens": [screen]}))
    home = tempfile.mkdtemp(prefix="specdeck-first-")
    env = dict(
        os.environ,
        QT_QPA_PLATFORM=f"offscreen:configfile={config}",
        SPECDECK_CONFIG_DIR=f"{home}/config",
        SPECDECK_DATA_DIR=f"{home}/data",
    )
    shot = out / f"first-start-{width}x{height}.png"
    result = subprocess.run(
        [sys.executable, "-m", "tests.ui.first_window", str(shot)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    config.unlink()
    if result.returncode != 0:
        raise SystemExit(result.stderr[-2000:])
    print("saved", shot, result.stdout.strip().splitlines()[-1], flush=True)


def over(window: QWidget, box: QWidget, path: Path) -> None:
    """The window with a dialog over its centre, as a person sees them."""
    image = window.grab().toImage()
    painter = QPainter(image)
    corner = QPoint((image.width() - box.width()) // 2, (image.height() - box.height()) // 3)
    painter.drawPixmap(corner, box.grab())
    painter.end()
    image.save(str(path))
    print("saved", path, flush=True)


def stranded(out: Path) -> None:
    from app.ui.main_window import MainWindow

    qwen_target, qwen_draft = qwen_coder_pair()
    _, smol_draft = smollm2_pair()
    SettingsStore().save(SETTINGS)
    window = MainWindow(autoload=False)
    window.resize(1024, 640)
    window.show()
    settle()
    window.load_pair(str(qwen_target), str(qwen_draft), DraftSource.MODEL)
    if wait(window.pair_loaded) is None:
        raise SystemExit("the demo pair did not load")
    settle()

    def shoot_and_cancel(box: QWidget) -> None:
        settle(10)
        over(window, box, out / "stranded-pair-refused.png")
        press("Cancel")(box)

    with Dialogs(pick(qwen_target), pick(smol_draft), shoot_and_cancel):
        window.change_pair(files=True)
    settle()
    window.chat.input.setPlainText("Write a Python function that reverses a string.")
    window.chat.input.submit()
    if wait(window.answer_finished) is None:
        raise SystemExit("no answer")
    settle(40)
    path = out / "stranded-pair-answered.png"
    window.grab().save(str(path))
    print("saved", path, flush=True)
    window.close()


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication([])
    app.setStyle("Fusion")
    first_start(out, 1024, 640)
    started = time.perf_counter()
    stranded(out)
    print(f"stranded-pair case took {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
