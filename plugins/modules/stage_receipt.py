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
    systemd units by enablement and state; images by id; trees of files by path, size, mtime, change
    time and inode; directory listings).
  - With O(state=check), for each role, the receipt is read and the same things are looked at again;
    a role whose receipt is missing, has another digest, or whose look finds anything different is
    stale, with the reason. A role ends at its door where its receipt stands, so a converged host spends
    one task on it.
  - Changes nothing with O(state=check). With O(state=record), writes a receipt only when its content
    differs (changed), and not in check mode.
  - Use the action plugin of the same name (it computes the digests); the module takes them given.
  - The action takes C(roles), the roles whose receipts to read. A role's secrets enter its digest where its
    C(vars/main.yml) sets C(__<role>_receipt_secrets=true) (a role that writes one into a file, as the
    servers' API keys). What a role computes before its door and no option holds (the scrape targets other
    hosts published, keys read or generated on the controller) enters its digest where its C(vars/main.yml)
    names it in C(__<role>_receipt_inputs), a mapping templated at the door; such a receipt is read at that
    role's door only. With C(stood), the roles whose receipts an earlier door of this run read and found
    all standing (the preflight's C(preflight_receipts_stood)), the host is not contacted again for them, as
    no role ran on it since. A role reads its own receipt at its door and ends there
    (M(ansible.builtin.meta) C(end_role))
    when RV(stale) is empty; with C(ignore=true) (C(glm_fleet_ignore_receipts)) every receipt reads as stale.
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
  diff_mode:
    support: full
    details: A receipt written, a line per thing it looks at; whether its inputs and each file's content differ, never a
      digest or a hash.
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
stale:
  description: With O(state=check), why each stale receipt does not stand, by name; empty when every receipt stands.
  returned: success
  type: dict
  sample:
    nvidia_container_toolkit: "changed since its receipt: file /etc/docker/daemon.json: ..."
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

# A receipt is named after its role.
NAME = re.compile(r"[a-z][a-z0-9_]*")
DIGEST = re.compile(r"[0-9a-f]{64}")


def entry_problem(entry: dict, state: str) -> str | None:
    """Why a receipts entry cannot be used, naming the value, or None."""
    if not NAME.fullmatch(entry.get("name") or ""):
        return f"receipts: name must be a role name; got {entry.get('name')!r}"
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


def record(
    entries: list[dict], root: str, run: Callable[[list[str]], str], check_mode: bool
) -> tuple[list[str], list[dict]]:
    """Writes each entry's receipt from a fresh look (root-only, in a root-only directory), unless it
    has that content already; the names of the receipts written (or, in check mode, to write), and
    each one's `--diff` entry (_receipt.shown: no digest, no file's hash)."""
    changed, diffs = [], []
    for entry in entries:
        path = receipt_path(root, entry["name"])
        data = _receipt.render(entry["digest"], entry["observe"], _receipt.observe(entry["observe"], run))
        before = read(path)
        if before != data:
            changed.append(entry["name"])
            old, new = _receipt.parse(before), _receipt.parse(data)
            diffs.append(
                {
                    "before_header": path if before is not None else f"{path} (absent)",
                    "after_header": path,
                    "before": _receipt.shown(old, new),
                    "after": _receipt.shown(new, old),
                }
            )
            if not check_mode:
                os.makedirs(root, mode=0o700, exist_ok=True)
                write_private(path, data, 0o600)
    return changed, diffs


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
    written, diffs = record(entries, root, run, module.check_mode)
    module.exit_json(changed=bool(written), recorded=written, stale={}, **({"diff": diffs} if module._diff else {}))


if __name__ == "__main__":
    main()
