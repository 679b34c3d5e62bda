"""The lab's DCGM exporter stand-in: the exporter's default counters, one sample per GPU that the
container's nvidia-smi shows, with the exporter's labels; no GPU, no start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import REPO
from prometheus_client.parser import text_string_to_metric_families

EXPORTER = REPO / "tests" / "lab" / "dcgm_standin" / "dcgm_exporter.py"
ROWS = [
    "0, NVIDIA B200, GPU-3f4c2a10-8d5e-4b1a-9c7f-0e2d6b8a1c01, 00000000:1B:00.0, 183359, 580.95.05",
    "1, NVIDIA B200, GPU-7a1e9c42-2f6b-4d83-b5e0-91c4d7f2a3b2, 00000000:43:00.0, 183359, 580.95.05",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_default_counter_has_a_sample_per_gpu_with_the_exporters_labels(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(ROWS) + "\nEOF\n")
    smi.chmod(0o755)
    port = free_port()
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = subprocess.Popen([sys.executable, str(EXPORTER), "-a", f"127.0.0.1:{port}"], env=env)
    try:
        for _try in range(50):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    text = resp.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        families = {f.name: f for f in text_string_to_metric_families(text)}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
                 "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_SM_CLOCK"):  # fmt: skip
        samples = families[name].samples
        assert [s.labels["gpu"] for s in samples] == ["0", "1"], name
        assert set(samples[0].labels) == {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
                                          "DCGM_FI_DRIVER_VERSION"}  # fmt: skip
    assert families["DCGM_FI_DEV_GPU_TEMP"].type == "gauge"
    assert families["DCGM_FI_DEV_FB_FREE"].samples[1].value == 183359
    assert families["DCGM_FI_DEV_FB_FREE"].samples[1].labels["UUID"] == "GPU-7a1e9c42-2f6b-4d83-b5e0-91c4d7f2a3b2"


def test_without_a_gpu_it_does_not_start(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(EXPORTER)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 1
    assert "Failed to initialize NVML" in proc.stderr
