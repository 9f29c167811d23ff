"""Offscreen screenshots of the main window answering with real models (a developer script,
not a test): ``python -m app.devtools.screenshots OUT_DIR [case ...]``.

Cases:
- ``code``: Qwen2.5-Coder F32 + Q2_K at T = 0, a code answer, light and dark, 1024x640 and
  1920x1080, then with the target-only comparison unfolded;
- ``sampled``: the same pair at T = 0.8 (rejection sampling: texts differ by design);
- ``divergence``: SmolLM2 F16 + Q4_1 at T = 0 with a fixed draft length of 8, a prompt where
  batched arithmetic flips a near-tie (measured: the answers part at token 75, margin
  0.0012 on this machine; another CPU may part elsewhere or not at all, and the verdict says
  which);
- ``continue``: an answer cut off at Max tokens, with Continue offered;
- ``streaming``: the Qwen pair's code answer while it streams into its message (light, then
  dark: a theme change mid-answer), and once it is done;
- ``small``: SmolLM2 F16 + Q4_1 at 1024x640 with the comparison open, while a long answer
  streams, once it is written, and the charts dock.
The wizard's pages are shot by its own tests: ``SPECDECK_SCREENSHOTS=DIR pytest
tests/wizard``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_home = tempfile.mkdtemp(prefix="specdeck-shots-")
os.environ["SPECDECK_CONFIG_DIR"] = f"{_home}/config"
os.environ["SPECDECK_DATA_DIR"] = f"{_home}/data"

from PySide6.QtCore import QEventLoop, QTimer, SignalInstance  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.engine.config import DraftSource  # noqa: E402
from app.models.shipped import qwen_coder_pair, smollm2_pair  # noqa: E402
from app.store.settings import Settings, SettingsStore  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from app.ui.window_layout import LAYOUT_FILE  # noqa: E402

SIZES = ((1920, 1080), (1024, 640))  # wide first: a narrow window tabs its docks for good
PALINDROME = "Write a Python function that checks whether a string is a palindrome."
BASE = Settings(max_tokens=64, n_ctx=2048, temperature=0.0, seed=42, n_threads=2)


def wait(signal: SignalInstance, timeout_s: float = 900) -> object:
    loop = QEventLoop()
    got: list[object] = []

    def arrived(*args: object) -> None:
        got.append(args)
        loop.quit()

    signal.connect(arrived)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    return got[0] if got else None


def settle(rounds: int = 25) -> None:
    for _ in range(rounds):
        QApplication.processEvents()
        time.sleep(0.01)


class Shooter:
    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)

    def window(self, settings: Settings, target: Path, draft: Path) -> MainWindow:
        store = SettingsStore()
        store.save(settings)
        # each case lays out as a first start: not as the previous case's window was left
        (store.directory / LAYOUT_FILE).unlink(missing_ok=True)
        window = MainWindow(autoload=False)
        window.resize(1920, 1080)
        window.show()
        settle()
        window.load_pair(str(target), str(draft), DraftSource.MODEL)
        if wait(window.pair_loaded) is None:
            raise SystemExit("the pair did not load")
        return window

    def ask(self, window: MainWindow, prompt: str) -> None:
        window.new_chat()  # the window reopens the latest conversation: each case starts anew
        settle()
        window.chat.input.setPlainText(prompt)
        window.chat.input.submit()
        if wait(window.answer_finished) is None:
            raise SystemExit("no answer")
        settle(40)

    def save(
        self,
        window: MainWindow,
        name: str,
        sizes: tuple[tuple[int, int], ...] = SIZES,
        themes: tuple[str, ...] = ("light", "dark"),
    ) -> None:
        for width, height in sizes:
            window.resize(width, height)
            window.share_width()  # the first-run layout a window of this size gets
            settle()
            for theme in themes:
                window.set_theme(theme)
                settle()
                path = self.out / f"{name}-{width}x{height}-{theme}.png"
                window.grab().save(str(path))
                print("saved", path, flush=True)
        window.set_theme("light")
        settle()


def small(shooter: Shooter, pair: tuple[Path, Path]) -> MainWindow:
    """At 1024x640 the answer being written stays in view with the comparison open and a
    guard banner shown (banners give way, the buttons stand in two columns), and once it is
    written the charts dock's short plots label their ticks apart."""
    window = shooter.window(replace(BASE, max_tokens=200), *pair)
    window.new_chat()
    settle()
    window.resize(1024, 640)
    window.share_width()
    window.chat.set_comparison_open(True)
    window.chat.input.setPlainText("Write a long story about a cat who learns to code.")
    window.chat.input.submit()
    began = time.monotonic()
    while len(window.chat.spec_view.events) < 120 and time.monotonic() - began < 600:
        settle(5)
    window.grab().save(str(shooter.out / "small-1024x640-streaming.png"))
    if window.client.generating and wait(window.answer_finished) is None:
        raise SystemExit("no answer")
    settle(40)
    window.grab().save(str(shooter.out / "small-1024x640-written.png"))
    window.charts_dock.raise_()
    settle()
    window.grab().save(str(shooter.out / "small-1024x640-charts.png"))
    print("saved", shooter.out / "small-1024x640-*.png", flush=True)
    return window


