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
  - Takes a mapping of node name to that node's registered C(glm.fleet.sglang_health) result (or
    nothing, for a node that never answered) and returns one row per node with C(node), C(ready),
    C(failed_check), C(detail), C(latency_ms), C(ttft_ms), C(served_model), C(revision) and C(drift).
  - The filters C(fleet_report_table) and C(fleet_report_markdown) render those rows as text.
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
  description: One row per node, sorted by node name.
  type: list
  elements: dict
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out

COLUMNS = [
    ("node", "node"),
    ("ready", "ready"),
    ("failed_check", "failed check"),
    ("latency_ms", "latency ms"),
    ("ttft_ms", "TTFT ms"),
    ("served_model", "served model"),
    ("revision", "revision"),
    ("drift", "drift"),
]


def row(node: str, result: Any) -> dict[str, Any]:
    base: dict[str, Any] = {name: None for name, _title in COLUMNS} | {"node": node, "ready": False, "drift": ""}
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
        "revision": server.get("revision"),
        "drift": "; ".join(result.get("drift") or []),
    }


def fleet_report(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [row(node, results[node]) for node in sorted(results)]


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    text = str(value)
    return text[:12] if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else text  # short commit


def fleet_report_table(rows: list[dict[str, Any]]) -> list[str]:
    """Fixed-width lines, for the play's output."""
    table = [[title for _name, title in COLUMNS]] + [[cell(r.get(name)) for name, _title in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in table]
    ready = sum(1 for r in rows if r["ready"])
    return [*lines, f"{ready}/{len(rows)} nodes ready"]


def fleet_report_markdown(rows: list[dict[str, Any]]) -> str:
    head = "| " + " | ".join(title for _name, title in COLUMNS) + " |"
    rule = "|" + "|".join(" --- " for _column in COLUMNS) + "|"
    body = ["| " + " | ".join(cell(r.get(name)).replace("|", "\\|") for name, _t in COLUMNS) + " |" for r in rows]
    ready = sum(1 for r in rows if r["ready"])
    return "\n".join(["# Fleet health", "", f"{ready}/{len(rows)} nodes ready.", "", head, rule, *body]) + "\n"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "fleet_report": fleet_report,
            "fleet_report_table": fleet_report_table,
            "fleet_report_markdown": fleet_report_markdown,
        }
