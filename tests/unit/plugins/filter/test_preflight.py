"""glm.fleet.preflight_problems: every failed check of a GPU node named at once, none for a fit node."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.filter.preflight import FilterModule, memory_gb, preflight_problems

DF = """   Avail Mounted on
 500000000000 /
 100000000000 /var/lib/docker
"""

SETTINGS = {
    "host": "gpu-1",
    "required_gpus": 4,
    "min_gpu_memory_gb": 384,
    "min_driver_version": "580.65.06",
    "disk_requirements": [
        {"path": "/var/lib/docker", "min_free_gb": 80},
        {"path": "/var/lib/glm-fleet", "min_free_gb": 340},
    ],
    "require_fabric_manager": True,
    "fabric_manager_service": "nvidia-fabricmanager.service",
}


ONE_FILESYSTEM = [{"path": "/var/lib/docker", "min_free_gb": 60}, {"path": "/var/lib/docker/x", "min_free_gb": 61}]


def b200s(count: int = 4, fabric: str | None = "Completed") -> dict[str, Any]:
    """glm.fleet.gpu_facts' summary of a board of B200s (183359 MiB each)."""
    return {
        "count": count,
        "names": ["NVIDIA B200"],
        "total_memory_mib": 183359 * count,
        "driver_version": "580.95.05",
        "cuda_version": "13.0",
        "nvswitch": fabric is not None,
        "fabric_manager_active": fabric is not None,
        "fabric_registered": fabric == "Completed",
        "gpus": [{"fabric_state": fabric}] * count,
    }


def test_a_fit_node_has_no_problem() -> None:
    assert preflight_problems(b200s(), DF, SETTINGS) == []
    assert memory_gb(b200s()) == 769.1


def test_a_node_without_nvswitches_needs_no_fabric_manager() -> None:
    assert preflight_problems(b200s(fabric=None), DF, SETTINGS) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"required_gpus": 8},
            "has 4 GPU(s) (NVIDIA B200); preflight_required_gpus (the server's tensor-parallel size) is 8.",
        ),
        ({"min_gpu_memory_gb": 800}, "gpu-1 has 769.1 GB of GPU memory in all; preflight_min_gpu_memory_gb is 800"),
        (
            {"min_driver_version": "580.100.1"},
            "driver 580.95.05 (CUDA 13.0); preflight_min_driver_version is 580.100.1:",
        ),
        (
            {"disk_requirements": ONE_FILESYSTEM},
            "/var/lib/docker + /var/lib/docker/x need 121.0 GB on /var/lib/docker, 100.0 GB free.",
        ),
    ],
    ids=["gpus", "memory", "driver (numeric, not lexical)", "disk (paths on one filesystem add up)"],
)
def test_each_check_names_its_setting_and_what_the_node_has(change: dict[str, Any], expected: str) -> None:
    problems = preflight_problems(b200s(), DF, {**SETTINGS, **change})
    assert len(problems) == 1, problems
    assert expected in problems[0]


def test_an_unregistered_fabric_is_refused_unless_the_fabric_manager_is_not_required() -> None:
    gpus = {**b200s(fabric="In Progress"), "fabric_manager_active": False}
    (problem,) = preflight_problems(gpus, DF, SETTINGS)
    assert "nvidia-fabricmanager.service (preflight_fabric_manager_service) is not active" in problem
    assert "fabric state is In Progress:" in problem
    assert preflight_problems(gpus, DF, {**SETTINGS, "require_fabric_manager": False}) == []


def test_every_failed_check_is_named_at_once() -> None:
    gpus = {**b200s(count=1, fabric="In Progress"), "driver_version": "570.1"}
    problems = preflight_problems(gpus, DF, {**SETTINGS, "disk_requirements": [{"path": "/", "min_free_gb": 1000}]})
    assert [p.split(" ", 2)[1] for p in problems] == ["has", "has", "runs", "lacks", "has"]


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters()["preflight_problems"] is preflight_problems
