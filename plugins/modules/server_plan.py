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
      port_offset:
        description:
          - Added to each server's port to probe it there (behind a TLS front, the server answers on
            loopback at its port plus C(sglang_server_tls_port_offset)).
        type: int
        default: 0
      expected:
        description: M(glm.fleet.sglang_health)'s O(glm.fleet.sglang_health#module:expected).
        type: dict
        default: {}
  guards:
    description:
      - Each server's port guard, to check in place on the node (a firewall reload or an C(iptables -F) takes
        its rules away while the server runs) - C(program), the guard's path (run by C(python3) with
        C(--check)), and C(servers), each server's name to the guard's arguments (chain, port, allowed
        sources). A server not in O(changed) whose guard is not in place is a reason, named in
        RV(guards_missing).
    type: dict
  files:
    description:
      - Files of the node that must hold given content, by label (the TLS front's certificate, which the
        controller renews), each C(path) and C(sha256). One that is missing or differs is a reason
        (C(the node's <label> would change)), named in RV(files_differ).
    type: dict
  image:
    description:
      - An image on the node, pinned by digest, whose SGLang release to read (RV(image_sglang_version)). In a
        container of it with no network, the plain C(runc) runtime (no GPU) and no pull, C(python3) asks
        C(importlib.metadata) for the C(sglang) distribution's version, while the servers are probed.
      - An image the engine lacks, or a failed read, gives RV(image_sglang_version=null) and RV(image_error).
    type: str
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
image_sglang_version:
  description: The SGLang release O(image) holds; null without O(image) or when the read failed.
  returned: always
  type: str
  sample: 0.5.23
image_error:
  description: Why the read of O(image)'s release failed; empty when it did not.
  returned: always
  type: str
systemd:
  description: The output of C(systemctl show) for the units of the servers probed.
  returned: always
  type: str
files_differ:
  description: The labels of O(files) whose file is missing or holds other content.
  returned: always
  type: list
  elements: str
guards_missing:
  description: The servers (not in O(changed)) whose port guard is not in place, each to what is missing.
  returned: always
  type: dict
reasons:
  description: One sentence per reason the node needs the rolling restart; empty when it stays steady.
  returned: always
  type: list
  elements: str
"""

import hashlib
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._sglang_health import probe

SHOW = "--property=Id,LoadState,ActiveState,UnitFileState,NeedDaemonReload"
# The release of the image's `sglang` distribution, read without network, GPU or pull.
RELEASE = "import importlib.metadata as m; print(m.version('sglang'))"
PROBE = {
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "served_model_name": {"type": "str", "required": True},
    "expected": {"type": "dict", "default": {}},
    "port_offset": {"type": "int", "default": 0},
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
            "image": {"type": "str"},
            "guards": {"type": "dict"},
            "files": {"type": "dict"},
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
    # One round of checks per server, no wait; the servers answer at once rather than one by one, and
    # the image's release is read beside them.
    params = {**module.params["probe"], "timeout": 0}
    offset = params.pop("port_offset") or 0
    image = module.params["image"]
    with ThreadPoolExecutor(max_workers=len(unchanged) + 1) as pool:
        release = pool.submit(image_release, module, image) if image else None
        health = list(pool.map(lambda server: probe(params, server["port"] + offset), unchanged))
        version, error = release.result() if release else (None, "")
    missing = guards_missing(module, module.params["guards"] or {}, [server["name"] for server in unchanged])
    module.exit_json(
        changed=False, systemd=systemd, health=health, image_sglang_version=version, image_error=error,
        guards_missing=missing, files_differ=files_differ(module.params["files"] or {}),
    )  # fmt: skip


def files_differ(files: dict) -> list[str]:
    """The labels whose file is missing or whose content's sha256 is not the one given."""
    differ = []
    for label, want in sorted(files.items()):
        try:
            with open(str(want["path"]), "rb") as f:
                have = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            have = ""
        if have != str(want.get("sha256", "")):
            differ.append(label)
    return differ


def guards_missing(module: AnsibleModule, guards: dict, names: list[str]) -> dict[str, str]:
    """Each named server whose port guard is not in place (the guard's --check), to what is missing."""
    program, argv_by_server = guards.get("program"), guards.get("servers") or {}
    missing = {}
    for name in names:
        if not program or name not in argv_by_server:
            continue
        argv = ["python3", str(program), "--check", *(str(word) for word in argv_by_server[name])]
        rc, out, err = module.run_command(argv)
        if rc != 0:
            missing[name] = (out.strip() or err.strip() or f"exit status {rc}").splitlines()[-1]
    return missing


def image_release(module: AnsibleModule, image: str) -> tuple[str | None, str]:
    """(the SGLang release the image holds, None) or (None, why the read failed)."""
    docker = module.get_bin_path("docker")
    if docker is None:  # a fresh node in check mode: the toolkit stage of the same run installs it
        return None, "the docker CLI is not installed"
    argv = [docker, "run", "--rm", "--pull", "never", "--network", "none", "--runtime", "runc"]
    rc, out, err = module.run_command([*argv, "--entrypoint", "python3", image, "-c", RELEASE])
    lines = out.strip().splitlines()
    if rc != 0 or not lines:
        said = (err.strip() or out.strip()).splitlines()  # a traceback's last line, or the engine's
        return None, (said[-1] if said else f"exit status {rc}")[-300:]
    return lines[-1].strip(), ""


if __name__ == "__main__":
    main()
