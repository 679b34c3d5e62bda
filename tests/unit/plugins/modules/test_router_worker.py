"""glm.fleet.router_worker: which key opens the router's worker API (its control-plane key, read on
the gateway host, or the servers' key where the router has none) and which one a server added is sent."""

from __future__ import annotations

import functools
import io
import json
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from ansible.module_utils import basic

from ansible_collections.glm.fleet.plugins.modules import router_worker

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)
SERVERS_KEY = "sk-servers-key-0123456789"
ADMIN_KEY = "control-plane-key-9876543210"
URL = "https://10.0.0.11:18080"
ARGS = {"router": "http://127.0.0.1:30000", "url": URL, "api_key": SERVERS_KEY, "state": "present"}


class Router:
    """The router's worker API as SMG 1.13.0 answers it: with a control-plane key set only that key
    opens /workers (the servers' key gets 401), without one only its --api-key (the servers' key);
    an added worker serves at once. It stands in for
    the HTTP requests only (the module's own client makes them)."""

    def __init__(self, control_key: str | None) -> None:
        self.control_key, self.workers, self.calls = control_key, [], []

    def open(self, url: str, *, method: str, data: str | None, headers: dict[str, str], timeout: float) -> Any:
        body = json.loads(data) if data else None
        key = headers.get("Authorization", "").removeprefix("Bearer ")
        self.calls.append((method, url, key, body))
        if key != (self.control_key or SERVERS_KEY):  # without a control-plane key, --api-key opens the API
            raise urllib.error.HTTPError(url, 401, "Unauthorized", {}, io.BytesIO(b'{"error": "unauthorized"}'))  # type: ignore[arg-type]
        if method == "POST":
            self.workers.append({"id": "w1", "url": body["url"], "status": "ready", "is_healthy": True})
            answer = {"status": "accepted"}
        else:
            answer = {"workers": self.workers}
        return mock.Mock(getcode=lambda: 200, read=lambda: json.dumps(answer).encode())


def router(mocker: Any, control_key: str | None) -> Router:
    fake = Router(control_key)
    mocker.patch.object(router_worker, "Router", functools.partial(router_worker.Router, opener=fake.open))
    return fake


def key_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "router-admin.key"
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_the_control_plane_key_opens_the_api_and_the_server_is_sent_the_servers_key(
    mocker: Any, run_main: RunMain, tmp_path: Path
) -> None:
    fake = router(mocker, ADMIN_KEY)
    out = run_main(router_worker.main, {**ARGS, "admin_key_file": key_file(tmp_path, ADMIN_KEY + "\n")})
    assert out["failed"] is False, out
    assert out["changed"] is True
    assert {key for _method, _path, key, _body in fake.calls} == {ADMIN_KEY}
    posted = [body for method, _path, _key, body in fake.calls if method == "POST"]
    assert posted == [{"url": URL, "api_key": SERVERS_KEY}]


def test_the_servers_key_alone_is_refused_by_a_router_with_a_control_plane_key(mocker: Any, run_main: RunMain) -> None:
    router(mocker, ADMIN_KEY)
    out = run_main(router_worker.main, ARGS)
    assert out["failed"] is True
    assert "refused the key (401)" in out["msg"]


def test_without_the_file_the_servers_key_opens_a_router_that_has_no_control_plane_key(
    mocker: Any, run_main: RunMain, tmp_path: Path
) -> None:
    fake = router(mocker, None)
    out = run_main(router_worker.main, {**ARGS, "admin_key_file": str(tmp_path / "absent.key")})
    assert out["failed"] is False, out
    assert {key for _method, _path, key, _body in fake.calls} == {SERVERS_KEY}


def test_a_router_not_restarted_since_its_key_was_made_is_opened_with_the_servers_key(
    mocker: Any, run_main: RunMain, tmp_path: Path
) -> None:
    fake = router(mocker, None)
    out = run_main(router_worker.main, {**ARGS, "state": "drained", "admin_key_file": key_file(tmp_path, ADMIN_KEY)})
    assert out["failed"] is False, out
    keys = [key for _method, _path, key, _body in fake.calls]
    assert keys[0] == ADMIN_KEY  # refused: the router has no control-plane key yet
    assert set(keys[1:]) == {SERVERS_KEY}


def test_an_empty_key_file_is_named_and_nothing_is_called(mocker: Any, run_main: RunMain, tmp_path: Path) -> None:
    fake = router(mocker, ADMIN_KEY)
    path = key_file(tmp_path, "\n")
    out = run_main(router_worker.main, {**ARGS, "admin_key_file": path})
    assert out["failed"] is True
    assert out["msg"].startswith(f"admin_key_file {path} is empty")
    assert fake.calls == []


def test_the_control_plane_key_is_registered_as_a_secret(mocker: Any, run_main: RunMain, tmp_path: Path) -> None:
    router(mocker, ADMIN_KEY)
    leave, secrets = basic.AnsibleModule.exit_json, set()

    def exit_json(self: Any, **result: Any) -> None:
        secrets.update(self.no_log_values)  # what Ansible masks wherever a result repeats it
        leave(self, **result)

    mocker.patch.object(basic.AnsibleModule, "exit_json", exit_json)
    assert run_main(router_worker.main, {**ARGS, "admin_key_file": key_file(tmp_path, ADMIN_KEY)})["failed"] is False
    assert {ADMIN_KEY, SERVERS_KEY} <= secrets
