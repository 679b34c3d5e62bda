# Lab stand-in for nvidia-container-runtime-hook (version @VERSION@). dockerd finds this on PATH
# when it starts and then accepts `docker run --gpus ...`, which sets NVIDIA_VISIBLE_DEVICES in the
# container's spec; runc calls it as a prestart hook with the container state on stdin. The real
# hook has nvidia-container-cli mount the GPUs and fails on a device the node does not have; this
# one checks the devices against the GPUs the lab's nvidia-smi reports, and mounts nothing.
import json
import sys
from pathlib import Path

GPUS = Path("/usr/share/glm-lab/gpus.csv")

state = json.load(sys.stdin)
config = json.loads((Path(state["bundle"]) / "config.json").read_text())
env = dict(e.split("=", 1) for e in config.get("process", {}).get("env", []) if "=" in e)
devices = [d.strip() for d in env.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if d.strip()]
rows = [line.split(", ") for line in GPUS.read_text().splitlines() if line.strip()] if GPUS.exists() else []
known = {row[0] for row in rows} | {row[2] for row in rows if len(row) > 2}
for device in devices:
    if device not in ("all", "none", "void") and device not in known:
        # libnvidia-container's message for an index or UUID the driver does not know
        print(f"nvidia-container-cli: device error: {device}: unknown device", file=sys.stderr)
        sys.exit(1)