CASES = ("code", "sampled", "divergence", "continue", "streaming", "small")


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-") or not set(argv[1:]) <= set(CASES):
        # usage before any window: not a folder named "--help", nor shots before a typo
        asked = argv[:1] in (["-h"], ["--help"])
        print(__doc__, file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    out = Path(argv[0])
    cases = argv[1:] or ["code", "sampled", "divergence", "continue"]
    app = QApplication.instance() or QApplication([])
    app.setStyle("Fusion")  # type: ignore[attr-defined]
    shooter = Shooter(out)
    qwen, smol = qwen_coder_pair(), smollm2_pair()
    for case in cases:
        if case == "code":
            window = shooter.window(BASE, *qwen)
            shooter.ask(window, PALINDROME)
            shooter.save(window, "window")
            window.chat.set_comparison_open(True)
            shooter.save(window, "chat-code-answer-comparison", themes=("light",))
        elif case == "sampled":
            settings = replace(BASE, temperature=0.8, max_tokens=48)
            window = shooter.window(settings, *qwen)
            shooter.ask(window, "Write a four-line poem about the sea.")
            window.chat.set_comparison_open(True)
            shooter.save(window, "sampled-answer-t0.8", sizes=((1024, 640),))
        elif case == "divergence":
            settings = replace(BASE, max_tokens=96, draft_adaptive=False, draft_max=8)
            window = shooter.window(settings, *smol)
            shooter.ask(window, "Explain recursion to a child.")
            window.chat.set_comparison_open(True)
            shooter.save(window, "divergence-t0", sizes=SIZES)
        elif case == "continue":
            settings = replace(BASE, max_tokens=24)
            window = shooter.window(settings, *qwen)
            shooter.ask(window, "List the planets of the solar system with one fact each.")
            shooter.save(window, "continue-offered", sizes=((1024, 640),), themes=("light",))
        elif case == "streaming":
            window = shooter.window(replace(BASE, max_tokens=160), *qwen)
            window.new_chat()
            settle()
            window.chat.input.setPlainText(PALINDROME)
            window.chat.input.submit()
            began = time.monotonic()
            while len(window.chat.spec_view.events) < 40 and time.monotonic() - began < 600:
                settle(5)
            shooter.save(window, "streaming-message")
            if window.client.generating and wait(window.answer_finished) is None:
                raise SystemExit("no answer")
            settle(40)
            shooter.save(window, "streamed-message-done", sizes=((1024, 640),), themes=("light",))
        else:
            window = small(shooter, smol)
        window.close()
        settle()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
