"""Lab stand-in for NVIDIA's DCGM exporter (nvcr.io/nvidia/k8s/dcgm-exporter), which reads the GPUs
through DCGM/NVML; the lab has none, so this one reads them with the nvidia-smi that the container
toolkit put into the container (`docker run --gpus all`: every GPU of the node).

Serves `/metrics` on :9400 (`-a`/`--address` as the real one) with the counters of dcgm-exporter's
etc/default-counters.csv (names, types and help text as there), one sample per GPU labelled as the
exporter labels them (gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION),
values of an idle GPU. Without a GPU (no nvidia-smi in the container: started without --gpus) it
exits 1 at start, as the exporter does when DCGM finds no GPU.

`--web-config-file` (DCGM_EXPORTER_WEB_CONFIG_FILE) as the exporter's, which hands it to the Prometheus
exporter toolkit: the file is read at start (a missing or unreadable file, an unknown key, a
tls_server_config without cert_file and key_file, an unknown client_auth_type, or one that verifies
client certificates without client_ca_file: exit 1) and again at each connection (the toolkit's
GetConfigForClient: a renewed certificate is served without a restart); with tls_server_config the
port speaks TLS only, and RequireAndVerifyClientCert refuses a client without a certificate that
chains to client_ca_file and is for a client (extended key usage clientAuth, which Go checks and
OpenSSL's server side checks as its "ssl_client" purpose).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import socket
import ssl
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

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
# The exporter toolkit's web configuration (web/tls_config.go), read strictly: any other key is an error.
WEB_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"}
TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "cipher_suites", "curve_preferences",
            "min_version", "max_version", "prefer_server_cipher_suites", "client_allowed_sans"}  # fmt: skip
CLIENT_AUTH = {"": ssl.CERT_NONE, "NoClientCert": ssl.CERT_NONE, "RequestClientCert": ssl.CERT_OPTIONAL,
               "RequireAnyClientCert": ssl.CERT_REQUIRED, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}  # fmt: skip
VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
            "TLS13": ssl.TLSVersion.TLSv1_3}  # fmt: skip


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


def tls_context(path: str) -> ssl.SSLContext | None:
    """The TLS the web configuration at `path` asks for (None: plain HTTP); ValueError or OSError
    where the toolkit refuses it."""
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict) or set(config) - WEB_KEYS:
        raise ValueError(
            f"yaml: unmarshal errors: field(s) {sorted(set(config) - WEB_KEYS)} not found in type web.Config"
        )
    tls = config.get("tls_server_config")
    if not tls:
        return None
    if set(tls) - TLS_KEYS:
        raise ValueError(
            f"yaml: unmarshal errors: field(s) {sorted(set(tls) - TLS_KEYS)} not found in type web.TLSConfig"
        )
    if not tls.get("cert_file") or not tls.get("key_file"):
        raise ValueError("missing cert_file or key_file")
    auth = str(tls.get("client_auth_type") or "")
    if auth not in CLIENT_AUTH:
        raise ValueError(f"Invalid ClientAuth: {auth}")
    verifies = auth in ("VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
    if verifies and not tls.get("client_ca_file"):
        raise ValueError(f"client_ca_file is required for client_auth_type {auth}")
    version = str(tls.get("min_version") or "TLS12")
    if version not in VERSIONS:
        raise ValueError(f"unknown TLS version: {version}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = VERSIONS[version]
    context.load_cert_chain(tls["cert_file"], tls["key_file"])
    if verifies:
        context.load_verify_locations(tls["client_ca_file"])
    context.verify_mode = CLIENT_AUTH[auth]
    return context


def main() -> None:
    parser = argparse.ArgumentParser(prog="dcgm-exporter")
    parser.add_argument("-a", "--address", default=os.environ.get("DCGM_EXPORTER_LISTEN", ":9400"))
    parser.add_argument("--web-config-file", default=os.environ.get("DCGM_EXPORTER_WEB_CONFIG_FILE", ""))
    args = parser.parse_args()
    if args.web_config_file:
        try:
            tls_context(args.web_config_file)
        except (OSError, ValueError, ssl.SSLError) as err:
            print(f'level=error msg="Failed to Listen and Server HTTP server." err="{err}"', file=sys.stderr)
            sys.exit(1)
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

    class Server(ThreadingHTTPServer):
        def finish_request(self, request: socket.socket, client_address: tuple) -> None:
            # The toolkit reads the web configuration anew for each connection, in its own goroutine.
            context = tls_context(args.web_config_file) if args.web_config_file else None
            if context is not None:
                try:
                    request = context.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError) as err:
                    print(f'level=error msg="http: TLS handshake error from {client_address[0]}: {err}"', flush=True)
                    return
            super().finish_request(request, client_address)

    host, _colon, port = args.address.rpartition(":")
    print(f'level=info msg="Starting webserver" address="{args.address}" gpus={len(devices)}', flush=True)
    if args.web_config_file and tls_context(args.web_config_file) is not None:
        print(f'level=info msg="TLS is enabled." http2=true address="{args.address}"', flush=True)
    Server((host or "0.0.0.0", int(port)), Handler).serve_forever()  # noqa: S104 - the exporter's default


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
