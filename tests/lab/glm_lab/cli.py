"""The lab's life cycle (up, down, status) and its command line, `python tests/lab/lab.py`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from glm_lab import USAGE
from glm_lab.config import INVENTORY, LABEL, MAX_GPU_NODES, NETWORK, REPO, SERVICES_VARS, STATE_DIR, WWW, LabError
from glm_lab.gateway import registry_paths, run_standin, services
from glm_lab.image import ensure_image
from glm_lab.nodes import (
    plan,
    prepare_nodes,
    remove_lab_containers,
    ssh_key,
    start_node,
    wait_for_boot,
    write_inventory,
)
from glm_lab.shell import docker, docker_alive, ensure_dockerd, log, stop_pid, succeeds


def up(gpu_nodes: int) -> dict[str, object]:
    if not 1 <= gpu_nodes <= MAX_GPU_NODES:
        raise LabError(f"gpu_nodes must be between 1 and {MAX_GPU_NODES}; got: {gpu_nodes}")
    started = time.monotonic()
    ensure_dockerd()
    image = ensure_image()
    remove_lab_containers()  # a rerun starts from fresh nodes
    endpoints = services()
    key = ssh_key()
    pubkey = Path(f"{key}.pub").read_text().strip()
    nodes = plan(gpu_nodes)
    for node in nodes:
        start_node(node, image, pubkey)
    known = [f"{node.address} {wait_for_boot(node)}" for node in nodes]
    known_hosts = STATE_DIR / "known_hosts"
    known_hosts.write_text("\n".join(" ".join(line.split()[:3]) for line in known) + "\n")
    write_inventory(nodes, key, known_hosts)
    prepare_nodes()
    state = {
        "image": image,
        "network": NETWORK,
        **endpoints,
        "nodes": [asdict(n) for n in nodes],
        "inventory": str(INVENTORY),
        "seconds": round(time.monotonic() - started, 1),
    }
    (STATE_DIR / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    log(f"up: {len(nodes)} nodes in {state['seconds']} s; inventory {INVENTORY.relative_to(REPO)}")
    return state


def down() -> None:
    if docker_alive():
        remove_lab_containers()
        if succeeds("docker", "network", "inspect", NETWORK):
            docker("network", "rm", NETWORK)
    paths = registry_paths()
    stop_pid(paths["pid"])
    stop_pid(STATE_DIR / "www.pid")
    stop_pid(STATE_DIR / "www-tls.pid")
    stop_pid(STATE_DIR / "hub.pid")
    stop_pid(STATE_DIR / "grafana.pid")
    stop_pid(STATE_DIR / "alert.pid")
    stop_pid(STATE_DIR / "mail.pid")
    stop_pid(STATE_DIR / "worker.pid")
    stop_pid(STATE_DIR / "private-registry" / "registry.pid")
    stop_pid(STATE_DIR / "private-registry" / "slowlink.pid")
    shutil.rmtree(STATE_DIR / "private-registry", ignore_errors=True)
    shutil.rmtree(paths["base"], ignore_errors=True)
    shutil.rmtree(WWW, ignore_errors=True)
    shutil.rmtree(STATE_DIR / "mail", ignore_errors=True)  # the alert e-mails
    shutil.rmtree(STATE_DIR / "worker-hf", ignore_errors=True)
    INVENTORY.unlink(missing_ok=True)
    shutil.rmtree(INVENTORY.parent / ".secrets", ignore_errors=True)  # the lab's site CA and developer keys
    shutil.rmtree(INVENTORY.parent / ".jit-cache", ignore_errors=True)  # the fleet's copies of the JIT caches
    SERVICES_VARS.unlink(missing_ok=True)
    for name in ("state.json", "services.json", "known_hosts", "www.log", "worker.log", "worker.yaml", "nvidia-smi"):
        (STATE_DIR / name).unlink(missing_ok=True)
    log("down: lab containers, volumes, network, registry and http server removed")


def status() -> dict[str, object]:
    path = STATE_DIR / "state.json"
    if not path.exists():
        return {"up": False}
    state = json.loads(path.read_text())
    running = set(docker("ps", "--filter", f"label={LABEL}=1", "--format", "{{.Names}}").split())
    state["up"] = all(n["container"] in running for n in state["nodes"])
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--gpu-nodes", type=int, default=int(os.environ.get("GLM_LAB_GPU_NODES", "2")))
    sub.add_parser("down")
    sub.add_parser("services", help="start the network, registry and http server without nodes")
    sub.add_parser("status")
    sub.add_parser("image", help="build the node image unless cached; tag it :latest")
    sub.add_parser("engine", help="start a docker engine unless one is running")
    p_standin = sub.add_parser("standin", help="run the SGLang stand-in alone, in the foreground")
    p_standin.add_argument("--port", type=int, default=18199)
    p_standin.add_argument("--script", type=Path, help="a JSON list of the model's raw texts, taken in turn")
    p_standin.add_argument("extra", nargs="*", help="more launch_server arguments, after --")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.gpu_nodes)
        elif args.command == "down":
            down()
        elif args.command == "services":
            print(json.dumps(services(), indent=2))
        elif args.command == "standin":
            return run_standin(args.port, args.script, args.extra)
        elif args.command == "engine":
            ensure_dockerd()
        elif args.command == "image":
            ensure_dockerd()
            print(ensure_image())
        else:
            print(json.dumps(status(), indent=2))
    except LabError as err:
        print(f"lab: error: {err}", file=sys.stderr)
        return 1
    return 0
