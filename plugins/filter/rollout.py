# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a GPU node's servers need the rolling, health-gated (re)start, from the checks of the plan."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: rollout_reasons
short_description: Why a node's servers need the rolling restart, from the plan's checks
version_added: 0.1.0
description:
  - Takes the names of the servers whose unit, keys or environment would change (the configuration
    step run in check mode) and returns one sentence per reason the node needs the rolling,
    health-gated (re)start; an empty list means every server runs as configured and serves.
  - The other reasons come from the node's own files (C(host), label to registered result, such as a
    cache directory, the log redactor or the port guard that would change), from systemd's view of each
    server that would not change (C(systemd), the output of C(systemctl show) for their units), and
    from the looped checks of those servers (C(health), C(snapshot)).
  - A server that would not change but was not checked (its check skipped by tags) is a reason too,
    as only a server known to serve stays out of the rolling path.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: Names of the servers whose unit, keys or environment would change.
    type: list
    elements: str
    required: true
  names:
    description: Names of all the node's servers.
    type: list
    elements: str
    required: true
  host:
    description: Label of a node-wide file or directory to its registered check-mode result.
    type: dict
    default: {}
  systemd:
    description: >-
      The output of C(systemctl show --property=Id,LoadState,ActiveState,UnitFileState,NeedDaemonReload)
      for the units (C(<name>.service)) of the servers that would not change.
    type: str
    default: ""
  health:
    description: The registered, looped result of one round of C(glm.fleet.sglang_health) on each server.
    type: dict
    default: {}
  snapshot:
    description: The registered, looped check-mode result of C(glm.fleet.file_snapshot) on each server (optional).
    type: dict
    default: {}
  guards:
    description: The servers whose port guard is not in place, each to what is missing (optional).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Record why this node needs the rolling restart
  ansible.builtin.set_fact:
    reasons: "{{ changed_names | glm.fleet.rollout_reasons(names=all_names, systemd=show.stdout, health=health) }}"
"""

RETURN = r"""
_value:
  description: One sentence per reason, the server's name first where it is one server's.
  type: list
  elements: str
"""

from typing import Any  # noqa: E402 - after the documentation, as Ansible plugins are laid out

INSTANCE = "__sglang_server_instance"


def by_server(registered: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Each loop item's result by its server's name (skipped items left out)."""
    out: dict[str, dict[str, Any]] = {}
    for result in (registered or {}).get("results") or []:
        name = (result.get(INSTANCE) or {}).get("name")
        if name is not None and not result.get("skipped"):
            out[str(name)] = result
    return out


def units(show: str) -> dict[str, dict[str, str]]:
    """systemctl show's blocks (one per unit, a blank line between) by server name."""
    out: dict[str, dict[str, str]] = {}
    for block in show.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id", "").endswith(".service"):
            out[props["Id"].removesuffix(".service")] = props
    return out


def server_reason(name: str, unit: dict[str, str] | None, health: dict[str, Any] | None) -> str | None:
    if unit is None or health is None:
        return f"{name}: not checked"
    if unit.get("LoadState") != "loaded":
        return f"{name}: systemd has not loaded its unit ({unit.get('LoadState')})"
    if unit.get("NeedDaemonReload") == "yes":
        return f"{name}: its unit changed on disk since systemd loaded it"
    if unit.get("ActiveState") != "active" or unit.get("UnitFileState") != "enabled":
        return f"{name}: not running or not enabled ({unit.get('ActiveState')}, {unit.get('UnitFileState')})"
    if not health.get("ready"):
        return f"{name}: does not serve now ({health.get('msg') or 'not ready'})"
    return None


def rollout_reasons(
    changed: list[str],
    names: list[str],
    *,
    host: dict[str, Any] | None = None,
    systemd: str = "",
    health: dict[str, Any] | None = None,
    snapshot: dict[str, Any] | None = None,
    guards: dict[str, str] | None = None,
) -> list[str]:
    reasons = [
        f"the node's {label} would change" for label, result in (host or {}).items() if (result or {}).get("changed")
    ]
    reasons += [f"{name}: its unit, keys or environment would change" for name in names if name in changed]
    shown, checked, snapshots = units(systemd or ""), by_server(health), by_server(snapshot)
    for name in (n for n in names if n not in changed):
        reason = server_reason(name, shown.get(name), checked.get(name))
        if reason is None and snapshots.get(name, {}).get("changed"):
            reason = f"{name}: its last good copy is out of date"
        if reason is None and (guards or {}).get(name):
            reason = f"{name}: its port guard is not in place ({guards[name]})"
        if reason is not None:
            reasons.append(reason)
    return reasons


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rollout_reasons": rollout_reasons}
