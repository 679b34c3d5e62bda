#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: await_job
short_description: Wait for an async job and show its progress while it runs
version_added: 0.1.0
description:
  - "Polls a job started with C(async) and C(poll: 0) until it finishes and returns the job's own
    result. Each time the job's O(progress_file) changes, prints a line with its progress (layers,
    bytes done and total, rate, ETA)."
  - The job runs on the host on its own, so an SSH drop or a task timeout does not stop it; this
    action only watches it.
  - Runs as an action plugin on the controller; this file only documents it.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  jid:
    description: The C(ansible_job_id) of the async task.
    type: str
    required: true
  progress_file:
    description: A JSON file the job rewrites while it runs (M(glm.fleet.image_pull) writes one).
    type: path
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
attributes:
  check_mode:
    support: none
    details: There is no job to wait for in check mode; skip the task there.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Pull the image as a job
  glm.fleet.image_pull:
    reference: "{{ image }}"
    progress_file: /var/lib/glm-fleet/pull.json
  async: 7200
  poll: 0
  register: pull_job

- name: Wait for it, showing progress
  glm.fleet.await_job:
    jid: "{{ pull_job.ansible_job_id }}"
    progress_file: /var/lib/glm-fleet/pull.json
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
            "jid": {"type": "str", "required": True},
            "progress_file": {"type": "path"},
            "timeout": {"type": "float", "default": 86400},
            "interval": {"type": "float", "default": 5},
            "what": {"type": "str", "default": "job"},
        }
    )
    module.fail_json(msg="glm.fleet.await_job runs as an action plugin on the controller")


if __name__ == "__main__":
    main()
