#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: await_job
short_description: Wait for a detached job and show its progress while it runs
version_added: 0.1.0
description:
  - Reads the job file of a detached job (M(glm.fleet.image_pull) with C(job_file)) until the job
    ends, and returns the job's own result. Each time the job's progress changes, prints a line with
    it (layers, bytes done and total, rate, ETA).
  - The job runs on the host on its own, so an SSH drop or a task timeout does not stop it; this
    action only watches it. A worker that is gone without a result (killed, or the host rebooted)
    fails the task with that said; the next run starts the job again.
  - Runs as an action plugin on the controller; this file only documents it.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  job_file:
    description: The job file the worker rewrites while it runs.
    type: path
    required: true
  timeout:
    description: Seconds to wait before failing (the job itself goes on).
    type: float
    default: 86400
  interval:
    description: Seconds between two polls.
    type: float
    default: 5
  what:
    description: What the job does, for the progress lines.
    type: str
    default: job
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: none
    details: There is no job to wait for in check mode; skip the task there.
"""

EXAMPLES = r"""
- name: Pull the image in a detached worker
  glm.fleet.image_pull:
    reference: "{{ image }}"
    job_file: /var/lib/glm-fleet/pull.json
  vars:
    ansible_pipelining: true

- name: Wait for it, showing progress
  glm.fleet.await_job:
    job_file: /var/lib/glm-fleet/pull.json
    what: pull
"""

RETURN = r"""
waited_s:
  description: Seconds waited.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "job_file": {"type": "path", "required": True},
            "timeout": {"type": "float", "default": 86400},
            "interval": {"type": "float", "default": 5},
            "what": {"type": "str", "default": "job"},
        }
    )
    module.fail_json(msg="glm.fleet.await_job runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
