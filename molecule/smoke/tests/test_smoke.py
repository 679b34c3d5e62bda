"""What a person checks by hand on a node after the smoke play: systemd runs it, sshd serves."""

from __future__ import annotations


def test_systemd_is_pid1_and_running(host) -> None:  # noqa: ANN001 - testinfra fixture
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    assert state.stdout.strip() == "running", host.run("systemctl --failed --no-legend").stdout


def test_sshd_is_enabled_and_listening(host) -> None:  # noqa: ANN001 - testinfra fixture
    ssh = host.service("ssh")
    assert ssh.is_running
    assert ssh.is_enabled
    assert host.socket("tcp://0.0.0.0:22").is_listening


def test_host_keys_are_unique_to_the_node(host) -> None:  # noqa: ANN001 - testinfra fixture
    key = host.file("/etc/ssh/ssh_host_ed25519_key")
    assert key.exists
    assert key.mode == 0o600
    assert key.user == "root"
