# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn per-node glm.fleet.sglang_health results into the fleet health report."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: fleet_report
short_description: One row per GPU node from its glm.fleet.sglang_health result
version_added: 0.1.0
description:
  - Takes a mapping of node name to that node's registered C(glm.fleet.sglang_health) result, or
    the result of the task that looped it over the node's servers (C(results), each with its
    C(__sglang_server_instance)), or nothing for a node that never answered; returns one row per
    server with C(node), C(server), C(port), C(ready), C(failed_check), C(detail), C(latency_ms),
    C(ttft_ms), C(served_model), C(revision) and C(drift).
  - The filters C(fleet_report_table) and C(fleet_report_markdown) render those rows as text.
  - C(fleet_report_state) drops the timings (C(latency_ms), C(ttft_ms)) from the rows, and
    C(fleet_report_markdown) leaves them out, so that the report files change only when the
    fleet's state does (a no-op run changes nothing on the controller); the play's output table
    shows them.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: Node name to its health result.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Rows of the report
  ansible.builtin.set_fact:
    rows: "{{ {'gpu-1': gpu1_health, 'gpu-2': gpu2_health} | glm.fleet.fleet_report }}"
"""

RETURN = r"""
_value:
  description: One row per server, sorted by node name and port.
  type: list
  elements: dict
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out

COLUMNS = [
    ("node", "node"),
    ("server", "server"),
    ("port", "port"),
    ("ready", "ready"),
    ("failed_check", "failed check"),
    ("latency_ms", "latency ms"),
    ("ttft_ms", "TTFT ms"),
    ("served_model", "served model"),
    ("sglang", "SGLang"),
    ("revision", "revision"),
    ("drift", "drift"),
]

TIMINGS = frozenset({"latency_ms", "ttft_ms"})  # this probe's measurements, not the fleet's state
STATE_COLUMNS = [(name, title) for name, title in COLUMNS if name not in TIMINGS]


def row(node: str, result: Any, instance: dict[str, Any] | None = None) -> dict[str, Any]:
    base: dict[str, Any] = {name: None for name, _title in COLUMNS} | {"node": node, "ready": False, "drift": ""}
    if instance:
        base |= {"server": instance.get("name"), "port": instance.get("port")}
    if not isinstance(result, dict) or not result:
        return base | {"failed_check": "unreachable", "detail": "no result from this node"}
    if result.get("unreachable"):
        return base | {"failed_check": "unreachable", "detail": str(result.get("msg", "unreachable"))[:200]}
    checks = result.get("checks") or {}
    failed = result.get("failed_check")
    if failed is None and not result.get("ready"):
        failed = "module"
    server = result.get("server") or {}
    latency = checks.get("health", {}).get("latency_ms")
    return base | {
        "ready": bool(result.get("ready")),
        "failed_check": failed,
        "detail": (checks.get(failed, {}).get("detail") if failed in checks else result.get("msg")) if failed else "",
        "latency_ms": latency,
        "ttft_ms": result.get("ttft_ms"),
        "served_model": server.get("served_model_name"),
        "sglang": server.get("version"),
        "revision": server.get("revision"),
        "drift": "; ".join(result.get("drift") or []),
    }


def node_rows(node: str, result: Any) -> list[dict[str, Any]]:
    """A looped result gives one row per server; anything else one row for the node."""
    if isinstance(result, dict) and isinstance(result.get("results"), list) and result["results"]:
        return [row(node, item, item.get("__sglang_server_instance")) for item in result["results"]]
    return [row(node, result)]


def fleet_report(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [r for node in sorted(results) for r in node_rows(node, results[node])]
    return sorted(rows, key=lambda r: (r["node"], int(r["port"] or 0)))


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    text = str(value)
    return text[:12] if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else text  # short commit


def gateway_lines(gateway: dict[str, Any] | None) -> list[str]:
    """The gateway's part: its front door and the router's view of each worker."""
    if not gateway:
        return []
    door = gateway.get("front_door") or {}
    workers = gateway.get("workers") or {}
    healthy = sum(1 for ok in workers.values() if ok)
    state = "OK" if str(door.get("ok")).lower() == "true" else "FAILED"
    lines = [
        f"gateway {gateway.get('gateway')}: front door {state} (a streamed message, HTTP {door.get('status')}); "
        f"router sees {healthy}/{len(workers)} servers healthy"
    ]
    return lines + [f"  {url}: {'healthy' if ok else 'NOT healthy'}" for url, ok in sorted(workers.items())]


def fleet_report_table(rows: list[dict[str, Any]], gateway: dict[str, Any] | None = None) -> list[str]:
    """Fixed-width lines, for the play's output."""
    table = [[title for _name, title in COLUMNS]] + [[cell(r.get(name)) for name, _title in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in table]
    ready = sum(1 for r in rows if r["ready"])
    summary = f"{ready}/{len(rows)} servers ready on {len({r['node'] for r in rows})} nodes"
    return [*lines, summary, *gateway_lines(gateway)]


def fleet_report_state(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows without this probe's timings: what the report files keep."""
    return [{key: value for key, value in r.items() if key not in TIMINGS} for r in rows]


def fleet_report_markdown(rows: list[dict[str, Any]], gateway: dict[str, Any] | None = None) -> str:
    head = "| " + " | ".join(title for _name, title in STATE_COLUMNS) + " |"
    rule = "|" + "|".join(" --- " for _column in STATE_COLUMNS) + "|"
    body = ["| " + " | ".join(cell(r.get(name)).replace("|", "\\|") for name, _t in STATE_COLUMNS) + " |" for r in rows]
    ready = sum(1 for r in rows if r["ready"])
    summary = f"{ready}/{len(rows)} servers ready on {len({r['node'] for r in rows})} nodes."
    door = ["", "## Gateway", "", *(f"- {line.strip()}" for line in gateway_lines(gateway))] if gateway else []
    return "\n".join(["# Fleet health", "", summary, "", head, rule, *body, *door]) + "\n"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "fleet_report": fleet_report,
            "fleet_report_table": fleet_report_table,
            "fleet_report_markdown": fleet_report_markdown,
            "fleet_report_state": fleet_report_state,
        }
