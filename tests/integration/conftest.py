"""Integration tests run against the lab (`make lab-up`); they bring it up when it is not running."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lab"))

import lab  # noqa: E402


@pytest.fixture(scope="session")
def lab_state() -> dict[str, Any]:
    state = lab.status()
    if not state.get("up"):
        lab.up(int(os.environ.get("GLM_LAB_GPU_NODES", "2")))
        state = lab.status()
    assert state["up"], f"the lab is not running: {json.dumps(state)}"
    return state


BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")


def lab_secrets() -> dict[str, str]:
    """The lab's secrets (generated per lab), by name."""
    files = {
        "sglang API key": "api_key",
        "sglang admin key": "admin_api_key",
        "Hugging Face token": "hf_token",
        "registry password": "registry_password",
        "Grafana token": "grafana_token",
        "alert webhook token": "alert_hook_token",
        "site CA key passphrase": "ca_passphrase",
    }
    found = {name: (lab.STATE_DIR / f).read_text().strip() for name, f in files.items() if (lab.STATE_DIR / f).exists()}
    # What the gateway's runs generate on the controller: the developers' keys and the site CA's key.
    secrets_dir = lab.INVENTORY.parent / ".secrets"
    for path in sorted(secrets_dir.glob("developer-keys/*.key")):
        found[f"developer key {path.stem}"] = path.read_text().strip()
    lab_vars = yaml.safe_load((lab.INVENTORY.parent / "group_vars" / "all" / "lab.yml").read_text())
    for name, key in lab_vars["deployment_developer_lyceum_keys"].items():
        found[f"Lyceum key {name}"] = key
    for path in sorted(secrets_dir.glob("ca/*.key")):
        body = "".join(path.read_text().splitlines()[1:-1])  # the base64 of the key, as it could leak
        found[f"TLS key {path.name}"] = body
    # What the gateway hosts make and keep: each router's control-plane key.
    for host in ("cache-1", "gateway-2"):
        if host not in ROUTER_KEYS:
            read = subprocess.run(
                ["docker", "exec", f"{lab.PREFIX}-{host}", "cat", ROUTER_ADMIN_KEY_FILE],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if read.returncode == 0 and read.stdout.strip():
                ROUTER_KEYS[host] = read.stdout.strip()
        if host in ROUTER_KEYS:
            found[f"router control-plane key on {host}"] = ROUTER_KEYS[host]
    return found


# glm.fleet.deployment's __deployment_router_admin_key_file, and what lab_secrets() read of it on
# each gateway host (made once per host, kept).
ROUTER_ADMIN_KEY_FILE = "/etc/glm-fleet/gateway/router-admin.key"
ROUTER_KEYS: dict[str, str] = {}


def leaks(text: str, secrets: dict[str, str]) -> list[str]:
    """Where a secret shows in text: plain, JSON-escaped, or inside any base64 run (decoded at each
    of the four alignments, so a secret in the middle of a slurped file is found too)."""
    found = []
    decoded: list[bytes] = []
    for run in BASE64_RUN.findall(text):
        for shift in range(4):
            chunk = run[shift:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            try:
                decoded.append(base64.b64decode(chunk, validate=False))
            except (binascii.Error, ValueError):
                continue
    for name, secret in secrets.items():
        forms = {"plain": secret, "JSON-escaped": json.dumps(secret)[1:-1]}
        found += [f"{name} ({form})" for form, value in forms.items() if value in text]
        if any(secret.encode() in blob for blob in decoded):
            found.append(f"{name} (base64)")
    return found


DEPRECATION = re.compile(r"^\[DEPRECATION WARNING\]:.*$", re.MULTILINE)


def assert_no_secret(run: ansible_runner.Runner) -> ansible_runner.Runner:
    """Every run's output and events are scanned for every lab secret; a leak fails the test
    (naming the secret, never printing it). A deprecation warning in the output fails it too: what
    a run of ours uses goes away in a later ansible-core."""
    text = (run.stdout.read() if run.stdout else "") + "\n" + json.dumps(list(run.events))
    if run.stdout:
        run.stdout.seek(0)
    found = leaks(text, lab_secrets())
    assert not found, f"secrets in Ansible's output: {', '.join(found)}"
    deprecations = sorted(set(DEPRECATION.findall(text)))
    for event in run.events:
        res = event.get("event_data", {}).get("res", {})
        deprecations += [str(d) for d in res.get("deprecations", [])] if isinstance(res, dict) else []
    assert not deprecations, "deprecation warnings in Ansible's output:\n" + "\n".join(deprecations)
    return run


class Runner:
    """ansible-runner bound to this checkout's ansible.cfg and the lab inventory; every run's output
    is scanned for the lab's secrets."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = 0

    def _kwargs(self) -> dict[str, Any]:
        # A fresh private data dir per run: ansible-runner keeps extravars there between runs.
        self.runs += 1
        private = self.tmp / f"run-{self.runs}"
        private.mkdir(parents=True)
        return {
            "private_data_dir": str(private),
            "project_dir": str(REPO),
            "inventory": str(lab.INVENTORY),
            "envvars": {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
            "quiet": True,
            "timeout": 900,
        }

    def module(self, pattern: str, module: str, args: str = "", **extra: object) -> ansible_runner.Runner:
        run = ansible_runner.run(host_pattern=pattern, module=module, module_args=args, **{**self._kwargs(), **extra})
        return assert_no_secret(ended(run))

    def playbook(self, playbook: Path, **extra: object) -> ansible_runner.Runner:
        return assert_no_secret(ended(ansible_runner.run(playbook=str(playbook), **{**self._kwargs(), **extra})))


def ended(run: ansible_runner.Runner) -> ansible_runner.Runner:
    """A run that ansible-runner stopped at its timeout: it kills ansible-playbook's process group,
    but the workers ansible-core forks start sessions of their own, and one that waits on a module
    (through Mitogen, where a site turns it on) can wait for ever once the run is gone. Any process
    still running the run's command line is killed."""
    if run.status not in ("timeout", "canceled"):
        return run
    argv = json.loads((Path(run.config.artifact_dir) / "command").read_text())["command"]
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        if len(cmdline) >= len(argv) and cmdline[-len(argv) + 1 :] == argv[1:] and argv[0] in " ".join(cmdline):
            subprocess.run(["kill", "-KILL", proc.name], check=False)
    return run


@pytest.fixture
def runner(tmp_path: Path, lab_state: dict[str, Any]) -> Runner:
    return Runner(tmp_path)


def site_stage(tmp: Path, tags: str, extravars: dict[str, Any] | None = None) -> None:
    """Run site.yml's stages `tags` on the lab (a module's fixture: the stage it tests, converged)."""
    run = Runner(tmp).playbook(REPO / "site.yml", tags=tags, extravars=extravars or {})
    assert run.status == "successful", run_log(run)


def host_results(run: ansible_runner.Runner, task: str | None = None) -> dict[str, dict[str, Any]]:
    """The last result per host (for one task name, when given) from the runner's events."""
    results: dict[str, dict[str, Any]] = {}
    for event in run.events:
        data = event.get("event_data", {})
        wanted = task is None or data.get("task") == task
        if wanted and event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            results[data["host"]] = {"event": event["event"], **data.get("res", {})}
    return results


# playbooks/sglang_server.yml: its serial play, and what its plan says when no node needs it.
ROLLING_PLAY = "Serve GLM-5.3-Flash with SGLang, rolling and health-gated, on the nodes that need it"
NO_ROLLOUT = "No node needs a (re)start: every server runs as configured and serves."
# roles/sglang_server/tasks/precompile.yml: the compile before a server's restart (sglang_server_precompile).
PRECOMPILE_TASK = "Compile the kernels with python3 -m sglang.compile_deep_gemm"


def rollout_plan(run: ansible_runner.Runner) -> dict[str, str] | str:
    """What a successful run's server stage planned (node to its reasons, or NO_ROLLOUT), said once
    for the fleet, checked against the nodes its serial play then ran on."""
    said = host_results(run, "Say which nodes go through the rolling restart, and why")
    assert len(said) == 1, said
    plan = next(iter(said.values()))["msg"]
    rolled = set(host_results(run, "Enable and start the servers"))
    assert rolled == (set() if plan == NO_ROLLOUT else set(plan)), (plan, rolled)
    return plan


def run_log(run: ansible_runner.Runner) -> str:
    return run.stdout.read() if run.stdout else ""


GATEWAY_HOST = "cache-1"


def router_api(host: str, path: str, key_file: str | None = None, key: str = "") -> str:
    """An answer of the router's API on host's loopback, with the key in key_file on that host (or
    key), never on a command line: the body, then the HTTP status on a line of its own."""
    script = (
        'read -r key; if [ -n "$1" ]; then key=$(cat "$1"); fi; '
        'printf "Authorization: Bearer %s\\n" "$key" | curl -s --max-time 5 -w "\\n%{http_code}" -H @- "http://127.0.0.1:30000$2"'
    )
    return subprocess.run(
        ["docker", "exec", "-i", f"{lab.PREFIX}-{host}", "bash", "-c", script, "-", key_file or "", path],
        input=key + "\n", capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip


def router_workers() -> dict[str, bool]:
    """The gateway router's own view (cache-1): each worker URL and whether it counts it healthy
    (SMG's /workers, on the gateway's loopback, with the router's control-plane key as the gateway
    host keeps it, given to curl on stdin)."""
    body = router_api(GATEWAY_HOST, "/workers", ROUTER_ADMIN_KEY_FILE).rpartition("\n")[0]
    return {w["url"]: bool(w["is_healthy"]) for w in json.loads(body)["workers"]}
