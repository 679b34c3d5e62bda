"""The fleet health report's rows and renderings (glm.fleet.fleet_report filters)."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.filter.report import (
    fleet_report,
    fleet_report_markdown,
    fleet_report_table,
)

REV = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
CHECKS_OK = {name: {"ok": True, "latency_ms": 2.5, "detail": "ok"} for name in ("tcp", "health", "server_info")}


def ready(node_server: dict | None = None) -> dict:
    return {
        "ready": True,
        "failed_check": None,
        "checks": CHECKS_OK,
        "ttft_ms": 41.0,
        "drift": [],
        "server": node_server or {"served_model_name": "zai-org/GLM-5.3-Flash", "revision": REV},
    }


def test_rows_show_ready_failed_and_unreachable_nodes() -> None:
    hung = {
        "ready": False,
        "failed_check": "health_generate",
        "checks": {"health": {"latency_ms": 1.0}, "health_generate": {"detail": "no answer in 30 s"}},
        "ttft_ms": None,
        "drift": [],
        "server": {},
    }
    rows = fleet_report(
        {"gpu-2": hung, "gpu-1": ready(), "gpu-3": {"unreachable": True, "msg": "ssh: timeout"}, "gpu-4": {}}
    )
    assert [(r["node"], r["ready"], r["failed_check"]) for r in rows] == [
        ("gpu-1", True, None),
        ("gpu-2", False, "health_generate"),
        ("gpu-3", False, "unreachable"),
        ("gpu-4", False, "unreachable"),
    ]
    assert rows[0]["revision"] == REV
    assert rows[0]["ttft_ms"] == 41.0
    assert rows[1]["detail"] == "no answer in 30 s"
    assert rows[2]["detail"] == "ssh: timeout"


def test_drift_is_reported() -> None:
    result = ready() | {
        "ready": False,
        "failed_check": "server_info",
        "drift": ["tp_size: server has 2, inventory expects 4"],
    }
    (row,) = fleet_report({"gpu-1": result})
    assert row["drift"] == "tp_size: server has 2, inventory expects 4"


def test_table_and_markdown_have_a_row_per_node_and_a_total() -> None:
    rows = fleet_report({"gpu-1": ready(), "gpu-2": {}})
    table = fleet_report_table(rows)
    assert table[0].split()[:2] == ["node", "ready"]
    assert table[1].startswith("gpu-1")
    assert " yes " in table[1]
    assert "eb9eb208eb0d" in table[1]
    assert table[2].startswith("gpu-2")
    assert " NO " in table[2]
    assert "unreachable" in table[2]
    assert table[-1] == "1/2 nodes ready"
    md = fleet_report_markdown(rows)
    assert "| gpu-1 | yes |" in md
    assert md.count("\n| gpu-") == 2
    assert "1/2 nodes ready." in md
