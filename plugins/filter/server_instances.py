# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong with a node's SGLang server instances, one message per problem."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

from ansible_collections.glm.fleet.plugins.module_utils._grammar import gpu_list, port, whole

DOCUMENTATION = r"""
---
name: server_instance_problems
short_description: The problems of a node's sglang_server_instances, naming each instance and value
version_added: 0.1.0
description:
  - Checks the servers one GPU node runs (C(sglang_server_instances) of
    R(glm.fleet.sglang_server,ansible_collections.glm.fleet.sglang_server_role)), each a mapping with
    exactly C(name), C(gpus) and C(port).
  - "Refused: a name that is not a container name, a name or port used twice, a GPU in two
    instances, an instance with fewer GPUs than the tensor-parallel size, a GPU index the node does
    not have, two names whose port-guard chains (C(GLM-) and the first 24 characters) collide."
  - "With O(port_offset) (the servers behind a TLS front), also refused: a loopback port (the port plus
    the offset) outside 1-65535 or equal to a server's port."
  - Each message names C(sglang_server_instances), the instance and the value, JSON-escaped.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The instances.
    type: list
    elements: dict
    required: true
  tp_size:
    description: The tensor-parallel size each instance runs with.
    type: int
    required: true
  gpu_count:
    description: GPUs the node has (indices 0 to gpu_count - 1); C(None) skips that check.
    type: int
  port_offset:
    description:
      - C(sglang_server_tls_port_offset) when the servers sit behind a TLS front, which puts each
        server's plain port on loopback at its port plus this; C(None) skips that check.
    type: int
"""

EXAMPLES = r"""
- name: Check the instances of an 8-GPU node
  ansible.builtin.assert:
    that: >-
      ([{'name': 'glm-0', 'gpus': [0, 1, 2, 3], 'port': 18080},
        {'name': 'glm-1', 'gpus': [4, 5, 6, 7], 'port': 18081}]
       | glm.fleet.server_instance_problems(tp_size=4, gpu_count=8)) == []
"""

RETURN = r"""
_value:
  description: One message per problem; empty when the instances are fit.
  type: list
  elements: str
"""

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
KEYS = ("name", "gpus", "port")
VAR = "sglang_server_instances"


def guard_chain(name: str) -> str:
    """The iptables chain of an instance's port guard (iptables allows 28 characters)."""
    return ("GLM-" + name)[:28]


def _shape_problems(instances: object) -> list[str]:
    if not isinstance(instances, list) or not instances:
        return [f"{VAR} must be a non-empty list of {{name, gpus, port}}; got: {json.dumps(instances, default=str)}"]
    problems = []
    for i, instance in enumerate(instances):
        if not isinstance(instance, dict):
            shown = json.dumps(instance, default=str)
            problems.append(f"{VAR}[{i}] must be a mapping of name, gpus and port; got: {shown}")
        elif set(instance) != set(KEYS):
            missing = [k for k in KEYS if k not in instance]
            unknown = sorted(str(k) for k in instance if k not in KEYS)
            problems.append(
                f"{VAR}[{i}] must have exactly name, gpus and port"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
    return problems


def _instance_problems(i: int, instance: dict, tp_size: int, gpu_count: int | None) -> list[str]:
    name, gpus = instance["name"], instance["gpus"]
    label = f"{VAR}[{i}]"
    problems = []
    if not (isinstance(name, str) and NAME_RE.fullmatch(name)):
        rule = "must be a container name (letters, digits, _ . -; at most 63)"
        problems.append(f"{label}.name {rule}; got: {json.dumps(name)}")
    else:
        label = f"{VAR}[{i}] ({name})"
    if not port(instance["port"]):
        problems.append(f"{label}.port must be 1-65535; got: {json.dumps(instance['port'], default=str)}")
    if not gpu_list(gpus):
        problems.append(f"{label}.gpus must be distinct GPU indices from 0; got: {json.dumps(gpus, default=str)}")
        return problems
    if len(gpus) < tp_size:
        problems.append(
            f"{label}.gpus {json.dumps(gpus)} are fewer than the tensor-parallel size {tp_size} (deployment_tp_size)"
        )
    absent = [g for g in gpus if gpu_count is not None and whole(g) is not None and int(g) >= gpu_count]
    if absent:
        problems.append(
            f"{label}.gpus {json.dumps(gpus)} name GPU(s) {json.dumps(absent)} this node does not have "
            f"(it has {gpu_count}: indices 0-{gpu_count - 1})"
        )
    return problems


def _shared(instances: list[dict], what: str, key: Callable[[dict], Iterable[object]]) -> list[str]:
    """Values that two or more instances share: `key` maps an instance to the values it holds."""
    owners: dict[object, list[str]] = {}
    for instance in instances:
        for value in key(instance):
            owners.setdefault(value, []).append(str(instance["name"]))
    return [
        f"{VAR}: {what} {json.dumps(value)} is used by more than one instance ({', '.join(names)})"
        for value, names in owners.items()
        if len(names) > 1
    ]


def _offset_problems(instances: list[dict], offset: object) -> list[str]:
    """The loopback ports behind a TLS front: each server's port plus the offset."""
    var = "sglang_server_tls_port_offset"
    if (
        isinstance(offset, bool)
        or not isinstance(offset, (int, str))
        or not re.fullmatch(r"-?[1-9][0-9]*", str(offset))
    ):
        return [f"{var} must be a whole number other than 0; got: {json.dumps(offset, default=str)}"]
    ports = {int(inst["port"]) for inst in instances}
    problems = []
    for inst in instances:
        local = int(inst["port"]) + int(offset)
        if not 1 <= local <= 65535 or local in ports:
            problems.append(
                f"{var} {offset} puts {inst['name']}'s loopback port at {local}, which "
                + ("is outside 1-65535" if not 1 <= local <= 65535 else "is another server's port")
            )
    return problems


def server_instance_problems(
    instances: object, tp_size: object, gpu_count: object = None, port_offset: object = None
) -> list[str]:
    problems = _shape_problems(instances)
    if problems or not isinstance(instances, list):
        return problems
    size = whole(tp_size) or 1
    count = whole(gpu_count) if gpu_count is not None else None
    for i, instance in enumerate(instances):
        problems += _instance_problems(i, instance, size, count)
    if problems:
        return problems
    problems += _shared(instances, "name", lambda inst: [inst["name"]])
    problems += _shared(instances, "port", lambda inst: [int(inst["port"])])
    problems += _shared(instances, "GPU", lambda inst: sorted({int(g) for g in inst["gpus"]}))
    if not problems:
        problems += _shared(instances, "port-guard chain", lambda inst: [guard_chain(inst["name"])])
    if not problems and port_offset is not None:
        problems += _offset_problems(instances, port_offset)
    return problems


class FilterModule:
    def filters(self) -> dict:
        return {"server_instance_problems": server_instance_problems, "server_guard_chain": guard_chain}
