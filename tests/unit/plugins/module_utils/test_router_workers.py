"""A server's place in the SMG router's rotation: the worker API's answers as smg 1.13.0 gives them
(202 and background work, "draining" before removal, a key required), followed to the end."""

from __future__ import annotations

import io
import json
import urllib.error
from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.module_utils._router_workers import (
    Router,
    RouterDown,
    RouterError,
    add,
    find,
    remove,
)

KEY, URL = "sk-router", "http://10.0.0.11:18080"


class Resp(io.BytesIO):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(json.dumps(body).encode())
        self.status = status

    def getcode(self) -> int:
        return self.status


class FakeSmg:
    """The router's registry: a removal drains for `settle` listings, an addition is pending for
    `pending` listings, and a worker added without the key never gets past pending."""

    def __init__(self, workers: list[str], settle: int = 2, pending: int = 2, down: bool = False) -> None:
        self.workers = {f"id-{i}": {"id": f"id-{i}", "url": u, "status": "ready", "is_healthy": True, "load": 0}
                        for i, u in enumerate(workers)}  # fmt: skip
        self.settle, self.pending, self.down = settle, pending, down
        self.timers: dict[str, int] = {}
        self.calls: list[tuple[str, str, Any]] = []

    def __call__(self, url: str, method: str, data: str | None, headers: dict[str, str], timeout: float) -> Resp:
        if self.down:
            raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
        path = url.split("30000", 1)[1]
        body = json.loads(data) if data else None
        self.calls.append((method, path, body))
        if headers.get("Authorization") != f"Bearer {KEY}":
            raise urllib.error.HTTPError(url, 401, "Unauthorized", {}, io.BytesIO(b'{"error":"Unauthorized"}'))  # type: ignore[arg-type]
        if method == "GET":
            self.tick()
            return Resp(200, {"workers": list(self.workers.values())})
        if method == "DELETE":
            worker = self.workers[path.rsplit("/", 1)[1]]
            worker["status"] = "draining"
            self.timers[worker["id"]] = self.settle
            return Resp(202, {"status": "accepted"})
        if any(w["url"] == body["url"] for w in self.workers.values()):
            return Resp(400, {"code": "WORKER_CREATE_IN_PROGRESS"})
        new = f"id-{len(self.workers) + len(self.calls)}"
        self.workers[new] = {"id": new, "url": body["url"], "status": "pending", "is_healthy": False, "load": 0,
                             "key": body.get("api_key")}  # fmt: skip
        self.timers[new] = self.pending
        return Resp(202, {"status": "accepted", "worker_id": new})

    def tick(self) -> None:
        for wid in list(self.timers):
            self.timers[wid] -= 1
            if self.timers[wid] > 0:
                continue
            del self.timers[wid]
            worker = self.workers[wid]
            if worker["status"] == "draining":
                del self.workers[wid]
            elif worker.get("key") == KEY:
                worker.update(status="ready", is_healthy=True)


def router(smg: FakeSmg, key: str = KEY) -> Router:
    return Router("http://127.0.0.1:30000/", key, opener=smg)


FAST = {"sleep": lambda _s: None}


def test_find_matches_the_url_without_a_trailing_slash() -> None:
    listing = {"workers": [{"url": "http://a:1/"}, {"url": URL}]}
    assert find(listing, URL + "/") == {"url": URL}
    assert find(listing, "http://a:1") == {"url": "http://a:1/"}
    assert find(listing, "http://b:1") is None
    with pytest.raises(RouterError, match="not what smg returns"):
        find({"error": "x"}, URL)


def test_removal_drains_and_waits_until_the_router_lets_go() -> None:
    smg = FakeSmg([URL, "http://10.0.0.12:18080"], settle=3)
    result = remove(router(smg), URL, timeout=60, check=False, **FAST)
    assert result == {"changed": True, "before": "status ready, healthy True, 0 request(s) in flight"}
    assert [w["url"] for w in smg.workers.values()] == ["http://10.0.0.12:18080"]
    assert [c[:2] for c in smg.calls].count(("DELETE", "/workers/id-0")) == 1
    # Already out: nothing to do, nothing called but the listing.
    smg.calls.clear()
    assert remove(router(smg), URL, timeout=60, check=False, **FAST)["changed"] is False
    assert [c[0] for c in smg.calls] == ["GET"]


