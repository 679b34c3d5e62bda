# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an SGLang server has in flight, from its /v1/loads (sglang 0.5.23 entrypoints/v1_loads.py:
one LoadSnapshot per data-parallel rank, each with num_running_reqs and num_waiting_reqs; the API
key is required as on any non-health path)."""

from __future__ import annotations

import time
from typing import Any, Callable


class LoadsError(Exception):
    pass


def in_flight(body: Any) -> int:
    """Requests running or waiting over every rank of a /v1/loads answer."""
    loads = body.get("loads") if isinstance(body, dict) else None
    if not isinstance(loads, list):
        raise LoadsError(f"/v1/loads did not answer with SGLang's shape: {str(body)[:200]}")
    total = 0
    for load in loads:
        running, waiting = (
            load.get(key) if isinstance(load, dict) else None for key in ("num_running_reqs", "num_waiting_reqs")
        )
        if not isinstance(running, int) or not isinstance(waiting, int):
            raise LoadsError(f"a /v1/loads snapshot without request counts: {str(load)[:200]}")
        total += running + waiting
    return total


def wait_idle(
    read: Callable[[], int | None], timeout: float, interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:  # fmt: skip
    """Poll read() (requests in flight; None when the server is not running) until it is 0 or None,
    or timeout seconds pass. Returns idle, the requests left, the first count seen and the wait."""
    start = clock()
    first: int | None = None
    while True:
        count = read()
        if first is None:
            first = count or 0
        waited = round(clock() - start, 1)
        if not count:
            return {
                "idle": True,
                "requests": 0,
                "requests_at_start": first,
                "waited": waited,
                "running": count is not None,
            }
        if clock() - start >= timeout:
            return {"idle": False, "requests": count, "requests_at_start": first, "waited": waited, "running": True}
        sleep(interval)
