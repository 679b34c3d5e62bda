#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: report_files
short_description: Write a report's files into one directory, in one task
version_added: 0.1.0
description:
  - Creates O(dir) when it is missing and writes each of O(files) into it whole (a temporary file
    renamed over the old one) where its content differs; a file whose content is the same is left
    as it is. The fleet health report writes its JSON and Markdown with it.
  - Changed when a file was (in check mode, would be) written or the directory created.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  dir:
    description: The directory of the files, created with mode 0755 when missing.
    type: path
    required: true
  files:
    description: File name (no directory part) to its text content.
    type: dict
    required: true
  mode:
    description: The files' mode, set on every file written.
    type: raw
    default: "0644"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  diff_mode:
    support: full
    details: Each file that changes (would change, in check mode), as its text before and after.
"""

EXAMPLES = r"""
- name: Write the fleet health report
  glm.fleet.report_files:
    dir: ./fleet-report
    files:
      fleet-health.json: "{{ report | to_nice_json }}\n"
      fleet-health.md: "{{ report_markdown }}"
"""

RETURN = r"""
written:
  description: The paths written (in check mode, those that would be).
  returned: success
  type: list
  elements: str
  sample: [./fleet-report/fleet-health.json]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._files import file_diff, read, write_private


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a file of the directory, naming it, or None."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return f"files: a name is a file name in dir, without a directory part; got {name!r}"
    return None


def write(directory: str, files: dict[str, str], mode: int, check: bool) -> tuple[list[str], list[dict], bool]:
    """(paths written or to write, their --diff entries, whether the directory is new)."""
    created = not os.path.isdir(directory)
    if created and not check:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    written, diffs = [], []
    for name in sorted(files):
        path = os.path.join(directory, name)
        data = files[name].encode()
        before = read(path)
        if before == data:
            continue
        written.append(path)
        diffs.append(file_diff(path, before, data))
        if not check:
            write_private(path, data, mode)
    return written, diffs, created


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dir": {"type": "path", "required": True},
            "files": {"type": "dict", "required": True},
            "mode": {"type": "raw", "default": "0644"},
        },
        supports_check_mode=True,
    )
    p = module.params
    for name in p["files"]:
        problem = name_problem(str(name))
        if problem:
            module.fail_json(msg=problem)
    try:
        mode = int(str(p["mode"]), 8)
    except ValueError:
        module.fail_json(msg=f"mode must be an octal mode such as 0644; got {p['mode']!r}")
    if os.path.exists(p["dir"]) and not os.path.isdir(p["dir"]):
        module.fail_json(msg=f"dir: {p['dir']} exists and is not a directory")
    files = {str(name): str(content) for name, content in p["files"].items()}
    written, diffs, created = write(p["dir"], files, mode, module.check_mode)
    module.exit_json(changed=bool(written) or created, written=written, **({"diff": diffs} if module._diff else {}))


if __name__ == "__main__":
    main()
