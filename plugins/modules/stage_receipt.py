#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: stage_receipt
short_description: Record what a role left on a host, or tell in one read whether the host still holds it
version_added: 0.1.0
description:
  - A role's receipt is a root-only JSON file, C(<dir>/<role>.json), written by the role's last task
    when the whole role ran. It holds the digest of the role's inputs (its code and its settings for
    this host; the action plugin computes it on the controller) and a look at what the role manages
    (files by sha256, mode and owner; directories by mode and owner; packages by version and hold;
    systemd units by enablement and state; images by id; trees of files by path, size, mtime and
    inode; directory listings).
  - With O(state=check), for each role, the receipt is read and the same things are looked at again;
    a role whose receipt is missing, has another digest, or whose look finds anything different is
    stale, with the reason. The site's stage plays run only on the hosts where one of their roles is
    stale, so a converged host spends one task on a stage.
  - Changes nothing with O(state=check). With O(state=record), writes a receipt only when its content
    differs (changed), and not in check mode.
  - Use the action plugin of the same name (it computes the digests); the module takes them given.
  - The action takes C(roles) and a C(group) the host joins when one of them is stale; or C(stages), a list of
    C({group, roles, secrets}) in the order a run takes them, and a C(group) every host read joins. Then one
    read covers several stages, and the host joins the group of each stage due, that is whose receipts do not
    all stand, and of every stage after one due, since those run on what it may change; with none due, the
    group C(<group>_current). The action names the group (RV(join_group), under RV(join_parents)); an
    M(ansible.builtin.group_by) task joins it. A stage with C(secrets=true) compares its receipts with the
    secrets among its settings, as its role records them.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  state:
    description: Look at the receipts (V(check)) or write them (V(record)).
    type: str
    choices: [check, record]
    default: check
  dir:
    description: Where the receipts are kept (created 0700, root-only).
    type: path
    default: /var/lib/glm-fleet/receipts
  receipts:
    description: One entry per role.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The role's name (the receipt's file name).
        type: str
        required: true
      digest:
        description: The digest of the role's inputs, 64 hex.
        type: str
        required: true
      observe:
        description:
          - With O(state=record), what to look at, C({files, dirs, packages, units, images, trees, listings}),
            each a list of absolute paths, package names, unit names or image references.
        type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  platform:
    platforms: debian
"""

EXAMPLES = r"""
- name: Record what the role leaves on the node
  glm.fleet.stage_receipt:
    state: record
    role: nvidia_container_toolkit
    observe:
      files: [/etc/docker/daemon.json]
      packages: [nvidia-container-toolkit]
      units: [docker.service]
"""

RETURN = r"""
join_group:
  description: With O(state=check) and the action's C(group), the group the host joins.
  returned: when the action is given C(group)
  type: str
  sample: glm_fleet_stages_read_0_2
join_parents:
  description: The groups RV(join_group) is a child of (with C(stages), the groups of the stages due).
  returned: when the action is given C(group)
  type: list
  elements: str
  sample: [glm_fleet_stages_read, glm_fleet_stage_artifacts, glm_fleet_stage_server]
stale:
  description: With O(state=check), why each stale receipt does not stand, by name; empty when every receipt stands.
  returned: success
  type: dict
  sample:
    nvidia_container_toolkit: "changed since its receipt: file /etc/docker/daemon.json: ..."
stages:
  description: With the action's C(stages), why each stage is due, by group, in order; empty when every receipt stands.
  returned: when the action is given C(stages)
  type: dict
  sample:
    glm_fleet_stage_toolkit: "nvidia_container_toolkit: package nvidia-container-toolkit: held=True ..."
    glm_fleet_stage_artifacts: "it runs after the stage of glm_fleet_stage_toolkit, which this node goes through"
recorded:
  description: With O(state=record), the receipts written (in check mode, those that would be).
  returned: when O(state=record)
  type: list
  elements: str
  sample: [nvidia_container_toolkit]
"""

import os
import re
from collections.abc import Callable

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils import _receipt
from ansible_collections.glm.fleet.plugins.module_utils._files import read, write_private

# A role's name, or a role's name and a part of it (monitoring-exporters): the digest is the role's.
NAME = re.compile(r"[a-z][a-z0-9_]*(-[a-z0-9_]+)?")
DIGEST = re.compile(r"[0-9a-f]{64}")


def entry_problem(entry: dict, state: str) -> str | None:
    """Why a receipts entry cannot be used, naming the value, or None."""
    if not NAME.fullmatch(entry.get("name") or ""):
        return f"receipts: name must be a role name, or ROLE-PART; got {entry.get('name')!r}"
    if not DIGEST.fullmatch(entry.get("digest") or ""):
        return f"receipts: {entry['name']}: digest must be 64 lowercase hex; got {entry.get('digest')!r}"
    if state == "record":
        return _receipt.spec_problem(entry.get("observe"))
    return None


def receipt_path(root: str, name: str) -> str:
    return os.path.join(root, name + ".json")


def check(entries: list[dict], root: str, run: Callable[[list[str]], str]) -> dict[str, str]:
    """{name: why it is stale} over the entries whose receipt does not stand for the host now."""
    stale = {}
    for entry in entries:
        receipt = _receipt.parse(read(receipt_path(root, entry["name"])))
        same_inputs = receipt is not None and receipt.get("digest") == entry["digest"]
        observed = _receipt.observe(receipt["observe"], run) if receipt and same_inputs else None
        why = _receipt.staleness(receipt, entry["digest"], observed)
        if why:
            stale[entry["name"]] = why
    return stale


def record(entries: list[dict], root: str, run: Callable[[list[str]], str], check_mode: bool) -> list[str]:
    """Writes each entry's receipt from a fresh look (root-only, in a root-only directory), unless it
    has that content already; the names of the receipts written (or, in check mode, to write)."""
    changed = []
    for entry in entries:
        path = receipt_path(root, entry["name"])
        data = _receipt.render(entry["digest"], entry["observe"], _receipt.observe(entry["observe"], run))
        if read(path) != data:
            changed.append(entry["name"])
            if not check_mode:
                os.makedirs(root, mode=0o700, exist_ok=True)
                write_private(path, data, 0o600)
    return changed


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["check", "record"], "default": "check"},
            "dir": {"type": "path", "default": "/var/lib/glm-fleet/receipts"},
            "receipts": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "digest": {"type": "str", "required": True},
                    "observe": {"type": "dict"},
                },
            },
        },
        supports_check_mode=True,
    )
    state, root = module.params["state"], module.params["dir"]
    for entry in module.params["receipts"]:
        problem = entry_problem(entry, state)
        if problem:
            module.fail_json(msg=problem)

    def run(argv: list[str]) -> str:
        rc, out, err = module.run_command(argv)
        return out if rc == 0 else f"exit {rc}: {err.strip()}"

    entries = module.params["receipts"]
    if state == "check":
        module.exit_json(changed=False, stale=check(entries, root, run))
    written = record(entries, root, run, module.check_mode)
    module.exit_json(changed=bool(written), recorded=written, stale={})


if __name__ == "__main__":
    main()
