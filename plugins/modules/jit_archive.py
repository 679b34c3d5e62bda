#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jit_archive
short_description: Publish or check the fleet's copy of a server's JIT caches, on the controller
version_added: 0.1.0
description:
  - The fleet's copy of a server's JIT caches is an archive that nodes unpack as root into the
    directory their servers load kernels from (C(glm.fleet.sglang_server)'s C(sglang_server_jit_share)).
    It may hold only directories and regular files, under relative paths inside that directory,
    without set-user-ID, set-group-ID or sticky bits and writable by their owner only; a link, a
    device or FIFO, an absolute path or one through C(..) is refused, named.
  - With O(state=published), checks the archive a node just packed (O(src)) and, when it passes, makes
    it the fleet's copy (O(path), renamed into place) with its SHA-256 recorded beside it
    (C(<path>.sha256), in C(sha256sum)'s format). An archive that fails is removed and nothing is
    published.
  - With O(state=verified), checks that the fleet's copy at O(path) has the SHA-256 recorded when it
    was published, and its members again, before a node is seeded from it. Changes nothing.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  path:
    description: The fleet's copy.
    type: path
    required: true
  src:
    description: The archive to publish (O(state=published)); it is renamed to O(path).
    type: path
  state:
    description: Publish O(src) as O(path), or verify O(path).
    type: str
    choices: [published, verified]
    default: verified
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  diff_mode:
    support: full
    details: The fleet's copy before and after, by its SHA-256 (an archive is not shown).
  platform:
    description: Runs on the controller (C(delegate_to) V(localhost)).
"""

EXAMPLES = r"""
- name: Make a node's packed caches the fleet's copy
  glm.fleet.jit_archive:
    src: /srv/fleet/jit/0123abcd-NVIDIA-B200-cc10.0.tar.gz.gpu-1.part
    path: /srv/fleet/jit/0123abcd-NVIDIA-B200-cc10.0.tar.gz
    state: published
  delegate_to: localhost

- name: Check the fleet's copy before seeding a node from it
  glm.fleet.jit_archive:
    path: /srv/fleet/jit/0123abcd-NVIDIA-B200-cc10.0.tar.gz
  delegate_to: localhost
"""

RETURN = r"""
sha256:
  description: The archive's SHA-256.
  returned: success
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._jit_archive import (
    archive_problems,
    manifest_line,
    recorded,
    sha256,
)


def publish(module: AnsibleModule, src: str, path: str) -> None:
    problems = archive_problems(src)
    if problems:
        if not module.check_mode:
            os.unlink(src)
        module.fail_json(msg=f"{src}: not published as the fleet's JIT caches: {'; '.join(problems)}")
    digest = sha256(src)
    shown = {}
    if module._diff:
        before = f"{path}: the fleet's copy, sha256 {recorded(path)}\n" if os.path.exists(path) else f"{path}: absent\n"
        after = f"{path}: the fleet's copy, sha256 {digest}\n"
        shown = {"diff": {"before_header": path, "after_header": path, "before": before, "after": after}}
    if module.check_mode:
        module.exit_json(changed=True, sha256=digest, **shown)
    record = f"{path}.sha256"
    with open(f"{record}.part", "w", encoding="ascii") as handle:
        handle.write(manifest_line(digest, path))
    os.replace(src, path)
    os.replace(f"{record}.part", record)
    module.exit_json(changed=True, sha256=digest, **shown)


def verify(module: AnsibleModule, path: str) -> None:
    expected = recorded(path)
    if not expected:
        module.fail_json(
            msg=f"{path}: no SHA-256 recorded in {path}.sha256; remove the archive, and a canary publishes anew"
        )
    digest = sha256(path)
    if digest != expected:
        module.fail_json(
            msg=f"{path}: its SHA-256 is {digest}, not the {expected} recorded when it was published;"
            " remove it and its .sha256, and a canary publishes anew"
        )
    problems = archive_problems(path)
    if problems:
        module.fail_json(msg=f"{path}: not unpacked into a node's JIT caches: {'; '.join(problems)}")
    module.exit_json(changed=False, sha256=digest)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "src": {"type": "path"},
            "state": {"type": "str", "choices": ["published", "verified"], "default": "verified"},
        },
        required_if=[("state", "published", ["src"])],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["state"] == "published":
            publish(module, p["src"], p["path"])
        verify(module, p["path"])
    except OSError as err:
        module.fail_json(msg=f"{p['path']}: {err}")


if __name__ == "__main__":
    main()
