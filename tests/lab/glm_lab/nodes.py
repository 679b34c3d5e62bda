"""The lab's nodes: systemd containers reached over SSH, their inventory, and what they have before site.yml."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from glm_lab.config import (
    FRONT_DOOR_ADDRESS,
    HERE,
    INVENTORY,
    LABEL,
    NETWORK,
    NODE_FLAGS,
    PREFIX,
    REPO,
    SECOND_GATEWAY_ADDRESS,
    SITE_CACHE_ADDRESS,
    STATE_DIR,
    LabError,
    Node,
)
from glm_lab.shell import docker, run, write_whole


def ssh_key() -> Path:
    key = STATE_DIR / "id_ed25519"
    if not key.exists():
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "glm-fleet-lab", "-f", str(key)])
    return key


def plan(gpu_nodes: int) -> list[Node]:
    nodes = [
        Node(f"gpu-{i}", "gpu_nodes", f"{PREFIX}-gpu-{i}", f"172.30.253.{10 + i}") for i in range(1, gpu_nodes + 1)
    ]
    nodes.append(Node("cache-1", "site_cache", f"{PREFIX}-cache-1", SITE_CACHE_ADDRESS))
    nodes.append(Node("gateway-2", "gateway", f"{PREFIX}-gateway-2", SECOND_GATEWAY_ADDRESS))
    nodes.append(Node("laptop-1", "developer_laptops", f"{PREFIX}-laptop-1", "172.30.253.100"))
    return nodes


def start_node(node: Node, image: str, pubkey: str) -> None:
    docker(
        "run", "-d", "--name", node.container, "--hostname", node.name,
        "--network", NETWORK, "--ip", node.address,
        "--label", f"{LABEL}=1", "--label", f"{LABEL}.group={node.group}",
        *NODE_FLAGS,
        "--mount", f"type=volume,source={node.container}-docker,target=/var/lib/docker,volume-label={LABEL}=1",
        image,
    )  # fmt: skip
    for user in ("fleet", "dev"):
        docker(
            "exec", node.container, "sh", "-c",
            f"printf '%s\\n' '{pubkey}' > /home/{user}/.ssh/authorized_keys && "
            f"chown {user}:{user} /home/{user}/.ssh/authorized_keys && chmod 600 /home/{user}/.ssh/authorized_keys",
        )  # fmt: skip


def prepare_nodes() -> None:
    """What the hosts have before site.yml runs: on GPU nodes the driver's tools (nvidia-smi, on HGX
    the fabric manager); on laptops Node.js with npm and the site's CAs."""
    for name in ("driver_standins.yml", "laptop_tools.yml"):
        playbook = HERE / "playbooks" / name
        proc = run(["ansible-playbook", "-i", str(INVENTORY.parent), str(playbook)], check=False, cwd=REPO)
        if proc.returncode != 0:
            raise LabError(f"{name} failed:\n{proc.stdout[-3000:]}")


def wait_for_boot(node: Node, timeout: float = 120) -> str:
    """Wait until systemd finished booting and sshd listens; returns the node's ed25519 host key."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = docker("exec", node.container, "systemctl", "is-system-running", check=False)
        if state in ("running", "degraded"):
            break
        time.sleep(0.5)
    else:
        raise LabError(f"{node.name}: systemd did not finish booting in {timeout:.0f} s (state: {state!r})")
    if state == "degraded":
        failed = docker("exec", node.container, "systemctl", "--failed", "--no-legend", check=False)
        raise LabError(f"{node.name}: systemd is degraded; failed units:\n{failed}")
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(1)
            if sock.connect_ex((node.address, 22)) == 0:
                return docker("exec", node.container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
        time.sleep(0.3)
    raise LabError(f"{node.name}: sshd does not listen on {node.address}:22")


def write_inventory(nodes: list[Node], key: Path, known_hosts: Path) -> None:
    groups: dict[str, dict[str, dict[str, str]]] = {}
    for node in nodes:
        groups.setdefault(node.group, {})[node.name] = {"ansible_host": node.address}
    # The site cache's host also runs the fleet's gateway (the first of two, which share a floating
    # address) and its monitoring, as a small site would.
    if "site_cache" in groups:
        groups["gateway"] = {name: {} for name in groups["site_cache"]} | groups.get("gateway", {})
        groups["monitoring"] = {name: {} for name in groups["site_cache"]}
    content = {
        "all": {
            "vars": {
                "deployment_gateway_address": FRONT_DOOR_ADDRESS if len(groups.get("gateway", {})) > 1 else "",
                "ansible_user": "fleet",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes",
            },
            "children": {group: {"hosts": hosts} for group, hosts in groups.items()},
        }
    }
    header = "# Written by tests/lab/lab.py up: the running lab. Do not edit; `make lab-down` removes it.\n"
    write_whole(INVENTORY, header + json.dumps(content, indent=2) + "\n")


def remove_lab_containers() -> None:
    ids = docker("ps", "-aq", "--filter", f"label={LABEL}=1").split()
    if ids:
        docker("rm", "-f", "-v", *ids)
    vols = docker("volume", "ls", "-q", "--filter", f"label={LABEL}=1").split()
    if vols:
        docker("volume", "rm", "-f", *vols)
