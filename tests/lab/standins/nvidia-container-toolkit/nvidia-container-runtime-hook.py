# Lab stand-in for nvidia-container-runtime-hook (version @VERSION@). dockerd finds this on PATH
# when it starts and then accepts `docker run --gpus ...`, which sets NVIDIA_VISIBLE_DEVICES in the
# container's spec; runc calls it as a prestart hook with the container state on stdin. The real
# hook has nvidia-container-cli mount the GPUs, the driver's libraries and nvidia-smi into the
# container and fails on a device the node does not have; this one checks the devices against the
# GPUs the lab's nvidia-smi reports and puts the node's nvidia-smi into the container's root, seeing
# only the visible GPUs, numbered from 0 as inside a real container (what an exporter reads).
import json
import shutil
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

visible = [d for d in devices if d not in ("none", "void")]
if visible and rows:
    shown = rows if "all" in visible else [r for r in rows if r[0] in visible or (len(r) > 2 and r[2] in visible)]
    root = Path(config["root"]["path"])
    root = root if root.is_absolute() else Path(state["bundle"]) / root
    (root / GPUS.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / GPUS.relative_to("/")).write_text("".join(", ".join([str(i), *r[1:]]) + "\n" for i, r in enumerate(shown)))
    if Path("/usr/bin/nvidia-smi").exists():
        (root / "usr/bin").mkdir(parents=True, exist_ok=True)
        shutil.copy2("/usr/bin/nvidia-smi", root / "usr/bin/nvidia-smi")
