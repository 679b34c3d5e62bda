#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read a node's NVIDIA GPUs, driver and NVLink fabric
version_added: 0.1.0
description:
  - Runs C(nvidia-smi) to read every GPU of the node (index, name, UUID, PCI bus, memory, compute
    capability), the driver version and the CUDA version the driver supports.
  - Tells whether the node's GPUs sit behind NVSwitches (an NVLink fabric, as on HGX B200 and H200
    systems) and whether NVIDIA's fabric manager service is active there.
  - Read-only. Returns the same data as C(ansible_facts.glm_fleet_gpus).
author:
  - glm.fleet contributors (@glm-fleet)
options:
  nvidia_smi:
    description:
      - Name or path of the C(nvidia-smi) executable; a bare name is searched on E(PATH).
    type: str
    default: nvidia-smi
  fabric_manager_service:
    description:
      - The systemd unit of NVIDIA's fabric manager, whose state is reported.
    type: str
    default: nvidia-fabricmanager.service
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  diff_mode:
    support: none
    details: The module changes nothing.
  facts:
    support: full
  platform:
    platforms: posix
    description: Runs on the GPU node itself.
    support: full
  idempotent:
    description: Reading the GPUs twice gives the same result and changes nothing.
    support: full
notes:
  - Fails with the output of C(nvidia-smi) when it is missing or cannot talk to the driver.
  - Drivers older than the NVLink fabric fields (C(fabric.state)) are asked without them.
"""

EXAMPLES = r"""
- name: Read the node's GPUs
  glm.fleet.gpu_facts:

- name: Need four GPUs for TP=4
  ansible.builtin.assert:
    that: ansible_facts['glm_fleet_gpus']['count'] >= 4
"""

RETURN = r"""
count:
  description: Number of GPUs.
  returned: success
  type: int
  sample: 4
gpus:
  description: One entry per GPU, by index.
  returned: success
  type: list
  elements: dict
  contains:
    index: {description: GPU index as nvidia-smi numbers it., type: int, sample: 0}
    name: {description: Product name., type: str, sample: NVIDIA B200}
    uuid: {description: GPU UUID., type: str, sample: GPU-3f4c2a10-8d5e-4b1a-9c7f-0e2d6b8a1c01}
    pci_bus_id: {description: PCI bus id., type: str, sample: "00000000:1B:00.0"}
    memory_mib: {description: Total memory in MiB., type: int, sample: 183359}
    compute_capability: {description: CUDA compute capability., type: str, sample: "10.0"}
    driver_version: {description: Driver version., type: str, sample: 580.95.05}
    fabric_state:
      description: NVLink fabric registration state, null where not applicable.
      type: str
      sample: Completed
    fabric_status:
      description: NVLink fabric registration status, null where not applicable.
      type: str
      sample: Success
names:
  description: Distinct GPU product names.
  returned: success
  type: list
  elements: str
  sample: [NVIDIA B200]
total_memory_mib:
  description: Memory of all GPUs together, MiB.
  returned: success
  type: int
  sample: 733436
min_memory_mib:
  description: Memory of the smallest GPU, MiB.
  returned: success
  type: int
  sample: 183359
min_compute_capability:
  description: Lowest compute capability among the GPUs.
  returned: success
  type: str
  sample: "10.0"
driver_version:
  description: NVIDIA driver version.
  returned: success
  type: str
  sample: 580.95.05
cuda_version:
  description: Highest CUDA version the driver supports.
  returned: success
  type: str
  sample: "13.0"
nvswitch:
  description: Whether the GPUs are connected through NVSwitches (NVLink fabric or nvswitch devices present).
  returned: success
  type: bool
  sample: true
nvswitch_devices:
  description: Number of C(/dev/nvidia-nvswitch<N>) devices.
  returned: success
  type: int
  sample: 2
fabric_registered:
  description: Whether every GPU in the fabric finished registration successfully.
  returned: success
  type: bool
  sample: true
fabric_manager_active:
  description: Whether the fabric manager unit is active; null where systemd is not available.
  returned: success
  type: bool
  sample: true
"""

import glob

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._nvidia_smi import (
    BASE_FIELDS,
    FABRIC_FIELDS,
    NvidiaSmiError,
    is_unknown_field_error,
    parse_query,
    parse_version,
    query_args,
    summarize,
)


def read_gpus(module: AnsibleModule, nvidia_smi: str) -> list[dict]:
    fields = BASE_FIELDS + FABRIC_FIELDS
    rc, out, err = module.run_command([nvidia_smi, *query_args(fields)])
    if rc != 0 and is_unknown_field_error(out + err):
        fields = BASE_FIELDS
        rc, out, err = module.run_command([nvidia_smi, *query_args(fields)])
    if rc != 0:
        module.fail_json(msg=f"nvidia-smi failed (rc={rc}): {(err or out).strip()}", rc=rc, stdout=out, stderr=err)
    return parse_query(out, fields)


def fabric_manager_state(module: AnsibleModule, unit: str) -> bool | None:
    systemctl = module.get_bin_path("systemctl")
    if systemctl is None:
        return None
    rc, _out, _err = module.run_command([systemctl, "is-active", "--quiet", unit])
    return rc == 0


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "fabric_manager_service": {"type": "str", "default": "nvidia-fabricmanager.service"},
        },
        supports_check_mode=True,
    )
    nvidia_smi = module.get_bin_path(module.params["nvidia_smi"])
    if nvidia_smi is None:
        module.fail_json(
            msg=f"nvidia-smi not found (nvidia_smi={module.params['nvidia_smi']}): "
            "install the NVIDIA driver on this node first"
        )
    try:
        gpus = read_gpus(module, nvidia_smi)
        rc, out, err = module.run_command([nvidia_smi, "--version"])
        if rc != 0:
            module.fail_json(msg=f"nvidia-smi --version failed (rc={rc}): {(err or out).strip()}")
        versions = parse_version(out)
    except NvidiaSmiError as exc:
        module.fail_json(msg=str(exc))
    facts = summarize(
        gpus,
        versions,
        nvswitch_devices=len(glob.glob("/dev/nvidia-nvswitch[0-9]*")),
        fabric_manager_active=fabric_manager_state(module, module.params["fabric_manager_service"]),
    )
    module.exit_json(changed=False, ansible_facts={"glm_fleet_gpus": facts}, **facts)


if __name__ == "__main__":
    main()
