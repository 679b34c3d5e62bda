# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that compare disk space needs with a host's filesystems (from `df --all --output=avail,target -B1`)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: disk_shortfalls
short_description: The filesystems that lack the free space asked of them
version_added: 0.1.0
description:
  - Places each required path on the mount that holds it (the longest mount point that is a prefix
    of the path, so paths that do not exist yet are placed too), adds up what is asked of each
    filesystem, and returns one entry per filesystem with less free space than that.
author:
  - glm.fleet contributors (@glm-fleet)
positional: df_output
options:
  _input:
    description: Required space, a list of C({path, min_free_gb}).
    type: list
    elements: dict
    required: true
  df_output:
    description:
      - Standard output of C(df --all --output=avail,target -B1) on the host. (Mount facts omit the
        overlay root of containers; C(df) lists every filesystem.)
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read the filesystems
  ansible.builtin.command: df --all --output=avail,target -B1
  register: df
  changed_when: false

- name: Need 80 GB under /var/lib/docker and 340 GB for the weights
  ansible.builtin.assert:
    that: (requirements | glm.fleet.disk_shortfalls(df.stdout)) == []
  vars:
    requirements:
      - {path: /var/lib/docker, min_free_gb: 80}
      - {path: /var/lib/glm-fleet/huggingface, min_free_gb: 340}
"""

RETURN = r"""
_value:
  description: One entry per filesystem short of space, with its mount point, the paths placed
    on it, the space they need together and the space available, in GB (10^9 bytes).
  type: list
  elements: dict
"""

GB = 1000**3


def parse_df(text: str) -> list:
    """Filesystems from `df --all --output=avail,target -B1`: [{mount, size_available}]."""
    mounts = []
    for line in text.splitlines()[1:]:
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0].isdigit():
            mounts.append({"mount": parts[1], "size_available": int(parts[0])})
    return mounts


def mount_of(path: str, mounts: list) -> dict | None:
    """The mount that holds path: the longest mount point that is path or one of its parents."""
    best = None
    for mount in mounts:
        point = mount["mount"]
        inside = point in (path, "/") or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best["mount"])):
            best = mount
    return best


def disk_shortfalls(requirements: list, df_output: str) -> list:
    mounts = parse_df(df_output)
    needs: dict = {}
    for item in requirements:
        path = str(item["path"])
        mount = mount_of(path, mounts) or {"mount": "(no filesystem)", "size_available": 0}
        entry = needs.setdefault(mount["mount"], {"mount": mount["mount"], "paths": [], "need_gb": 0.0})
        entry["paths"].append(path)
        entry["need_gb"] += float(item["min_free_gb"])
        entry["free_gb"] = round(mount["size_available"] / GB, 1)
    return [entry for entry in needs.values() if entry["free_gb"] < entry["need_gb"]]


class FilterModule:
    def filters(self) -> dict:
        return {"disk_shortfalls": disk_shortfalls}
