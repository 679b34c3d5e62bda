# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a node's server names would take a systemd unit or a container that is not the
server's own: a server's name is its unit's (<name>.service, in systemd's admin directory) and its
container's, and the unit force-removes a container of that name at every start."""

from __future__ import annotations

import json

DOCUMENTATION = r"""
---
name: server_name_clashes
short_description: The server names that would take a unit or a container glm.fleet.sglang_server does not own
version_added: 0.1.0
description:
  - A server of C(sglang_server_instances) runs as the unit C(<name>.service) in C(/etc/systemd/system), whose start
    force-removes any container called C(<name>). A name clashes when a unit of that name is loaded that is not
    the role's (another path, or a description other than the role's), or when a container of that name exists
    while no unit of the role's runs it.
  - Each message names C(sglang_server_instances), the instance, and what it would take.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The server names.
    type: list
    elements: str
    required: true
  units:
    description: The output of C(systemctl show --property=Id,LoadState,FragmentPath,Description) for C(<name>.service)
      of each name.
    type: str
    required: true
  containers:
    description: The names of the host's containers, running or not (C(docker ps --all)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a server called like a unit or a container the role does not own
  ansible.builtin.assert:
    that: names | glm.fleet.server_name_clashes(systemctl.stdout, containers) | length == 0
"""

RETURN = r"""
_value:
  description: One sentence per clash; empty when every name is free or the role's own.
  type: list
  elements: str
"""

VAR = "sglang_server_instances"
UNIT_DIR = "/etc/systemd/system"


def _units(text: str) -> dict[str, dict[str, str]]:
    """systemctl show's blocks (one per unit, blank-line separated) by the unit's Id."""
    units = {}
    for block in str(text).strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if fields.get("Id"):
            units[fields["Id"]] = fields
    return units


def _ours(name: str, unit: dict[str, str]) -> bool:
    return unit.get("FragmentPath") == f"{UNIT_DIR}/{name}.service" and unit.get("Description", "").startswith(
        f"SGLang server {name} for "
    )


def server_name_clashes(names: list, units: str, containers: list) -> list[str]:
    found = _units(units)
    problems = []
    for name in names:
        unit = found.get(f"{name}.service", {})
        loaded = unit.get("LoadState", "not-found") != "not-found"
        if loaded and not _ours(name, unit):
            problems.append(
                f"{VAR}: the server {json.dumps(name)} would replace the unit {name}.service, which is not a server of "
                f"this role ({unit.get('Description') or 'no description'}, {unit.get('FragmentPath') or 'no file'}): "
                "choose another name"
            )
        elif not loaded and name in containers:
            problems.append(
                f"{VAR}: the server {json.dumps(name)} would remove the container {json.dumps(name)}, which no server "
                "of this role runs: choose another name, or remove that container if it is a server's left behind"
            )
    return problems


class FilterModule:
    def filters(self) -> dict:
        return {"server_name_clashes": server_name_clashes}
