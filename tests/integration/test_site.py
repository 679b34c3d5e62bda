"""site.yml on the lab: a fresh fleet converges without failures, and a second run changes nothing."""

from __future__ import annotations

from typing import Any

from conftest import REPO, Runner, host_results, run_log


def test_site_converges_then_changes_nothing(runner: Runner, lab_state: dict[str, Any]) -> None:
    hosts = {node["name"] for node in lab_state["nodes"]}
    gpu_nodes = {node["name"] for node in lab_state["nodes"] if node["group"] == "gpu_nodes"}

    first = runner.playbook(REPO / "site.yml")
    assert first.status == "successful", run_log(first)
    assert set(first.stats["ok"]) == hosts
    assert first.stats["failures"] == {}
    assert first.stats["dark"] == {}

    # What the stages promise on every GPU node: the preflight passed, docker lists the nvidia runtime.
    fabric = host_results(first, "Check the NVLink fabric")
    assert set(fabric) == gpu_nodes
    runtimes = "docker info --format '{{ '{{' }}json .Runtimes{{ '}}' }}'"
    check = runner.module("gpu_nodes", "ansible.builtin.command", runtimes, cmdline="--become")
    assert check.status == "successful", run_log(check)
    for host, res in host_results(check).items():
        assert '"nvidia"' in res["stdout"], f"{host}: {res['stdout']}"

    second = runner.playbook(REPO / "site.yml")
    assert second.status == "successful", run_log(second)
    assert second.stats["changed"] == {}, f"second run changed something: {second.stats['changed']}"