def test_a_drain_returns_once_the_router_routes_it_nothing_new() -> None:
    smg = FakeSmg([URL, "http://10.0.0.12:18080"], settle=3)
    result = remove(router(smg), URL, timeout=60, check=False, until_gone=False, **FAST)
    assert result == {"changed": True, "before": "status ready, healthy True, 0 request(s) in flight"}
    # Draining: no new request goes to it; SMG lets it go after its settle time, without waiting here.
    assert find({"workers": list(smg.workers.values())}, URL)["status"] == "draining"  # type: ignore[index]
    assert [c[:2] for c in smg.calls].count(("DELETE", "/workers/id-0")) == 1
    assert [c[0] for c in smg.calls].count("GET") == 2  # the entry, then the first look after the DELETE
    # Draining already: no second DELETE.
    assert remove(router(smg), URL, timeout=60, check=False, until_gone=False, **FAST)["changed"] is True
    assert [c[:2] for c in smg.calls].count(("DELETE", "/workers/id-0")) == 1
    for _listing in range(3):
        router(smg).entry(URL)  # SMG's settle time passes
    assert [w["url"] for w in smg.workers.values()] == ["http://10.0.0.12:18080"]
    # Already out: nothing to do, nothing called but the listing.
    smg.calls.clear()
    assert remove(router(smg), URL, timeout=60, check=False, **FAST)["changed"] is False
    assert [c[0] for c in smg.calls] == ["GET"]


def test_check_mode_reports_and_changes_nothing() -> None:
    smg = FakeSmg([URL])
    assert remove(router(smg), URL, timeout=60, check=True, **FAST)["changed"] is True
    assert add(router(smg), URL, KEY, timeout=60, check=True, **FAST)["changed"] is False
    assert add(router(smg), "http://10.0.0.13:18080", KEY, timeout=60, check=True, **FAST)["changed"] is True
    assert {c[0] for c in smg.calls} == {"GET"}


def test_adding_sends_the_key_and_waits_until_the_router_routes_to_it() -> None:
    smg = FakeSmg([])
    assert add(router(smg), URL, KEY, timeout=60, check=False, **FAST)["changed"] is True
    (posted,) = [c[2] for c in smg.calls if c[0] == "POST"]
    assert posted == {"url": URL, "api_key": KEY}
    assert find({"workers": list(smg.workers.values())}, URL)["status"] == "ready"  # type: ignore[index]
    assert add(router(smg), URL, KEY, timeout=60, check=False, **FAST)["changed"] is False


def test_a_server_still_draining_is_added_again_once_it_has_left() -> None:
    smg = FakeSmg([URL], settle=2)
    smg.workers["id-0"]["status"] = "draining"
    smg.timers["id-0"] = 2
    assert add(router(smg), URL, KEY, timeout=60, check=False, **FAST)["changed"] is True
    assert [c[0] for c in smg.calls].count("POST") == 1
    assert next(iter(smg.workers.values()))["status"] == "ready"


def test_a_worker_that_never_serves_fails_naming_what_the_router_says() -> None:
    clock = iter(range(0, 1000, 5))
    smg = FakeSmg([], pending=1000)
    with pytest.raises(RouterError, match=r"not serving through the router 30 s after it was added: status pending"):
        add(router(smg), URL, KEY, timeout=30, check=False, clock=lambda: next(clock), **FAST)


def test_a_wrong_key_is_named_and_a_router_that_is_not_there_is_told_apart() -> None:
    with pytest.raises(RouterError, match=r"refused the key \(401\): it must be the router's control-plane key"):
        remove(router(FakeSmg([URL]), key="wrong"), URL, timeout=5, check=False, **FAST)
    with pytest.raises(RouterDown):
        add(router(FakeSmg([URL], down=True)), URL, KEY, timeout=5, check=False, **FAST)
