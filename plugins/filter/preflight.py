# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight checks of a GPU node, from what glm.fleet.gpu_facts and df read, in one pass."""

from __future__ import annotations

from ansible.module_utils.compat.version import LooseVersion

from ansible_collections.glm.fleet.plugins.filter.disk import disk_shortfalls

DOCUMENTATION = r"""
---
name: preflight_problems
short_description: What keeps a GPU node from serving the model, one message per failed check
version_added: 0.1.0
description:
  - Compares the node's GPUs, driver, NVLink fabric and free disk space with the preflight
    settings, and returns one message per check that fails (none when the node is fit), each naming
    the setting and what the node has, so that a refusal names every problem at once.
  - The fabric check applies only to nodes with NVSwitches, and only when the fabric manager is
    required.
author:
  - glm.fleet contributors (@glm-fleet)
positional: df_output, settings
options:
  _input:
    description: The C(glm_fleet_gpus) fact of glm.fleet.gpu_facts.
    type: dict
    required: true
  df_output:
    description: Standard output of C(df --all --output=avail,target -B1) on the node.
    type: str
    required: true
  settings:
    description:
      - C(host), C(required_gpus), C(min_gpu_memory_gb), C(min_driver_version),
        C(disk_requirements), C(require_fabric_manager) and C(fabric_manager_service), the values
        of the role's variables of those names.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the node against what the server needs
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join(' ') }}"
  vars:
    problems: "{{ ansible_facts['glm_fleet_gpus'] | glm.fleet.preflight_problems(df.stdout, settings) }}"
"""

RETURN = r"""
_value:
  description: One message per failed check; empty when the node passes them all.
  type: list
  elements: str
"""


def memory_gb(gpus: dict) -> float:
    """The node's GPU memory in all, in GB (10^9 bytes), to one decimal."""
    return round(int(gpus["total_memory_mib"]) * 1.048576 / 1000, 1)


def preflight_problems(gpus: dict, df_output: str, settings: dict) -> list[str]:
    host = settings["host"]
    problems = []
    required = int(settings["required_gpus"])
    if int(gpus["count"]) < required:
        problems.append(
            f"{host} has {gpus['count']} GPU(s) ({', '.join(gpus['names'])}); preflight_required_gpus (the"
            f" server's tensor-parallel size) is {settings['required_gpus']}."
        )
    minimum = float(settings["min_gpu_memory_gb"])
    if memory_gb(gpus) < minimum:
        problems.append(
            f"{host} has {memory_gb(gpus)} GB of GPU memory in all; preflight_min_gpu_memory_gb is"
            f" {settings['min_gpu_memory_gb']} (the model's FP8 weights are about 320 GB, plus room for"
            " activations and the KV cache)."
        )
    driver = str(gpus["driver_version"])
    if LooseVersion(driver) < LooseVersion(str(settings["min_driver_version"])):
        problems.append(
            f"{host} runs NVIDIA driver {driver} (CUDA {gpus['cuda_version']}); preflight_min_driver_version"
            f" is {settings['min_driver_version']}: upgrade the driver first."
        )
    short = disk_shortfalls(settings["disk_requirements"], df_output)
    if short:
        each = "; ".join(
            f"{' + '.join(s['paths'])} need {s['need_gb']} GB on {s['mount']}, {s['free_gb']} GB free" for s in short
        )
        problems.append(f"{host} lacks disk space for preflight_disk_requirements: {each}.")
    fabric_ok = gpus["fabric_manager_active"] and gpus["fabric_registered"]
    if settings["require_fabric_manager"] and gpus["nvswitch"] and not fabric_ok:
        states = ", ".join(dict.fromkeys(str(gpu["fabric_state"]) for gpu in gpus["gpus"]))
        active = "active" if gpus["fabric_manager_active"] else "not active"
        problems.append(
            f"{host} has NVSwitches but {settings['fabric_manager_service']} (preflight_fabric_manager_service)"
            f" is {active} and the GPUs' fabric state is {states}: start the fabric manager (or set"
            " preflight_require_fabric_manager=false on systems without it)."
        )
    return problems


class FilterModule:
    def filters(self) -> dict:
        return {"preflight_problems": preflight_problems}
