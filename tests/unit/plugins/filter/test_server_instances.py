"""The servers of a GPU node (sglang_server_instances): what is refused before any change."""

# ruff: noqa: E501 - one refusal per line reads best
from __future__ import annotations

import pytest

from ansible_collections.glm.fleet.plugins.filter.server_instances import guard_chain, server_instance_problems

TWO = [
    {"name": "glm-a", "gpus": [0, 1, 2, 3], "port": 18080},
    {"name": "glm-b", "gpus": [4, 5, 6, 7], "port": 18081},
]
V = "sglang_server_instances"


def test_the_recipes_one_server_and_an_8_gpu_nodes_two_are_fit() -> None:
    assert server_instance_problems([{"name": "pareto-glm53-flash", "gpus": [0, 1, 2, 3], "port": 18080}], 4, 4) == []
    assert server_instance_problems(TWO, 4, 8) == []
    # values templated from the inventory may arrive as strings
    assert server_instance_problems([{"name": "glm", "gpus": ["0", "1", "2", "3"], "port": "18080"}], "4", "4") == []
    assert server_instance_problems(TWO, 4) == []  # GPU count unknown: that check waits for nvidia-smi


@pytest.mark.parametrize(
    ("instances", "gpu_count", "problem"),
    [
        ([TWO[0], TWO[1] | {"gpus": [3, 4, 5, 6]}], 8, f'{V}: GPU 3 is used by more than one instance (glm-a, glm-b)'),
        ([TWO[0], TWO[1] | {"port": 18080}], 8, f"{V}: port 18080 is used by more than one instance (glm-a, glm-b)"),
        ([TWO[0], TWO[1] | {"name": "glm-a"}], 8, f'{V}: name "glm-a" is used by more than one instance (glm-a, glm-a)'),
        (TWO, 4, f"{V}[1] (glm-b).gpus [4, 5, 6, 7] name GPU(s) [4, 5, 6, 7] this node does not have (it has 4: indices 0-3)"),
        ([TWO[0] | {"gpus": [0, 1]}], 8, f"{V}[0] (glm-a).gpus [0, 1] are fewer than the tensor-parallel size 4"),
        ([TWO[0] | {"gpus": [0, 0, 1, 2]}], 8, f"{V}[0] (glm-a).gpus must be distinct GPU indices from 0; got: [0, 0, 1, 2]"),
        ([TWO[0] | {"gpus": [-1, 0, 1, 2]}], 8, f"{V}[0] (glm-a).gpus must be distinct GPU indices from 0; got: [-1, 0, 1, 2]"),
        ([TWO[0] | {"port": 70000}], 8, f"{V}[0] (glm-a).port must be 1-65535; got: 70000"),
        ([TWO[0] | {"port": "18080\n"}], 8, f'{V}[0] (glm-a).port must be 1-65535; got: "18080\\n"'),
        ([TWO[0] | {"name": "glm a"}], 8, f'{V}[0].name must be a container name (letters, digits, _ . -; at most 63); got: "glm a"'),
        ([TWO[0] | {"name": "glm\n"}], 8, f'{V}[0].name must be a container name'),
        ([TWO[0] | {"gpu": [0]}], 8, f"{V}[0] must have exactly name, gpus and port; unknown: gpu"),
        ([{"name": "glm", "port": 18080}], 8, f"{V}[0] must have exactly name, gpus and port; missing: gpus"),
        ([], 8, f"{V} must be a non-empty list of {{name, gpus, port}}; got: []"),
        ("glm-a", 8, f'{V} must be a non-empty list of {{name, gpus, port}}; got: "glm-a"'),
        ([["glm-a", [0], 1]], 8, f'{V}[0] must be a mapping of name, gpus and port; got: ["glm-a", [0], 1]'),
        (
            [TWO[0] | {"name": "glm-serving-replica-number-1"}, TWO[1] | {"name": "glm-serving-replica-number-2"}],
            8,
            f'{V}: port-guard chain "GLM-glm-serving-replica-numb" is used by more than one instance',
        ),
    ],
)  # fmt: skip
def test_refused_naming_the_instance_and_the_value(instances: object, gpu_count: int, problem: str) -> None:
    problems = server_instance_problems(instances, 4, gpu_count)
    assert any(p.startswith(problem) for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    bad = [TWO[0] | {"port": 0}, TWO[1] | {"gpus": [4, 5]}]
    assert len(server_instance_problems(bad, 4, 8)) == 2


def test_the_guard_chain_fits_iptables() -> None:
    assert guard_chain("pareto-glm53-flash") == "GLM-pareto-glm53-flash"
    assert len(guard_chain("x" * 63)) == 28


def test_behind_the_tls_front_each_loopback_port_fits_and_is_no_servers_port() -> None:
    two = [{"name": "a", "gpus": [0, 1, 2, 3], "port": 18080}, {"name": "b", "gpus": [4, 5, 6, 7], "port": 18081}]
    assert server_instance_problems(two, 4, port_offset=10000) == []
    assert server_instance_problems(two, 4, port_offset=1) == [
        "sglang_server_tls_port_offset 1 puts a's loopback port at 18081, which is another server's port"
    ]
    assert server_instance_problems(two, 4, port_offset=50000) == [
        "sglang_server_tls_port_offset 50000 puts a's loopback port at 68080, which is outside 1-65535",
        "sglang_server_tls_port_offset 50000 puts b's loopback port at 68081, which is outside 1-65535",
    ]
    for bad in (0, "ten", True, None.__class__):
        assert server_instance_problems(two, 4, port_offset=bad)[0].startswith(
            "sglang_server_tls_port_offset must be a whole number other than 0"
        )
