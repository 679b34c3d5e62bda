#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_plan
short_description: Look at a node's servers live and send the node to the rolling restart or leave it steady
version_added: 0.1.0
description:
  - The live half of the server stage's plan (roles/sglang_server/tasks/plan.yml) in one task. For the
    servers whose unit, keys and environment would not change, reads systemd's view of their units
    (C(systemctl show)) and runs one round of M(glm.fleet.sglang_health)'s checks on each, all servers at
    once and with no wait; then
    works out the reasons for the rolling restart (the filter C(glm.fleet.rollout_reasons)) and names the
    group the node joins, O(rollout_group) when there is one, else O(steady_group) (RV(join_group)), for
    an M(ansible.builtin.group_by) task to join.
  - Read-only, also in check mode. A server that does not serve is a reason, not a failure.
  - An action plugin on the controller checks the arguments and works out the reasons; the reads run
    on the node in one run of this module.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  servers:
    description: The node's servers, C(sglang_server_instances) (each with its C(name) and C(port)).
    type: list
    elements: dict
    required: true
  changed:
    description: Names of the servers whose unit, keys or environment would change; they are not probed.
    type: list
    elements: str
    default: []
  host:
    description: Label of a node-wide file or directory to its registered check-mode result (a reason when changed).
    type: dict
    default: {}
  snapshot:
    description: The registered, looped check-mode result of M(glm.fleet.file_snapshot) on each server, or null.
    type: dict
  probe:
    description:
      - Arguments of M(glm.fleet.sglang_health) for every server; the port is each server's own. An empty
        O(probe.api_key) is left out.
    type: dict
    required: true
    suboptions:
      host:
        description: M(glm.fleet.sglang_health)'s O(glm.fleet.sglang_health#module:host), the same for every server.
        type: str
      api_key:
        description: M(glm.fleet.sglang_health)'s O(glm.fleet.sglang_health#module:api_key), the same for every server.
        type: str
      served_model_name:
        description: M(glm.fleet.sglang_health)'s O(glm.fleet.sglang_health#module:served_model_name).
        type: str
        required: true
      expected:
        description: M(glm.fleet.sglang_health)'s O(glm.fleet.sglang_health#module:expected).
        type: dict
        default: {}
  rollout_group:
    description: The group of the nodes that go through the rolling restart.
    type: str
    required: true
  steady_group:
    description: The group of the nodes left serving as they are.
    type: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  platform:
    platforms: debian
"""

EXAMPLES = r"""
- name: Look at the servers and send the node to the rolling restart, or leave it serving
  glm.fleet.server_plan:
    servers: "{{ sglang_server_instances }}"
    probe:
      served_model_name: zai-org/GLM-5.3-Flash
      api_key: "{{ sglang_server_api_key }}"
    rollout_group: glm_fleet_sglang_rollout
    steady_group: glm_fleet_sglang_steady
  register: sglang_server_report

- name: Send the node to the rolling restart, or leave it serving
  ansible.builtin.group_by:
    key: "{{ sglang_server_report.join_group }}"
"""

RETURN = r"""
join_group:
  description: The group the node joins, O(rollout_group) or O(steady_group).
  returned: success
  type: str
  sample: glm_fleet_sglang_steady
results:
  description:
    - One per server probed (those not in O(changed)), in order, each with its C(__sglang_server_instance),
      the looped shape of a health round, which the fleet report reads. Each is the result of
      M(glm.fleet.sglang_health) (C(ready), C(checks), C(failed_check), C(server), C(drift)) with C(failed=false).
  returned: always
  type: list
  elements: dict
systemd:
  description: The output of C(systemctl show) for the units of the servers probed.
  returned: always
  type: str
reasons:
  description: One sentence per reason the node needs the rolling restart; empty when it stays steady.
  returned: always
  type: list
  elements: str
"""

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._sglang_health import probe

SHOW = "--property=Id,LoadState,ActiveState,UnitFileState,NeedDaemonReload"
PROBE = {
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "served_model_name": {"type": "str", "required": True},
    "expected": {"type": "dict", "default": {}},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "servers": {"type": "list", "elements": "dict", "required": True},
            "changed": {"type": "list", "elements": "str", "default": []},
            "host": {"type": "dict", "default": {}},
            "snapshot": {"type": "dict"},
            "probe": {"type": "dict", "required": True, "options": PROBE},
            "rollout_group": {"type": "str", "required": True},
            "steady_group": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    changed = set(module.params["changed"])
    unchanged = [server for server in module.params["servers"] if server["name"] not in changed]
    systemd = ""
    if unchanged:
        units = [f"{server['name']}.service" for server in unchanged]
        rc, out, err = module.run_command(["systemctl", "show", SHOW, *units])
        if rc != 0:
            module.fail_json(msg=f"systemctl show failed: {err.strip() or out.strip() or rc}")
        systemd = out
    # One round of checks per server, no wait; the servers answer at once rather than one by one.
    params = {**module.params["probe"], "timeout": 0}
    with ThreadPoolExecutor(max_workers=max(len(unchanged), 1)) as pool:
        health = list(pool.map(lambda server: probe(params, server["port"]), unchanged))
    module.exit_json(changed=False, systemd=systemd, health=health)


if __name__ == "__main__":
    main()
