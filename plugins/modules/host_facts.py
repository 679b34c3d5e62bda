#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_facts
short_description: Read the facts this collection uses, and check that a GPU node runs systemd and apt
version_added: 0.1.0
description:
  - Gathers, with Ansible's own fact collectors, the facts the collection's roles read (the
    distribution and its version, the OS family, the service manager, the package manager and the
    environment) and returns them as C(ansible_facts), as M(ansible.builtin.setup) would with
    O(ansible.builtin.setup#module:gather_subset=!all,!min,distribution,pkg_mgr,service_mgr,env).
  - On a GPU node (O(gpu_node=true)) also reads systemd's own state over D-Bus (C(busctl), the
    manager's C(SystemState)) and fails unless the service manager is systemd, running or degraded
    (booted, some unit failed), and the package manager is apt.
  - One task per host in place of fact gathering, a command and an assert; read-only.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  gpu_node:
    description:
      - Whether the host is a GPU node, which must run systemd and apt.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  diff_mode:
    support: none
    details: The module changes nothing.
  facts:
    support: full
  platform:
    platforms: posix
    description: Runs on the host itself.
    support: full
  idempotent:
    description: Reading twice gives the same result and changes nothing.
    support: full
notes:
  - Plays that run it set C(gather_facts) to false; the facts it returns are those the collection
    reads, so a later M(ansible.builtin.setup) is needed only for others.
"""

EXAMPLES = r"""
- name: Check every host, and GPU nodes for systemd and apt
  glm.fleet.host_facts:
    gpu_node: "{{ 'gpu_nodes' in group_names }}"
"""

RETURN = r"""
ansible_facts:
  description: The facts gathered, under the names M(ansible.builtin.setup) gives them.
  returned: success
  type: dict
  sample: {distribution: Debian, distribution_version: "12.8", os_family: Debian, service_mgr: systemd, pkg_mgr: apt}
system_state:
  description: systemd's C(SystemState) on a GPU node (V(running), V(degraded), V(starting) and so on); null elsewhere.
  returned: success
  type: str
  sample: running
msg:
  description: What the host runs, in one line.
  returned: always
  type: str
  sample: Debian 12.8, service manager systemd (running)
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts import ansible_collector, default_collectors
from ansible.module_utils.facts.namespace import PrefixFactNamespace

SUBSET = ["!all", "!min", "distribution", "pkg_mgr", "service_mgr", "env"]
# As ansible.builtin.setup names it: what "min" means (none of it is gathered with "!min").
MINIMAL = frozenset(
    (
        *("apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips", "local"),
        *("lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr", "ssh_pub_keys", "user"),
    )
)
SYSTEM_STATE = [
    *("busctl", "get-property", "org.freedesktop.systemd1", "/org/freedesktop/systemd1"),
    *("org.freedesktop.systemd1.Manager", "SystemState"),
]
SERVING_STATES = ("running", "degraded")


def parse_system_state(output: str) -> str:
    """busctl's reply for a string property (`s "running"`) as the string; what it said otherwise."""
    kind, _sep, value = output.strip().partition(" ")
    if kind != "s":
        return output.strip()
    try:
        state = json.loads(value)
    except ValueError:
        return output.strip()
    return state if isinstance(state, str) else output.strip()


def describe(facts: dict, state: str | None) -> str:
    """One line for the host: its distribution, version and service manager (with systemd's state)."""
    distribution = f"{facts.get('ansible_distribution', 'unknown')} {facts.get('ansible_distribution_version', '')}"
    line = f"{distribution.strip()}, service manager {facts.get('ansible_service_mgr', 'unknown')}"
    return line + (f" ({state})" if state is not None else "")


def problem(facts: dict, state: str | None, gpu_node: bool) -> str | None:
    """Why a GPU node cannot carry the fleet's services, None when it can (or the host is not one)."""
    if not gpu_node:
        return None
    if (
        facts.get("ansible_service_mgr") == "systemd"
        and state in SERVING_STATES
        and facts.get("ansible_pkg_mgr") == "apt"
    ):
        return None
    return (
        "glm.fleet supports GPU nodes with systemd and apt (Debian 12, Ubuntu 22.04/24.04); got"
        f" service_mgr={facts.get('ansible_service_mgr')} in state {state}, pkg_mgr={facts.get('ansible_pkg_mgr')}"
        f" on {facts.get('ansible_distribution')} {facts.get('ansible_distribution_version')}"
    )


def main() -> None:
    module = AnsibleModule(argument_spec={"gpu_node": {"type": "bool", "default": False}}, supports_check_mode=True)
    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=default_collectors.collectors,
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        filter_spec=[],
        gather_subset=SUBSET,
        gather_timeout=10,
        minimal_gather_subset=MINIMAL,
    )
    facts = collector.collect(module=module)
    state = None
    if module.params["gpu_node"]:
        rc, out, err = module.run_command(SYSTEM_STATE)
        state = parse_system_state(out) if rc == 0 else f"unknown (busctl exit {rc}: {(err or out).strip()})"
    why = problem(facts, state, module.params["gpu_node"])
    if why:
        module.fail_json(msg=why, system_state=state)
    module.exit_json(changed=False, ansible_facts=facts, system_state=state, msg=describe(facts, state))


if __name__ == "__main__":
    main()
