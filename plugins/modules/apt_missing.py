#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_missing
short_description: The apt package specs that a host's installed packages do not satisfy
version_added: 0.1.0
description:
  - Reads the host's dpkg database once (C(dpkg-query), milliseconds) and returns the package specs
    (C(name) or C(name=version), as M(ansible.builtin.apt) takes them) that it does not satisfy, in
    order. Roles run M(ansible.builtin.apt) only when this list is not empty, because apt opens its
    whole cache (most of a second of a core) even when every package is present.
  - A C(name) spec is satisfied by any installed version, a C(name=version) spec only by that exact
    version. A spec in any other form (a wildcard, a release, an architecture) is returned as not
    satisfied, so that apt decides.
  - Returns, from the same read, the packages marked to hold (as C(apt-mark showhold) lists them).
  - Changes nothing, and runs in check mode.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  packages:
    description: The package specs.
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  platform:
    platforms: debian
"""

EXAMPLES = r"""
- name: Read which packages are missing
  glm.fleet.apt_missing:
    packages: [nginx, pigz=2.6-1]
  register: missing

- name: Install them
  ansible.builtin.apt:
    name: "{{ missing.missing }}"
  when: missing.missing | length > 0
"""

RETURN = r"""
missing:
  description: The specs that the installed packages do not satisfy.
  returned: success
  type: list
  elements: str
  sample: [pigz=2.6-1]
held:
  description: The names of the packages marked to hold, every one the host holds, sorted.
  returned: success
  type: list
  elements: str
  sample: [nvidia-container-toolkit]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._dpkg import DPKG_QUERY, apt_missing, held


def main() -> None:
    module = AnsibleModule(
        argument_spec={"packages": {"type": "list", "elements": "str", "required": True}},
        supports_check_mode=True,
    )
    rc, out, err = module.run_command(DPKG_QUERY)
    if rc != 0:
        module.fail_json(msg=f"dpkg-query failed ({rc}): {err.strip()}")
    module.exit_json(changed=False, missing=apt_missing(module.params["packages"], out), held=held(out))


if __name__ == "__main__":
    main()
