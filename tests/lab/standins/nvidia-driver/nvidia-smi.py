"""Lab stand-in for NVIDIA's nvidia-smi (the lab has no GPUs).

Prints the GPUs listed in /usr/share/glm-lab/gpus.csv, a 4x B200 half HGX system by default, in
the formats the real nvidia-smi uses for `--query-gpu=... --format=csv[,noheader][,nounits]`,
`--version` and `-L`, and fails the way it does: an unknown query field prints
`Field "<name>" is not a valid field to query.` and exits 2. GLM_LAB_NVIDIA_SMI_FAIL=1 (or the
file /etc/glm-lab/nvidia-smi-fail) makes it fail as it does when the driver is not loaded.
"""

from __future__ import annotations

import csv
import os
import sys

DATA = "/usr/share/glm-lab/gpus.csv"
FIELDS = [
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "memory.total",
    "compute_cap",
    "driver_version",
    "fabric.state",
    "fabric.status",
]
UNITS = {"memory.total": "MiB"}
CUDA_VERSION = "13.0"


def gpus() -> list[dict[str, str]]:
    with open(DATA) as handle:
        return [dict(zip(FIELDS, (cell.strip() for cell in row), strict=True)) for row in csv.reader(handle) if row]


def driver_failed() -> bool:
    return os.environ.get("GLM_LAB_NVIDIA_SMI_FAIL") == "1" or os.path.exists("/etc/glm-lab/nvidia-smi-fail")


def query(spec: str, fmt: str) -> int:
    fields = [f.strip() for f in spec.split(",") if f.strip()]
    for field in fields:
        if field not in FIELDS:
            sys.stdout.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
    options = set(fmt.split(","))
    if "csv" not in options:
        sys.stdout.write("Only csv format is supported by this stand-in.\n")
        return 2
    out = []
    if "noheader" not in options:
        out.append(", ".join(f + ("" if "nounits" in options or f not in UNITS else f" [{UNITS[f]}]") for f in fields))
    for gpu in gpus():
        cells = []
        for f in fields:
            value = gpu[f]
            if f in UNITS and "nounits" not in options and value != "N/A":
                value = f"{value} {UNITS[f]}"
            cells.append(value)
        out.append(", ".join(cells))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if driver_failed():
        sys.stdout.write(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n\n"
        )
        return 9
    listing = gpus()
    driver = listing[0]["driver_version"]
    if argv[:1] == ["--version"]:
        major_minor = ".".join(driver.split(".")[:2])
        sys.stdout.write(
            f"NVIDIA-SMI version  : {driver}\nNVML version        : {major_minor}\n"
            f"DRIVER version      : {driver}\nCUDA Version        : {CUDA_VERSION}\n"
        )
        return 0
    if argv[:1] == ["-L"]:
        for gpu in listing:
            sys.stdout.write(f"GPU {gpu['index']}: {gpu['name']} (UUID: {gpu['uuid']})\n")
        return 0
    spec = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "")
    if spec is not None:
        return query(spec, fmt)
    if argv:
        sys.stdout.write(f"Invalid combination of input arguments: {' '.join(argv)}\n")
        return 2
    for gpu in listing:
        sys.stdout.write(
            f"|  {gpu['index']}  {gpu['name']:<24} | {gpu['pci.bus_id']} | 0MiB / {gpu['memory.total']}MiB |\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
