#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_snapshot
short_description: Keep a copy of a set of files as they are, and put them back as they were
version_added: 0.1.0
description:
  - With O(state=saved), copies each of O(paths) into O(dest) (root-only, 0600, in a 0700
    directory) and records which of them existed, with their modes; a file that does not exist is
    recorded as absent. Only what differs from the snapshot already there is written; the copy of a
    file an earlier snapshot kept and this one does not is removed.
  - With O(state=restored), puts the files back as the snapshot recorded them (content and mode),
    and removes those it recorded as absent; with O(paths), only those of them. When O(dest) holds no
    snapshot, fails, or with O(missing_ok) returns C(restored=false) and changes nothing.
  - The server role keeps a server's unit and environment files once they pass the health gate, and
    restores them when a new version fails it; the keys are not kept, so that a rollback never puts
    back keys that were rotated.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  paths:
    description:
      - Absolute paths of the files to keep (O(state=saved)), or of those of the snapshot's files to put back
        (O(state=restored); empty, every one).
    type: list
    elements: path
    default: []
  dest:
    description: The snapshot's directory.
    type: path
    required: true
  state:
    description: Save the files into the snapshot, or restore them from it.
    type: str
    choices: [saved, restored]
    default: saved
  missing_ok:
    description: With O(state=restored), a missing snapshot is not an error (nothing to roll back to).
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  diff_mode:
    support: full
    details: Each file that changes (would change, in check mode), by its size only, as the files may hold secrets.
"""

EXAMPLES = r"""
- name: Keep the server's files as they are before this run
  glm.fleet.file_snapshot:
    paths: [/etc/systemd/system/sglang.service, /etc/glm-fleet/sglang/sglang.env]
    dest: /etc/glm-fleet/sglang/previous/sglang

- name: Put them back
  glm.fleet.file_snapshot:
    dest: /etc/glm-fleet/sglang/previous/sglang
    state: restored
"""

RETURN = r"""
restored:
  description: With O(state=restored), whether there was a snapshot to restore from.
  returned: always
  type: bool
files:
  description: Each path with C(present) (as saved or restored) and C(changed).
  returned: always
  type: list
  elements: dict
  sample: [{path: /etc/systemd/system/sglang.service, present: true, changed: false}]
"""

import contextlib
import json
import os
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._files import file_diff, read, write_private

MANIFEST = "manifest.json"


def stored_name(path: str) -> str:
    """The name a file's copy has in the snapshot: its path with / as %2F (and % as %25)."""
    return path.replace("%", "%25").replace("/", "%2F")


def plan_save(paths: list[str], dest: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest to write and, per path, whether the snapshot differs from the file now."""
    old = read_manifest(dest) or {}
    manifest: dict[str, Any] = {}
    files = []
    for path in paths:
        data = read(path)
        entry = {"present": data is not None}
        if data is not None:
            entry["mode"] = stat.S_IMODE(os.stat(path).st_mode)
        manifest[path] = entry
        copy = read(os.path.join(dest, stored_name(path)))
        files.append({"path": path, "present": data is not None, "changed": old.get(path) != entry or copy != data})
    return manifest, files


def read_manifest(dest: str) -> dict[str, Any] | None:
    data = read(os.path.join(dest, MANIFEST))
    return json.loads(data) if data is not None else None


def save(paths: list[str], dest: str, check: bool) -> list[dict[str, Any]]:
    manifest, files = plan_save(paths, dest)
    dropped = sorted((read_manifest(dest) or {}).keys() - manifest.keys())
    files += [{"path": path, "present": False, "changed": True} for path in dropped]
    if check or (not any(f["changed"] for f in files) and read_manifest(dest) == manifest):
        return files
    os.makedirs(dest, mode=0o700, exist_ok=True)
    os.chmod(dest, 0o700)
    for path in dropped:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(dest, stored_name(path)))  # a file this snapshot no longer keeps
    for path, entry in manifest.items():
        copy = os.path.join(dest, stored_name(path))
        if entry["present"]:
            write_private(copy, read(path) or b"", 0o600)
        elif os.path.exists(copy):
            os.unlink(copy)
    write_private(os.path.join(dest, MANIFEST), json.dumps(manifest, sort_keys=True).encode(), 0o600)
    return files


def restore(dest: str, check: bool, only: list[str]) -> list[dict[str, Any]]:
    manifest = read_manifest(dest)
    if manifest is None:
        raise FileNotFoundError(f"no snapshot in {dest} (nothing was saved there)")
    files = []
    for path, entry in sorted(manifest.items()):
        if only and path not in only:
            continue
        now = read(path)
        if entry["present"]:
            data = read(os.path.join(dest, stored_name(path)))
            if data is None:
                raise FileNotFoundError(f"the snapshot in {dest} lacks its copy of {path}")
            mode = int(entry["mode"])
            changed = now != data or stat.S_IMODE(os.stat(path).st_mode) != mode
            if changed and not check:
                write_private(path, data, mode)
        else:
            changed = now is not None
            if changed and not check:
                os.unlink(path)
        files.append({"path": path, "present": bool(entry["present"]), "changed": changed})
    return files


def states(dest: str, restoring: bool, paths: list[str]) -> dict[str, tuple[bytes | None, bytes | None]]:
    """For --diff, per path, what the change replaces and what it writes: with state=restored the
    file now and the snapshot's copy; with state=saved the snapshot's copy and the file now."""
    if restoring:
        manifest = read_manifest(dest) or {}
        return {path: (read(path), read(os.path.join(dest, stored_name(path))) if entry.get("present") else None)
                for path, entry in manifest.items() if not paths or path in paths}  # fmt: skip
    return {path: (read(os.path.join(dest, stored_name(path))), read(path)) for path in paths}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "default": []},
            "dest": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["saved", "restored"], "default": "saved"},
            "missing_ok": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    paths, dest = module.params["paths"], module.params["dest"]
    bad = [p for p in paths if not os.path.isabs(p)]
    if bad:
        module.fail_json(msg=f"paths must be absolute; got: {bad}")
    restoring = module.params["state"] == "restored"
    if restoring and module.params["missing_ok"] and read_manifest(dest) is None:
        module.exit_json(changed=False, restored=False, files=[])
    before = states(dest, restoring, paths) if module._diff else {}
    try:
        files = restore(dest, module.check_mode, paths) if restoring else save(paths, dest, module.check_mode)
    except (OSError, ValueError) as err:
        module.fail_json(msg=str(err))
    # The files may hold secrets (a server's environment file holds its API key): sizes, not contents.
    diff = [
        file_diff(f["path"], *before[f["path"]], secret=True) for f in files if f["changed"] and f["path"] in before
    ]
    module.exit_json(
        changed=any(f["changed"] for f in files), restored=restoring, files=files, **({"diff": diff} if diff else {})
    )


if __name__ == "__main__":
    main()
