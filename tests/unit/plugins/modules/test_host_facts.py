"""glm.fleet.host_facts: the facts setup gives for the same subset, and the GPU node's systemd/apt check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ansible.module_utils import basic

from ansible_collections.glm.fleet.plugins.modules import host_facts

RunMain = Callable[..., dict[str, Any]]
Reply = tuple[int, str, str]
SYSTEMD_APT = {
    "ansible_distribution": "Debian",
    "ansible_distribution_version": "12.8",
    "ansible_service_mgr": "systemd",
    "ansible_pkg_mgr": "apt",
}


def run(mocker: Any, run_main: RunMain, module_main: Any, args: dict, busctl: Reply | None = None) -> dict:
    """A module's main() with its exit captured; busctl answered with `busctl` where given."""
    calls: list[list[str]] = []
    real_run_command = basic.AnsibleModule.run_command

    def run_command(self: Any, argv: Any, *a: Any, **kw: Any) -> Reply:
        if isinstance(argv, list) and argv[:1] == ["busctl"]:
            calls.append(argv)
            assert busctl is not None, "busctl asked on a host that is not a GPU node"
            return busctl
        return real_run_command(self, argv, *a, **kw)

    mocker.patch.object(basic.AnsibleModule, "run_command", run_command)
    result = run_main(module_main, args)
    result["_busctl"] = calls
    return result


def test_busctl_replies_are_read_as_systemd_writes_them() -> None:
    assert host_facts.parse_system_state('s "running"\n') == "running"
    assert host_facts.parse_system_state('s "degraded"') == "degraded"
    assert host_facts.parse_system_state("Failed to connect to bus: No such file or directory") == (
        "Failed to connect to bus: No such file or directory"
    )
    assert host_facts.parse_system_state("u 3") == "u 3"


@pytest.mark.parametrize("state", ["running", "degraded"])
def test_a_gpu_node_with_systemd_booted_and_apt_passes(state: str) -> None:
    assert host_facts.problem(SYSTEMD_APT, state, gpu_node=True) is None
    assert host_facts.describe(SYSTEMD_APT, state) == f"Debian 12.8, service manager systemd ({state})"


@pytest.mark.parametrize(
    ("facts", "state", "named"),
    [
        ({**SYSTEMD_APT, "ansible_pkg_mgr": "dnf"}, "running", "pkg_mgr=dnf"),
        ({**SYSTEMD_APT, "ansible_service_mgr": "sysvinit"}, "running", "service_mgr=sysvinit"),
        (SYSTEMD_APT, "starting", "in state starting"),
        (SYSTEMD_APT, "maintenance", "in state maintenance"),
    ],
)
def test_a_gpu_node_without_systemd_running_or_apt_is_refused_naming_what_it_runs(
    facts: dict, state: str, named: str
) -> None:
    why = host_facts.problem(facts, state, gpu_node=True)
    assert why is not None
    assert named in why
    assert "Debian 12.8" in why


def test_other_hosts_are_not_held_to_systemd_and_apt() -> None:
    laptop = {"ansible_distribution": "MacOSX", "ansible_service_mgr": "launchd", "ansible_pkg_mgr": "homebrew"}
    assert host_facts.problem(laptop, None, gpu_node=False) is None
    assert host_facts.describe(laptop, None).startswith("MacOSX")


def test_the_facts_are_those_setup_gives_for_the_same_subset(mocker: Any, run_main: RunMain) -> None:
    # ansible-test units does not put ansible.modules on the path; pytest tests/unit runs this.
    setup = pytest.importorskip("ansible.modules.setup")
    ours = run(mocker, run_main, host_facts.main, {})
    theirs = run(mocker, run_main, setup.main, {"gather_subset": host_facts.SUBSET})
    assert not ours["failed"]
    assert ours["system_state"] is None
    assert ours["_busctl"] == []  # not a GPU node: systemd is not asked
    assert ours["ansible_facts"] == theirs["ansible_facts"]
    for name in ("ansible_distribution", "ansible_distribution_major_version", "ansible_os_family", "ansible_pkg_mgr"):
        assert ours["ansible_facts"][name], name
    assert "HOME" in ours["ansible_facts"]["ansible_env"]


def fake_collector(mocker: Any, facts: dict) -> None:
    collector = mocker.Mock()
    collector.collect.return_value = facts
    mocker.patch.object(host_facts.ansible_collector, "get_ansible_collector", return_value=collector)


def test_a_gpu_node_is_asked_for_systemds_state_and_passes_when_it_runs(mocker: Any, run_main: RunMain) -> None:
    fake_collector(mocker, SYSTEMD_APT)
    result = run(mocker, run_main, host_facts.main, {"gpu_node": True}, busctl=(0, 's "running"\n', ""))
    assert not result["failed"]
    assert result["_busctl"] == [host_facts.SYSTEM_STATE]
    assert result["system_state"] == "running"
    assert result["msg"] == "Debian 12.8, service manager systemd (running)"
    assert result["ansible_facts"] == SYSTEMD_APT


def test_a_gpu_node_still_booting_or_without_dbus_fails_with_what_it_found(mocker: Any, run_main: RunMain) -> None:
    fake_collector(mocker, SYSTEMD_APT)
    booting = run(mocker, run_main, host_facts.main, {"gpu_node": True}, busctl=(0, 's "starting"\n', ""))
    assert booting["failed"]
    assert "in state starting" in booting["msg"]
    no_bus = run(mocker, run_main, host_facts.main, {"gpu_node": True}, busctl=(1, "", "Failed to connect to bus"))
    assert no_bus["failed"]
    assert "busctl exit 1: Failed to connect to bus" in no_bus["msg"]
