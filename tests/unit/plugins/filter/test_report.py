"""The fleet health report's rows and renderings (glm.fleet.fleet_report filters)."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.filter.report import (
    fleet_report,
    fleet_report_markdown,
    fleet_report_state,
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
        "server": node_server or {"served_model_name": "zai-org/GLM-5.3-Flash", "revision": REV, "version": "0.5.23"},
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
    assert (rows[0]["sglang"], rows[1]["sglang"]) == ("0.5.23", None)  # the server's own, as it reports it
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
    assert table[0].split()[:4] == ["node", "server", "port", "ready"]
    assert table[1].startswith("gpu-1")
    assert " yes " in table[1]
    assert "eb9eb208eb0d" in table[1]
    assert table[2].startswith("gpu-2")
    assert " NO " in table[2]
    assert "unreachable" in table[2]
    assert table[-1] == "1/2 servers ready on 2 nodes"
    md = fleet_report_markdown(rows)
    assert "| gpu-1 | - | - | yes |" in md
    assert md.count("\n| gpu-") == 2
    assert "1/2 servers ready on 2 nodes." in md


def test_the_files_keep_the_state_and_the_output_the_timings() -> None:
    """A second probe of the same fleet measures other timings: the table shows them, the files'
    rows and Markdown are the same for both probes (a no-op run leaves the files unchanged)."""
    first, second = ready(), ready() | {"ttft_ms": 77.7, "checks": CHECKS_OK | {"health": {"latency_ms": 9.9}}}
    rows_first, rows_second = fleet_report({"gpu-1": first}), fleet_report({"gpu-1": second})
    assert "41.0" in fleet_report_table(rows_first)[1]
    assert "77.7" in fleet_report_table(rows_second)[1]
    assert "9.9" in fleet_report_table(rows_second)[1]
    assert fleet_report_state(rows_first) == fleet_report_state(rows_second)
    assert set(fleet_report_state(rows_first)[0]) == set(rows_first[0]) - {"latency_ms", "ttft_ms"}
    assert fleet_report_markdown(rows_first) == fleet_report_markdown(rows_second)
    assert "TTFT" not in fleet_report_markdown(rows_first)
    assert rows_first[0]["ttft_ms"] == 41.0  # the rows themselves are untouched


def looped(*instances: tuple[str, int, dict]) -> dict:
    """What a task that loops glm.fleet.sglang_health over a node's servers registers."""
    return {
        "changed": False,
        "msg": "All items completed",
        "results": [
            result | {"__sglang_server_instance": {"name": name, "gpus": [0, 1, 2, 3], "port": port}}
            for name, port, result in instances
        ],
    }


def test_a_node_with_two_servers_has_a_row_for_each_in_port_order() -> None:
    down = {"ready": False, "failed_check": "tcp", "checks": {"tcp": {"detail": "connection refused"}}, "drift": []}
    rows = fleet_report(
        {
            "gpu-2": looped(("glm-b", 18081, down), ("glm-a", 18080, ready())),
            "gpu-1": looped(("glm", 18080, ready())),
            "gpu-3": {"unreachable": True, "msg": "ssh: timeout"},
        }
    )
    assert [(r["node"], r["server"], r["port"], r["ready"], r["failed_check"]) for r in rows] == [
        ("gpu-1", "glm", 18080, True, None),
        ("gpu-2", "glm-a", 18080, True, None),
        ("gpu-2", "glm-b", 18081, False, "tcp"),
        ("gpu-3", None, None, False, "unreachable"),
    ]
    assert rows[2]["detail"] == "connection refused"
    assert fleet_report_table(rows)[-1] == "2/4 servers ready on 3 nodes"


def test_the_gateway_part_shows_the_front_door_and_the_routers_view() -> None:
    gateway = {
        "gateway": "cache-1",
        "workers": {"http://10.0.0.11:18080": True, "http://10.0.0.12:18080": False},
        "front_door": {"ok": True, "status": 200},
    }
    rows = fleet_report({"gpu-1": ready()})
    table = fleet_report_table(rows, gateway)
    assert table[-3] == "gateway cache-1: front door OK (a streamed message, HTTP 200); router sees 1/2 servers healthy"
    assert table[-1] == "  http://10.0.0.12:18080: NOT healthy"
    md = fleet_report_markdown(rows, gateway)
    assert "## Gateway" in md
    assert "- http://10.0.0.11:18080: healthy" in md
    down = gateway | {"front_door": {"ok": False, "status": 401}}
    assert "front door FAILED (a streamed message, HTTP 401)" in fleet_report_table(rows, down)[-3]
    assert "## Gateway" not in fleet_report_markdown(rows)
