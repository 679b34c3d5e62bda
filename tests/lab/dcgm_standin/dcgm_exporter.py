"""Lab stand-in for NVIDIA's DCGM exporter (nvcr.io/nvidia/k8s/dcgm-exporter), which reads the GPUs
through DCGM/NVML; the lab has none, so this one reads them with the nvidia-smi that the container
toolkit put into the container (`docker run --gpus all`: every GPU of the node).

Serves `/metrics` on :9400 (`-a`/`--address` as the real one) with the counters of dcgm-exporter's
etc/default-counters.csv (names, types and help text as there), one sample per GPU labelled as the
exporter labels them (gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION),
values of an idle GPU. Without a GPU (no nvidia-smi in the container: started without --gpus) it
exits 1 at start, as the exporter does when DCGM finds no GPU.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import socket
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# etc/default-counters.csv: field, type, help (the exporter's defaults, in its order).
COUNTERS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", 345),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", 3996),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", 31),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", 29),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", 141.5),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", 98765432),
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "counter",
     "Total number of bytes transmitted through PCIe TX (in KB) via NVML.", 0),
    ("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "counter",
     "Total number of bytes received through PCIe RX (in KB) via NVML.", 0),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", 0),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", 0),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", 0),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", 0),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", 0),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", 0),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", None),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", 0),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes", 0),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", 0),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors", 0),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors", 0),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", 0),
]  # fmt: skip
QUERY = "index,name,uuid,pci.bus_id,memory.total,driver_version"


def gpus() -> list[dict[str, str]]:
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    keys = QUERY.split(",")
    return [dict(zip(keys, (c.strip() for c in row), strict=True)) for row in csv.reader(io.StringIO(out)) if row]


def exposition(devices: list[dict[str, str]], hostname: str) -> str:
    lines = []
    for name, kind, text, value in COUNTERS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for gpu in devices:
            labels = (
                f'gpu="{gpu["index"]}",UUID="{gpu["uuid"]}",pci_bus_id="{gpu["pci.bus_id"]}",'
                f'device="nvidia{gpu["index"]}",modelName="{gpu["name"]}",Hostname="{hostname}",'
                f'DCGM_FI_DRIVER_VERSION="{gpu["driver_version"]}"'
            )
            lines.append(f"{name}{{{labels}}} {gpu['memory.total'] if value is None else value}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="dcgm-exporter")
    parser.add_argument("-a", "--address", default=":9400")
    args = parser.parse_args()
    try:
        devices = gpus()
    except (OSError, subprocess.CalledProcessError) as err:
        print(f'level=fatal msg="Failed to initialize NVML: no GPU found ({err})"', file=sys.stderr)
        sys.exit(1)
    if not devices:
        print('level=fatal msg="DCGM found no GPU"', file=sys.stderr)
        sys.exit(1)
    hostname = socket.gethostname()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = exposition(gpus(), hostname).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt: str, *a: object) -> None:
            return

    host, _colon, port = args.address.rpartition(":")
    print(f'level=info msg="Starting webserver" address="{args.address}" gpus={len(devices)}', flush=True)
    ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler).serve_forever()  # noqa: S104 - the exporter's default


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
