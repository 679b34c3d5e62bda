# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A server's place in the SMG router's rotation, through the router's worker API (smg 1.13.0):
GET /workers lists them ({"workers": [{"id", "url", "status", "is_healthy", "load", ...}]}),
DELETE /workers/{id} drains one (status "draining": no new request is routed to it, those in
flight go on) and removes it after its settle time, POST /workers {"url", "api_key"} adds one,
which the router probes (backend, model) before it routes to it. The API answers 202 and works in
the background, so each change is followed until the router's list shows it. The router's
control-plane key (--control-plane-api-keys) gates the API, or its --api-key where it has none; a
worker added through it gets no key unless the request names one."""

from __future__ import annotations

import json
import time
import urllib.error
from typing import Any, Callable

from ansible.module_utils.urls import open_url

CREATE_IN_PROGRESS = "WORKER_CREATE_IN_PROGRESS"


class RouterDown(Exception):
    """Nothing listens on the router's address: no request goes through it."""


class RouterError(Exception):
    pass


class RouterRefused(RouterError):
    """The router refused the key (401 or 403)."""


def find(listing: Any, url: str) -> dict[str, Any] | None:
    """The router's entry for the worker at url (compared without a trailing /), if it has one."""
    workers = listing.get("workers") if isinstance(listing, dict) else None
    if not isinstance(workers, list):
        raise RouterError(f"the router's worker list is not what smg returns: {str(listing)[:200]}")
    wanted = url.rstrip("/")
    return next((w for w in workers if isinstance(w, dict) and str(w.get("url", "")).rstrip("/") == wanted), None)


def serving(worker: dict[str, Any] | None) -> bool:
    return worker is not None and worker.get("status") == "ready" and worker.get("is_healthy") is True


def describe(worker: dict[str, Any] | None) -> str:
    if worker is None:
        return "not in the router's list"
    return (
        f"status {worker.get('status')}, healthy {worker.get('is_healthy')}, {worker.get('load')} request(s) in flight"
    )


class Router:
    """The router's worker API on one address; requests go through `opener` (open_url)."""

    def __init__(self, base: str, api_key: str, timeout: float = 10, opener: Callable[..., Any] = open_url) -> None:
        self.base, self.api_key, self.timeout, self.opener = base.rstrip("/"), api_key, timeout, opener

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body) if body is not None else None
        try:
            resp = self.opener(self.base + path, method=method, data=data, headers=headers, timeout=self.timeout)
            status, raw = resp.getcode(), resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, ConnectionRefusedError) or isinstance(e, ConnectionRefusedError):
                raise RouterDown(f"nothing listens on {self.base}") from e
            raise RouterError(f"{self.base}{path}: {reason}") from e
        if status in (401, 403):
            raise RouterRefused(
                f"the router at {self.base} refused the key ({status}): it must be the router's control-plane key"
                " (admin_key_file), or its --api-key where it has none"
            )
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, raw.decode("utf-8", "replace")[:200]

    def entry(self, url: str) -> dict[str, Any] | None:
        status, body = self.call("GET", "/workers")
        if status != 200:
            raise RouterError(f"GET /workers answered {status}: {str(body)[:200]}")
        return find(body, url)


def wait_for(
    router: Router, url: str, done: Callable[[dict[str, Any] | None], bool], timeout: float,
    *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, dict[str, Any] | None]:  # fmt: skip
    """Poll the router's entry for url until done(entry) or timeout seconds pass."""
    deadline = clock() + timeout
    while True:
        worker = router.entry(url)
        if done(worker) or clock() >= deadline:
            return done(worker), worker
        sleep(0.5)


def out_of_rotation(worker: dict[str, Any] | None) -> bool:
    """The router sends the worker no new request: it is draining (SMG removes it after its settle
    time, those in flight going on) or gone."""
    return worker is None or worker.get("status") == "draining"


def remove(
    router: Router, url: str, timeout: float, check: bool, *, until_gone: bool = True, **clock: Any
) -> dict[str, Any]:
    """Drain the worker at url out of the rotation and wait until the router has let it go, or (not
    until_gone) only until it marks it draining: from then it routes it no new request, and its
    removal after SMG's settle time goes on in the background (add() waits for it)."""
    worker = router.entry(url)
    if worker is None:
        return {"changed": False, "before": describe(None)}
    if not check:
        if worker.get("status") != "draining":
            status, body = router.call("DELETE", f"/workers/{worker['id']}")
            if status not in (200, 202, 404):
                raise RouterError(f"DELETE /workers/{worker['id']} answered {status}: {str(body)[:200]}")
        gone, last = wait_for(router, url, (lambda w: w is None) if until_gone else out_of_rotation, timeout, **clock)
        if not gone:
            raise RouterError(
                f"{url} is still in the router's rotation {timeout:g} s after its removal: {describe(last)}"
            )
    return {"changed": True, "before": describe(worker)}


def add(router: Router, url: str, worker_key: str, timeout: float, check: bool, **clock: Any) -> dict[str, Any]:
    """Put the worker at url into the rotation (after any drain of it ends) and wait until the
    router routes to it."""
    worker = router.entry(url)
    if serving(worker) or (worker is not None and worker.get("status") != "draining" and check):
        return {"changed": False, "before": describe(worker)}
    if check:
        return {"changed": True, "before": describe(worker)}
    if worker is not None and worker.get("status") == "draining":
        wait_for(router, url, lambda w: w is None, timeout, **clock)
    if worker is None or worker.get("status") == "draining":
        spec = {"url": url, **({"api_key": worker_key} if worker_key else {})}
        status, body = router.call("POST", "/workers", spec)
        in_progress = isinstance(body, dict) and body.get("code") == CREATE_IN_PROGRESS
        if status not in (200, 201, 202) and not in_progress:
            raise RouterError(f"POST /workers for {url} answered {status}: {str(body)[:200]}")
    ok, last = wait_for(router, url, serving, timeout, **clock)
    if not ok:
        raise RouterError(f"{url} is not serving through the router {timeout:g} s after it was added: {describe(last)}")
    return {"changed": True, "before": describe(worker)}
