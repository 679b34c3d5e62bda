"""The lab's fixed names, addresses, paths and node flags; its error and node types."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parents[1]  # tests/lab
STATE_DIR = Path(os.environ.get("GLM_LAB_STATE", REPO / ".lab"))
INVENTORY = REPO / "inventories" / "lab" / "hosts.yml"
PREFIX = os.environ.get("GLM_LAB_PREFIX", "glm-lab")
LABEL = "io.glm-fleet.lab"
NETWORK = f"{PREFIX}-net"
IMAGE_REPO = "glm-fleet-lab/debian12"
SUITE = "bookworm"
SUBNET = "172.30.253.0/24"
GATEWAY = "172.30.253.1"
DYNAMIC_RANGE = "172.30.253.128/25"  # molecule's containers; lab nodes take fixed addresses below it
REGISTRY_PORT = 5000
PRIVATE_REGISTRY_PORT = 5001  # a registry that needs a login ...
SLOW_LINK_PORT = 5002  # ... which the nodes reach through a slow link
SLOW_LINK_RATE = 2 * 1024 * 1024  # bytes per second
PRIVATE_REPO = "team/sglang-private"
PRIVATE_USER = "fleet-pull"
HTTP_PORT = 8080
HTTPS_PORT = 8443  # NVIDIA's apt repository as a site's mirror serves it: TLS, a CA of its own
HUB_PORT = 8090
GRAFANA_PORT = 3000  # a site's Grafana (its HTTP API), where glm.fleet.monitoring provisions the dashboard
ALERT_RECEIVER_PORT = 8095  # a site's webhook endpoint, where the fleet's Alertmanager sends alerts
SMTP_PORT = 2525  # a site's mail relay (aiosmtpd), which keeps the alert e-mails in MAILDIR
MAILDIR = STATE_DIR / "mail"
WORKER_PORT = 18099  # an SGLang stand-in on the gateway, for scenarios without GPU nodes
SERVED_MODEL = "zai-org/GLM-5.3-Flash"
REVISION = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
SITE_CACHE_ADDRESS = "172.30.253.50"
SECOND_GATEWAY_ADDRESS = "172.30.253.51"  # gateway-2, the fleet's second gateway host
FRONT_DOOR_ADDRESS = "172.30.253.60"  # the floating address the gateway hosts share (keepalived)
STANDIN_CACHE = STATE_DIR / "cache" / "standin"
CLIENT_REQUIREMENTS = REPO / "roles" / "model_weights" / "files" / "client-requirements.txt"
ROUTER_REQUIREMENTS = REPO / "roles" / "gateway" / "files" / "router-requirements.txt"
WWW = STATE_DIR / "www"
MAX_GPU_NODES = 8
SMOKE_REPO = "glm-fleet-lab/smoke"
SGLANG_REPO, SGLANG_TAG = "lmsysorg/sglang", "glm-5.3-flash-lab"
# The DCGM exporter stand-in, under the name the lab's registry mirror serves it by.
DCGM_REPO, DCGM_TAG = "nvidia/k8s/dcgm-exporter", "4.5.2-4.8.1-lab"
SERVICES_VARS = REPO / "inventories" / "lab" / "group_vars" / "all" / "services.yml"
NODE_FLAGS = [
    "--cap-add", "SYS_ADMIN",
    "--cap-add", "NET_ADMIN",
    "--security-opt", "seccomp=unconfined",
    "--security-opt", "apparmor=unconfined",
    "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run",
    "--tmpfs", "/run/lock",
    "--tmpfs", "/tmp",  # noqa: S108 - the node's own /tmp
    "--stop-signal", "SIGRTMIN+3",
]  # fmt: skip


class LabError(RuntimeError):
    pass


@dataclass
class Node:
    name: str
    group: str
    container: str
    address: str = ""


REGISTRY_LINE = re.compile(r'^(\S+) .* "GET /v2/[^ ]+/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" 200 (\d+)')
