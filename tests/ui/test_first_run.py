"""First start with no pair: the Hub is probed without blocking; offline -> demo pair."""

from __future__ import annotations

import huggingface_hub.constants as hub_constants


def test_first_start_offline_loads_demo_pair(make_window, qtbot, monkeypatch) -> None:
    # a closed local port: the probe fails at once, and nothing leaves this machine
    monkeypatch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:9")
    window = make_window(first_run=True)
    demo_requests: list[bool] = []
    monkeypatch.setattr(window, "load_demo", lambda: demo_requests.append(True) or 0)
    qtbot.waitUntil(lambda: bool(demo_requests), timeout=10_000)
    # news, not a failure: the info banner says it, the error banner (red) stays hidden
    assert window.chat.notes_banner.isVisible() and window.chat.error_banner.isHidden()
    assert "cannot be reached" in window.chat.notes_banner.text()


def test_first_start_does_nothing_when_a_pair_is_known(make_window, qtbot, tiny_pair) -> None:
    from app.store.settings import Settings

    target, draft = tiny_pair
    window = make_window(
        Settings(target_path=str(target), draft_path=str(draft), n_threads=1), first_run=True
    )
    assert getattr(window, "_probe", None) is None
    qtbot.waitUntil(lambda: window.loaded is not None, timeout=30_000)
