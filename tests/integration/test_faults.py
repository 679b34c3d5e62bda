"""Faults that real fleets have, on a serving lab: a node that reboots comes back serving on its own;
a node that cannot be reached does not stop the others, and the fleet health report shows it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Runner, host_results, lab, run_log

SERVED = "zai-org/GLM-5.3-Flash"


def gpu_nodes(state: dict[str, Any]) -> list[str]:
    return [n["name"] for n in state["nodes"] if n["group"] == "gpu_nodes"]


def health(runner: Runner, node: str, timeout: int) -> dict[str, Any]:
    args = {
        "port": 28080,  # the server's own port, behind the TLS front
        "api_key": "{{ glm_lab_api_key }}",  # from the lab inventory: no key in argv
        "served_model_name": SERVED,
        "timeout": timeout,
    }
    run = runner.module(node, "glm.fleet.sglang_health", json.dumps(args))
    return host_results(run)[node]


def test_a_rebooted_node_serves_again_on_its_own(runner: Runner, lab_state: dict[str, Any]) -> None:
    node = gpu_nodes(lab_state)[0]
    assert health(runner, node, 60).get("ready"), "the node did not serve before the reboot"
    subprocess.run(["docker", "restart", f"{lab.PREFIX}-{node}"], check=True, capture_output=True)
    address = next(n["address"] for n in lab_state["nodes"] if n["name"] == node)
    deadline = time.monotonic() + 120
    while subprocess.run(["ssh-keyscan", "-T", "2", address], capture_output=True, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"{node} did not come back in 120 s"
        time.sleep(1)
    result = health(runner, node, 180)  # nothing but the node's own systemd and docker starts the server
    assert result.get("ready"), result


@pytest.fixture
def second_node_paused(lab_state: dict[str, Any]) -> Iterator[str]:
    node = gpu_nodes(lab_state)[-1]
    subprocess.run(["docker", "pause", f"{lab.PREFIX}-{node}"], check=True)
    yield node
    subprocess.run(["docker", "unpause", f"{lab.PREFIX}-{node}"], check=True)


def test_an_unreachable_node_does_not_stop_the_others_and_the_report_shows_it(
    runner: Runner, lab_state: dict[str, Any], second_node_paused: str, tmp_path: Path
) -> None:
    report_dir = tmp_path / "report"
    others = [n for n in gpu_nodes(lab_state) if n != second_node_paused]
    # A short connection timeout and no reconnection retries: the paused node is given up sooner.
    extravars = {"glm_fleet_report_dir": str(report_dir), "ansible_timeout": 10, "ansible_ssh_retries": 0}
    run = runner.playbook(REPO / "site.yml", tags="smoke,server,report", extravars=extravars)
    assert run.status == "failed", run_log(run)  # ansible-playbook exits non-zero: a host was unreachable
    assert set(run.stats["dark"]) == {second_node_paused}, run.stats
    assert run.stats["failures"] == {}, run.stats
    assert set(others) <= set(run.stats["ok"])
    report = {row["node"]: row for row in json.loads((report_dir / "fleet-health.json").read_text())["servers"]}
    assert report[second_node_paused]["ready"] is False
    assert report[second_node_paused]["failed_check"] == "unreachable"
    for node in others:
        assert report[node]["ready"], report[node]
