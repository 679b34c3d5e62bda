"""glm.fleet.gpu_facts: parsing real nvidia-smi output, and the module's behaviour around it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils import basic

from ansible_collections.glm.fleet.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.glm.fleet.plugins.modules import gpu_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"  # tests/unit/fixtures (also under ansible-test units)

SMI = FIXTURES / "nvidia-smi"
ALL_FIELDS = smi.BASE_FIELDS + smi.FABRIC_FIELDS


def fixture(name: str) -> str:
    return (SMI / name).read_text()


def test_parses_the_h200_captured_on_real_hardware() -> None:
    (gpu,) = smi.parse_query(fixture("h200x1/query-gpu-fabric.csv"), ALL_FIELDS)
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["memory_mib"] == 143771
    assert gpu["compute_capability"] == "9.0"
    assert gpu["driver_version"] == "580.159.04"
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert gpu["uuid"].startswith("GPU-")
    # A single PCIe-attached H200: no NVLink fabric.
    assert gpu["fabric_state"] is None
    assert gpu["fabric_status"] is None


def test_parses_the_base_query_of_older_drivers() -> None:
    (gpu,) = smi.parse_query(fixture("h200x1/query-gpu.csv"), smi.BASE_FIELDS)
    assert gpu["memory_mib"] == 143771
    assert gpu["fabric_state"] is None


def test_recognises_the_real_unknown_field_error() -> None:
    assert smi.is_unknown_field_error(fixture("h200x1/query-gpu-invalid-field.txt"))
    assert not smi.is_unknown_field_error(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )


@pytest.mark.parametrize(
    ("directory", "driver", "cuda"), [("h200x1", "580.159.04", "13.0"), ("b200x4", "580.95.05", "13.0")]
)
def test_parses_driver_and_cuda_versions(directory: str, driver: str, cuda: str) -> None:
    assert smi.parse_version(fixture(f"{directory}/version.txt")) == {"driver_version": driver, "cuda_version": cuda}


def test_summarizes_a_half_hgx_b200() -> None:
    gpus = smi.parse_query(fixture("b200x4/query-gpu-fabric.csv"), ALL_FIELDS)
    facts = smi.summarize(gpus, smi.parse_version(fixture("b200x4/version.txt")), 0, fabric_manager_active=True)
    assert facts["count"] == 4
    assert [g["index"] for g in facts["gpus"]] == [0, 1, 2, 3]
    assert facts["names"] == ["NVIDIA B200"]
    assert facts["total_memory_mib"] == 4 * 183359
    assert facts["min_memory_mib"] == 183359
    assert facts["min_compute_capability"] == "10.0"
    assert facts["nvswitch"] is True
    assert facts["fabric_registered"] is True
    assert facts["fabric_manager_active"] is True


def test_summarizes_the_h200_without_fabric() -> None:
    gpus = smi.parse_query(fixture("h200x1/query-gpu-fabric.csv"), ALL_FIELDS)
    facts = smi.summarize(gpus, smi.parse_version(fixture("h200x1/version.txt")), 0, fabric_manager_active=None)
    assert facts["count"] == 1
    assert facts["nvswitch"] is False
    assert facts["fabric_registered"] is False


def test_a_gpu_still_registering_is_not_a_ready_fabric() -> None:
    text = fixture("b200x4/query-gpu-fabric.csv").replace("Completed, Success", "In Progress, N/A", 1)
    facts = smi.summarize(smi.parse_query(text, ALL_FIELDS), {"driver_version": "x", "cuda_version": None}, 0, False)
    assert facts["nvswitch"] is True
    assert facts["fabric_registered"] is False


def test_nvswitch_devices_alone_mean_nvswitch() -> None:
    gpus = smi.parse_query(fixture("h200x1/query-gpu.csv"), smi.BASE_FIELDS)
    assert smi.summarize(gpus, {"driver_version": "x", "cuda_version": None}, 2, True)["nvswitch"] is True


@pytest.mark.parametrize(
    "bad",
    [
        "0, NVIDIA B200, GPU-1, 00000000:1B:00.0, 183359\n",  # too few fields
        "zero, NVIDIA B200, GPU-1, 00000000:1B:00.0, 183359, 10.0, 580.95.05\n",  # not a number
    ],
)
def test_unexpected_output_is_an_error_that_quotes_it(bad: str) -> None:
    with pytest.raises(smi.NvidiaSmiError, match="183359"):
        smi.parse_query(bad, smi.BASE_FIELDS)


def test_missing_version_is_an_error() -> None:
    with pytest.raises(smi.NvidiaSmiError, match="no driver version"):
        smi.parse_version("garbage")


# --- the module around the parser --------------------------------------------------------------


Commands = dict[tuple[str, ...], tuple[int, str, str]]


def run_module(mocker: Any, run_main: Callable[..., dict], args: dict[str, Any], commands: Commands, **kw: Any) -> dict:
    """Run gpu_facts.main() with nvidia-smi answers taken from `commands` (argv tail -> rc, out, err)."""
    calls: list[list[str]] = []

    def run_command(_self: Any, argv: list[str], **_kw: Any) -> tuple[int, str, str]:
        calls.append(argv)
        if argv[0].endswith("systemctl"):
            return (0, "", "")
        return commands[tuple(argv[1:])]

    mocker.patch.object(basic.AnsibleModule, "run_command", run_command)
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", lambda _s, name, *a, **k: f"/usr/bin/{name}")
    result = run_main(gpu_facts.main, args, **kw)
    result["_calls"] = calls
    return result


def answers(directory: str) -> dict[tuple[str, ...], tuple[int, str, str]]:
    return {
        tuple(smi.query_args(ALL_FIELDS)): (0, fixture(f"{directory}/query-gpu-fabric.csv"), ""),
        ("--version",): (0, fixture(f"{directory}/version.txt"), ""),
    }


def test_module_reports_facts_and_changes_nothing(mocker: Any, run_main: Callable[..., dict]) -> None:
    result = run_module(mocker, run_main, {}, answers("b200x4"), check_mode=True)
    assert result["failed"] is False
    assert result["changed"] is False
    assert result["count"] == 4
    assert result["ansible_facts"]["glm_fleet_gpus"]["driver_version"] == "580.95.05"
    assert json.dumps(result["ansible_facts"])  # facts must serialize


def test_module_falls_back_when_the_driver_lacks_fabric_fields(mocker: Any, run_main: Callable[..., dict]) -> None:
    commands = {
        tuple(smi.query_args(ALL_FIELDS)): (2, fixture("h200x1/query-gpu-invalid-field.txt"), ""),
        tuple(smi.query_args(smi.BASE_FIELDS)): (0, fixture("h200x1/query-gpu.csv"), ""),
        ("--version",): (0, fixture("h200x1/version.txt"), ""),
    }
    result = run_module(mocker, run_main, {}, commands)
    assert result["failed"] is False
    assert result["count"] == 1
    assert [c[1] for c in result["_calls"] if c[0].endswith("nvidia-smi")][:2] == [
        smi.query_args(ALL_FIELDS)[0],
        smi.query_args(smi.BASE_FIELDS)[0],
    ]


def test_module_fails_with_what_nvidia_smi_said(mocker: Any, run_main: Callable[..., dict]) -> None:
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    commands = {tuple(smi.query_args(ALL_FIELDS)): (9, message, "")}
    result = run_module(mocker, run_main, {}, commands)
    assert result["failed"] is True
    assert result["msg"] == f"nvidia-smi failed (rc=9): {message}"


def test_module_fails_clearly_without_nvidia_smi(mocker: Any, run_main: Callable[..., dict]) -> None:
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", return_value=None)
    result = run_main(gpu_facts.main, {"nvidia_smi": "/opt/none/nvidia-smi"})
    assert result["failed"] is True
    assert "nvidia-smi not found (nvidia_smi=/opt/none/nvidia-smi)" in result["msg"]
