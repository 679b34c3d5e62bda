#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: foreign_files
short_description: Which of the distribution's files a role would replace someone else changed or wrote
version_added: 0.1.0
description:
  - A role that configures a package from the distribution replaces some of the package's own files
    (C(/etc/prometheus/prometheus.yml), C(/etc/default/prometheus), ...). On a host that a site shares,
    such a file may hold the site's own configuration. For each file this tells whether it is missing,
    glm.fleet's (C(glm.fleet) in its first five lines, as every file the collection writes has it), the
    package's version as shipped (the MD5 sum dpkg keeps for the package's conffile), or neither, that is
    foreign. The role refuses to go on while one is foreign, naming it, before anything changes.
  - A symbolic link, a directory or any other file that is not a regular file is foreign.
  - Changes nothing, and runs in check mode.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  files:
    description: The files the role replaces.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The file's absolute path.
        type: path
        required: true
      package:
        description:
          - The package that ships the file as a conffile. V(null) when none does (a file only a
            site or glm.fleet writes), where only a glm.fleet file or none passes.
        type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  platform:
    platforms: debian
"""

EXAMPLES = r"""
- name: Read whether a site changed Prometheus' configuration
  glm.fleet.foreign_files:
    files:
      - {path: /etc/prometheus/prometheus.yml, package: prometheus}
      - {path: /etc/keepalived/keepalived.conf, package: null}
  register: found

- name: Refuse to replace it
  ansible.builtin.assert:
    that: found.foreign | length == 0
    fail_msg: "{{ found.foreign | map(attribute='why') | join('; ') }}"
"""

RETURN = r"""
foreign:
  description: The files that are neither missing, glm.fleet's nor their package's as shipped, each with why.
  returned: success
  type: list
  elements: dict
  contains:
    path:
      description: The file.
      type: str
    why:
      description: What the file is, in words, with what to do about it.
      type: str
  sample:
    - path: /etc/prometheus/prometheus.yml
      why: /etc/prometheus/prometheus.yml is not glm.fleet's and differs from the one package prometheus ships
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._foreign import CONFFILES_QUERY, foreign


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {"path": {"type": "path", "required": True}, "package": {"type": "str"}},
            }
        },
        supports_check_mode=True,
    )
    files = module.params["files"]
    packages = sorted({f["package"] for f in files if f["package"]})
    listed = ""
    if packages:
        # Exit 1 when some package is not installed: what it printed for the others still counts.
        rc, listed, err = module.run_command([*CONFFILES_QUERY, *packages])
        if rc not in (0, 1):
            module.fail_json(msg=f"dpkg-query failed ({rc}): {err.strip()}")
    module.exit_json(changed=False, foreign=foreign(files, listed))


if __name__ == "__main__":
    main()
