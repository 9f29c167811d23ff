"""Retries by huggingface_hub's rules, against the fake Hub: what is retried, how long it waits,
and that a cancel or a deadline still ends the wait."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import pytest

from app.models.downloads import DownloadCancelled, Downloader
from app.models.hub import HubError, list_gguf_files, read_remote_header, search_models
from app.models.hub_http import RetryPolicy, TransferCancelled, TransferLimits
from tests.hub.fake_hub import FakeHub

pytestmark = pytest.mark.fast  # the fast tier: pytest -m fast

BIG = "big-Q8_0.gguf"
TREE = "GET /api/models/acme/Big-GGUF/tree/main"
RESOLVE = f"/acme/Big-GGUF/resolve/main/{BIG}"
QUICK = RetryPolicy(first_wait_s=0.05, max_wait_s=0.2)


def _limits(**changes: object) -> TransferLimits:
    return TransferLimits(**{"deadline_s": 30.0, "retry": QUICK, **changes})  # type: ignore[arg-type]


def _count(hub: FakeHub, key: str) -> int:
    method, path = key.split(" ", 1)
    return sum(1 for e in hub.log if e.method == method and e.path == path)


def test_a_listing_answered_503_is_asked_again(populated_hub: FakeHub) -> None:
    populated_hub.fail_next[TREE] = [(503, {}), (502, {})]
    groups = list_gguf_files("acme/Big-GGUF", limits=_limits())
    assert {g.quant for g in groups} == {"Q8_0", "Q4_K_M"}
    assert _count(populated_hub, TREE) == 3


def test_a_search_answered_429_waits_as_the_server_asks(populated_hub: FakeHub) -> None:
    populated_hub.fail_next["GET /api/models"] = [(429, {"Retry-After": "1"})]
    began = time.monotonic()
    hits = search_models("Big", limits=_limits(retry=RetryPolicy(first_wait_s=0.05)))
    assert [h.repo_id for h in hits] == ["acme/Big-GGUF"]
    assert time.monotonic() - began >= 0.95  # Retry-After: 1, not the 0.05 s first wait


def test_a_header_read_rides_over_a_5xx_on_a_range_request(populated_hub: FakeHub) -> None:
    populated_hub.fail_next[f"GET {RESOLVE}"] = [(500, {}), (504, {})]
    header = read_remote_header("acme/Big-GGUF", BIG, limits=_limits())
    assert len(header.tensors) > 0
    assert _count(populated_hub, f"GET {RESOLVE}") >= 3


def test_a_header_read_dropped_mid_body_is_asked_again(populated_hub: FakeHub) -> None:
    populated_hub.drop_after[BIG] = [100]  # the first range answer stops after 100 bytes
    header = read_remote_header("acme/Big-GGUF", BIG, limits=_limits())
    assert len(header.tensors) > 0
    assert populated_hub.requests_for(BIG)[0].range == populated_hub.requests_for(BIG)[1].range


def test_an_unreachable_hub_is_said_at_once_not_after_a_backoff(closed_port: str) -> None:
    began = time.monotonic()
    with pytest.raises(HubError, match="cannot reach the Hugging Face Hub"):
        list_gguf_files("acme/Big-GGUF", endpoint=closed_port, limits=TransferLimits())
    assert time.monotonic() - began < 0.9  # huggingface_hub's schedule would wait 1+2+4+8+8 s


def test_errors_the_hub_would_not_retry_are_not_retried(populated_hub: FakeHub) -> None:
    populated_hub.fail_next[TREE] = [(403, {}), (403, {})]
    with pytest.raises(HubError, match="HTTP 403"):
        list_gguf_files("acme/Big-GGUF", limits=_limits())
    assert _count(populated_hub, TREE) == 1


def test_retries_give_up_after_the_policy_s_count(populated_hub: FakeHub) -> None:
    populated_hub.fail_next[TREE] = [(503, {})] * 10
    with pytest.raises(HubError, match="HTTP 503"):
        list_gguf_files("acme/Big-GGUF", limits=_limits(retry=RetryPolicy(2, 0.01, 0.01)))
    assert _count(populated_hub, TREE) == 3


def test_a_huge_retry_after_does_not_outlive_the_deadline(populated_hub: FakeHub) -> None:
    """huggingface_hub's http_backoff would sleep 86,401 s here; the job's deadline holds."""
    populated_hub.fail_next[TREE] = [(503, {"Retry-After": "86400"})] * 10
    began = time.monotonic()
    with pytest.raises(HubError, match="HTTP 503"):
        list_gguf_files("acme/Big-GGUF", limits=TransferLimits(deadline_s=3.0))
    took = time.monotonic() - began
    assert took < 3.5
    # the wait is capped at RetryPolicy.max_wait_s (8 s), which no longer fits in 3 s
    assert _count(populated_hub, TREE) == 1


def test_a_cancel_ends_a_retry_wait_at_once(populated_hub: FakeHub) -> None:
    populated_hub.fail_next[TREE] = [(503, {"Retry-After": "5"})] * 10
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    began = time.monotonic()
    with pytest.raises(TransferCancelled):
        list_gguf_files("acme/Big-GGUF", limits=TransferLimits(cancel=cancel))
    assert time.monotonic() - began < 1.5


def test_a_download_answered_503_resumes_and_verifies(
    populated_hub: FakeHub, tmp_path: Path, gguf_bytes: dict[str, bytes]
) -> None:
    populated_hub.drop_after[BIG] = [300_000]
    populated_hub.fail_next[f"GET {RESOLVE}"] = [(503, {})]  # the first GET fails outright
    path = Downloader(tmp_path, retry_wait_s=0.01).download("acme/Big-GGUF", BIG)
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(gguf_bytes[BIG]).digest()
    ranges = [e.range for e in populated_hub.requests_for(BIG)]
    assert ranges[:2] == [None, None]  # 503, then the first body (dropped at 300,000 bytes)
    assert ranges[2] is not None and ranges[2].startswith("bytes=")  # resumed, not restarted


def test_a_download_is_not_retried_on_a_status_the_hub_would_not_retry(
    populated_hub: FakeHub, tmp_path: Path
) -> None:
    populated_hub.fail_next[f"GET {RESOLVE}"] = [(403, {})] * 3
    with pytest.raises(HubError, match="HTTP 403"):
        Downloader(tmp_path, retry_wait_s=0.01).download("acme/Big-GGUF", BIG)
    assert len(populated_hub.requests_for(BIG)) == 1


def test_a_cancel_during_a_download_s_retry_wait_ends_it(
    populated_hub: FakeHub, tmp_path: Path
) -> None:
    populated_hub.fail_next[f"GET {RESOLVE}"] = [(503, {"Retry-After": "5"})] * 10
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    began = time.monotonic()
    with pytest.raises(DownloadCancelled):
        Downloader(tmp_path).download("acme/Big-GGUF", BIG, cancel=cancel)
    assert time.monotonic() - began < 1.5
