"""After preflight: the node was only read, and what it read is what nvidia-smi says."""

from __future__ import annotations

import json


def test_preflight_changed_nothing_it_reads(host) -> None:  # noqa: ANN001 - testinfra fixture
    # The role is read-only: no toolkit, no docker engine, no data directory appeared.
    assert not host.package("nvidia-container-toolkit").is_installed
    assert not host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").exists
    assert not host.file("/var/lib/glm-fleet").exists


def test_the_node_reports_four_b200_behind_nvswitch(host) -> None:  # noqa: ANN001 - testinfra fixture
    out = host.check_output("nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits")
    assert out.splitlines() == ["NVIDIA B200, 183359"] * 4
    assert host.service("nvidia-fabricmanager").is_running


def test_gpu_facts_module_agrees(host) -> None:  # noqa: ANN001 - testinfra fixture
    result = host.ansible("glm.fleet.gpu_facts", check=False)
    assert result["count"] == 4
    assert result["nvswitch"] is True
    assert result["fabric_manager_active"] is True
    assert json.dumps(result["gpus"][0]["compute_capability"]) == '"10.0"'
