# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse what nvidia-smi reports about a node's GPUs. Pure functions; no I/O."""

from __future__ import annotations

import csv
import re

# Per-GPU fields asked of `nvidia-smi --query-gpu`, in this order.
BASE_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "compute_cap", "driver_version")
# Asked for too where the driver knows them (NVLink fabric registration, Hopper and later).
FABRIC_FIELDS = ("fabric.state", "fabric.status")

_NOT_AVAILABLE = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported"}
_INVALID_FIELD = re.compile(r'Field "[^"]+" is not a valid field to query')


class NvidiaSmiError(Exception):
    """nvidia-smi printed something this parser does not understand."""


def query_args(fields: tuple[str, ...]) -> list[str]:
    return ["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def is_unknown_field_error(output: str) -> bool:
    """True when nvidia-smi refused a field name (an older driver without fabric fields)."""
    return bool(_INVALID_FIELD.search(output))


def _value(raw: str) -> str | None:
    raw = raw.strip()
    return None if raw in _NOT_AVAILABLE else raw


def parse_query(text: str, fields: tuple[str, ...]) -> list[dict]:
    """One dict per GPU from `--query-gpu=FIELDS --format=csv,noheader,nounits` output."""
    gpus = []
    for row in csv.reader(line for line in text.splitlines() if line.strip()):
        if len(row) != len(fields):
            raise NvidiaSmiError(f"expected {len(fields)} fields ({','.join(fields)}) per GPU; got: {','.join(row)!r}")
        values = dict(zip(fields, (_value(cell) for cell in row)))
        try:
            memory = int(values["memory.total"]) if values["memory.total"] is not None else None
            index = int(values["index"] or "")
        except ValueError as err:
            raise NvidiaSmiError(f"unexpected number in nvidia-smi output {','.join(row)!r}: {err}") from err
        gpus.append(
            {
                "index": index,
                "name": values["name"],
                "uuid": values["uuid"],
                "pci_bus_id": values["pci.bus_id"],
                "memory_mib": memory,
                "compute_capability": values["compute_cap"],
                "driver_version": values["driver_version"],
                "fabric_state": values.get("fabric.state"),
                "fabric_status": values.get("fabric.status"),
            }
        )
    return sorted(gpus, key=lambda gpu: gpu["index"])


def parse_version(text: str) -> dict:
    """Driver and CUDA versions from `nvidia-smi --version`."""
    found = {}
    for key, label in (("driver_version", "DRIVER version"), ("cuda_version", "CUDA Version")):
        match = re.search(rf"^{label}\s*:\s*(\S+)\s*$", text, re.MULTILINE)
        found[key] = match.group(1) if match else None
    if found["driver_version"] is None:
        raise NvidiaSmiError(f"no driver version in nvidia-smi --version output: {text.strip()!r}")
    return found


def summarize(gpus: list[dict], versions: dict, nvswitch_devices: int, fabric_manager_active: bool | None) -> dict:
    """The node's GPU facts as the roles consume them."""
    memories = [gpu["memory_mib"] for gpu in gpus if gpu["memory_mib"] is not None]
    capabilities = sorted({gpu["compute_capability"] for gpu in gpus if gpu["compute_capability"]}, key=_version_key)
    # A GPU that registers with an NVLink fabric is behind NVSwitches; so is a node with nvswitch devices.
    in_fabric = [gpu for gpu in gpus if gpu["fabric_state"] is not None]
    nvswitch = nvswitch_devices > 0 or bool(in_fabric)
    return {
        "count": len(gpus),
        "gpus": gpus,
        "names": sorted({gpu["name"] for gpu in gpus if gpu["name"]}),
        "total_memory_mib": sum(memories),
        "min_memory_mib": min(memories) if memories else 0,
        "min_compute_capability": capabilities[0] if capabilities else None,
        "driver_version": versions["driver_version"],
        "cuda_version": versions["cuda_version"],
        "nvswitch": nvswitch,
        "nvswitch_devices": nvswitch_devices,
        "fabric_registered": bool(in_fabric)
        and all(gpu["fabric_state"] == "Completed" and gpu["fabric_status"] == "Success" for gpu in in_fabric),
        "fabric_manager_active": fabric_manager_active,
    }


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))
