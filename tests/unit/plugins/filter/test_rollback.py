"""How a rollback ended, for the run's failure message (glm.fleet.rollback_outcomes)."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.filter.rollback import rollback_outcomes


def restore(name: str, restored: bool) -> dict:
    return {"restored": restored, "__sglang_server_instance": {"name": name, "port": 18080}}


def test_each_server_gets_its_own_sentence() -> None:
    results = [
        {"ready": True, "__sglang_server_restore": restore("a", True)},
        {"ready": False, "msg": "check generate failed: HTTP 500", "__sglang_server_restore": restore("b", True)},
        {"skipped": True, "__sglang_server_restore": restore("c", False)},
    ]
    out = rollback_outcomes(results)
    assert out == {
        "a": "Rolled back to its last good version (unit, environment; the current keys), which serves again.",
        "b": "Rolled back to its last good version, which does not serve either: check generate failed: HTTP 500",
        "c": "Not rolled back: it has no earlier version that passed the health gate.",
    }


def test_no_results_no_outcomes() -> None:
    assert rollback_outcomes([]) == {}
