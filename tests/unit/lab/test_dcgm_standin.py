"""The lab's DCGM exporter stand-in: the exporter's default counters, one sample per GPU that the
container's nvidia-smi shows, with the exporter's labels; no GPU, no start; with a web configuration
that requires a client certificate, TLS only and a client certificate of its CA only."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.glm.fleet.plugins.module_utils import _tls

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


def gpu_path(tmp_path: Path) -> dict[str, str]:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(ROWS) + "\nEOF\n")
    smi.chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def site_ca(tmp_path: Path) -> dict[str, Path]:
    """A CA, the exporter's server certificate, and a client and a server certificate of the CA, and a
    client certificate of another CA (each with its key), as glm.fleet.tls_certificate issues them."""
    ca_key = _tls.new_key_pem()
    ca = _tls.new_ca_pem(ca_key, "lab site CA", 30)
    other_key = _tls.new_key_pem()
    other = _tls.new_ca_pem(other_key, "another CA", 30)
    files = {"ca": tmp_path / "ca.pem"}
    files["ca"].write_bytes(ca)
    for name, (issuer_key, issuer, purpose) in {
        "exporter": (ca_key, ca, "server"), "client": (ca_key, ca, "client"),
        "server": (ca_key, ca, "server"), "stranger": (other_key, other, "client"),
    }.items():  # fmt: skip
        key = _tls.new_key_pem()
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_bytes(_tls.new_server_cert_pem(issuer_key, issuer, key, ["127.0.0.1"], 30, purpose=purpose))
        files[f"{name}.key"] = tmp_path / f"{name}.key"
        files[f"{name}.key"].write_bytes(key)
    return files


def test_a_web_configuration_that_requires_a_client_certificate_serves_its_cas_clients_only(tmp_path: Path) -> None:
    files = site_ca(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({"tls_server_config": {
        "cert_file": str(files["exporter"]), "key_file": str(files["exporter.key"]),
        "client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": str(files["ca"]), "min_version": "TLS12",
    }}))  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(EXPORTER), "-a", f"127.0.0.1:{port}", "--web-config-file", str(web)],
        env=gpu_path(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def scrape(client: str | None) -> str:
        context = ssl.create_default_context(cafile=str(files["ca"]))
        if client:
            context.load_cert_chain(str(files[client]), str(files[f"{client}.key"]))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context, timeout=5) as resp:
            return resp.read().decode()

    try:
        for _try in range(50):
            try:
                text = scrape("client")
                break
            except OSError:
                time.sleep(0.1)
        assert "DCGM_FI_DEV_GPU_TEMP{" in text
        with pytest.raises(OSError):  # noqa: PT011 - plain HTTP gets nothing, however it fails
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        for refused in (None, "server", "stranger"):  # no certificate, a server's, another CA's
            with pytest.raises(OSError):  # noqa: PT011 - the handshake fails, as send or receive
                scrape(refused)
    finally:
        proc.terminate()
        out, _err = proc.communicate(timeout=10)
    assert 'msg="Starting webserver"' in out
    assert 'msg="TLS is enabled."' in out


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"tls_server_config": {"cert_file": "x"}}, "missing cert_file or key_file"),
        ({"tls_server_config": {"cert_file": "x", "key_file": "y", "client_auth_type": "Always"}},
         "Invalid ClientAuth"),
        ({"tls_server_config": {"cert_file": "x", "key_file": "y", "client_auth_type": "RequireAndVerifyClientCert"}},
         "client_ca_file is required"),
        ({"tls_config": {}}, "not found in type web.Config"),
    ],
)  # fmt: skip
def test_a_web_configuration_the_toolkit_refuses_stops_the_start(tmp_path: Path, config: dict, error: str) -> None:
    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, str(EXPORTER), "--web-config-file", str(web)],
        env=gpu_path(tmp_path), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert error in proc.stderr
