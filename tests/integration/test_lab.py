"""The lab behaves like a fleet: SSH-reachable systemd hosts, each with its own docker engine,
and a registry that serves images to them as the site's Docker Hub mirror."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import REPO, Runner, host_results, lab, run_log


def node_names(state: dict[str, Any]) -> set[str]:
    return {node["name"] for node in state["nodes"]}


def test_every_node_answers_over_ssh(runner: Runner, lab_state: dict[str, Any]) -> None:
    run = runner.module("all", "ansible.builtin.setup", "gather_subset=!all,!min,env")
    assert run.status == "successful", run_log(run)
    assert run.stats["dark"] == {}, run.stats
    results = host_results(run)
    assert set(results) == node_names(lab_state)
    for host, res in results.items():
        facts = res["ansible_facts"]
        # Really over SSH: sshd sets SSH_CONNECTION in the session Ansible runs in.
        assert facts["ansible_env"].get("SSH_CONNECTION"), f"{host}: no SSH session"
        # GPU nodes as the admin account, laptops as their developer (inventories/lab/group_vars).
        assert facts["ansible_env"]["USER"] == ("dev" if host.startswith("laptop") else "fleet")


def test_systemd_runs_as_pid1_on_every_node(runner: Runner, lab_state: dict[str, Any]) -> None:
    run = runner.module("all", "ansible.builtin.shell", "cat /proc/1/comm; systemctl is-system-running")
    assert run.status == "successful", run_log(run)
    results = host_results(run)
    assert set(results) == node_names(lab_state)
    for host, res in results.items():
        assert res["stdout_lines"] == ["systemd", "running"], f"{host}: {res['stdout']}"


def test_node_runs_an_image_pulled_by_digest_through_the_mirror(runner: Runner, lab_state: dict[str, Any]) -> None:
    image = lab_state["smoke_image"]
    repo, digest = image.split("@")
    registry_log = Path(lab.registry_paths()["log"])
    log_before = registry_log.read_text() if registry_log.exists() else ""

    run = runner.playbook(REPO / "tests" / "integration" / "playbooks" / "registry_mirror.yml")
    assert run.status == "successful", run_log(run)

    ran = host_results(run, "Run the smoke image")
    assert len(ran) == 1
    node, res = next(iter(ran.items()))
    assert res["stdout"] == "glm.fleet lab smoke image"
    digests = json.loads(host_results(run, "Read the pulled image's digests")[node]["stdout"])
    assert f"{repo}@{digest}" in digests

    address = next(n["address"] for n in lab_state["nodes"] if n["name"] == node)
    new_log = registry_log.read_text()[len(log_before) :]
    served = [
        line
        for line in new_log.splitlines()
        if f"/v2/{repo}/manifests/{digest}" in line and address in line and "response completed" in line
    ]
    assert served, f"the registry mirror served no manifest of {image} to {node} ({address})"
