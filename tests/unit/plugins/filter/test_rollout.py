"""Why a node's servers go through the rolling restart (glm.fleet.rollout_reasons)."""

from __future__ import annotations

from typing import Any

from ansible_collections.glm.fleet.plugins.filter.rollout import rollout_reasons

NAMES = ["a", "b"]


def looped(**items: dict[str, Any]) -> dict[str, Any]:
    return {
        "changed": any(r.get("changed") for r in items.values()),
        "results": [dict(r, __sglang_server_instance={"name": n, "port": 18080}) for n, r in items.items()],
    }


def show(name: str, load: str = "loaded", active: str = "active", enabled: str = "enabled", reload: str = "no") -> str:
    # systemctl show prints the properties in its own order, not the one asked for.
    props = {"Id": f"{name}.service", "LoadState": load, "ActiveState": active, "UnitFileState": enabled}
    return "".join(f"{key}={value}\n" for key, value in {**props, "NeedDaemonReload": reload}.items())


def steady() -> dict[str, Any]:
    return {
        "systemd": show("a") + "\n" + show("b"),
        "health": looped(a={"ready": True}, b={"ready": True}),
        "snapshot": looped(a={"changed": False}, b={"changed": False}),
    }


def test_a_node_whose_servers_run_as_configured_and_serve_has_no_reason() -> None:
    assert rollout_reasons([], NAMES, host={"log redactor": {"changed": False}}, **steady()) == []


def test_each_systemd_state_that_is_not_serving_is_a_reason() -> None:
    checks = steady()
    checks["systemd"] = show("a", active="failed") + "\n" + show("b", load="not-found", enabled="")
    assert rollout_reasons([], NAMES, **checks) == [
        "a: not running or not enabled (failed, enabled)",
        "b: systemd has not loaded its unit (not-found)",
    ]
    checks["systemd"] = show("a", enabled="disabled") + "\n" + show("b", reload="yes")
    assert rollout_reasons([], NAMES, **checks) == [
        "a: not running or not enabled (active, disabled)",
        "b: its unit changed on disk since systemd loaded it",
    ]


def test_a_server_that_does_not_serve_or_whose_last_good_copy_is_old_is_a_reason() -> None:
    checks = steady()
    checks["health"] = looped(a={"ready": False, "msg": "check generate failed: HTTP 500"}, b={"ready": True})
    checks["snapshot"] = looped(a={"changed": False}, b={"changed": True})
    assert rollout_reasons([], NAMES, **checks) == [
        "a: does not serve now (check generate failed: HTTP 500)",
        "b: its last good copy is out of date",
    ]


def test_changed_servers_and_node_files_come_first_and_their_checks_are_not_needed() -> None:
    checks = steady()
    checks["systemd"] = show("b")
    checks["health"] = looped(a={"skipped": True}, b={"ready": True})
    out = rollout_reasons(["a"], NAMES, host={"port guard": {"changed": True}}, **checks)
    assert out == ["the node's port guard would change", "a: its unit, keys or environment would change"]


def test_a_server_left_unchecked_is_a_reason() -> None:
    assert rollout_reasons([], NAMES) == ["a: not checked", "b: not checked"]
    checks = steady()
    checks["health"] = looped(a={"ready": True})
    assert rollout_reasons([], NAMES, **checks) == ["b: not checked"]


def test_no_snapshot_check_is_not_a_reason() -> None:
    checks = steady()
    del checks["snapshot"]
    assert rollout_reasons([], NAMES, **checks) == []


def test_a_running_server_whose_port_guard_went_away_is_a_reason() -> None:
    missing = {"b": "DOCKER-USER does not send port 28081 to GLM-b"}
    assert rollout_reasons([], NAMES, guards=missing, **steady()) == [
        "b: its port guard is not in place (DOCKER-USER does not send port 28081 to GLM-b)"
    ]
    # A server that restarts puts its guard back before it starts: its change is the reason.
    assert rollout_reasons(["b"], NAMES, guards=missing, **steady()) == [
        "b: its unit, keys or environment would change"
    ]
