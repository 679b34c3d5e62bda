"""What an SGLang server has in flight (its /v1/loads), and the wait before a restart."""

from __future__ import annotations

import pytest

from ansible_collections.glm.fleet.plugins.module_utils._sglang_load import LoadsError, in_flight, wait_idle


def snapshot(running: int, waiting: int, rank: int = 0) -> dict[str, int]:
    return {"dp_rank": rank, "num_running_reqs": running, "num_waiting_reqs": waiting, "num_used_tokens": 7}


def test_in_flight_adds_running_and_waiting_over_every_rank() -> None:
    assert in_flight({"loads": [snapshot(3, 1), snapshot(2, 0, rank=1)]}) == 6
    assert in_flight({"loads": []}) == 0
    with pytest.raises(LoadsError, match="SGLang's shape"):
        in_flight({"detail": "Not Found"})
    with pytest.raises(LoadsError, match="without request counts"):
        in_flight({"loads": [{"dp_rank": 0}]})


def test_waits_until_nothing_is_in_flight() -> None:
    counts, now = iter([4, 2, 0]), [0.0]
    result = wait_idle(
        lambda: next(counts), timeout=60, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    assert result == {"idle": True, "requests": 0, "requests_at_start": 4, "waited": 2.0, "running": True}


def test_gives_up_at_the_timeout_with_what_is_left() -> None:
    now = [0.0]
    result = wait_idle(
        lambda: 3, timeout=5, interval=2, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    assert result == {"idle": False, "requests": 3, "requests_at_start": 3, "waited": 6.0, "running": True}


def test_a_server_that_does_not_answer_has_nothing_in_flight() -> None:
    assert wait_idle(lambda: None, timeout=60) == {
        "idle": True, "requests": 0, "requests_at_start": 0, "waited": 0.0, "running": False,
    }  # fmt: skip
