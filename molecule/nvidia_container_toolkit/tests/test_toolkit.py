"""What a person checks by hand after installing the container toolkit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PINNED = "1.18.0-1"
PACKAGES = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
SOURCE = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
CA_FILE = "/etc/ssl/glm-fleet/nvidia-container-toolkit-ca.pem"
APT_CA_CONF = "/etc/apt/apt.conf.d/60glm-fleet-nvidia-container-toolkit-ca"


def smoke_image() -> str:
    return json.loads((REPO / ".lab" / "services.json").read_text())["smoke_image"]


def test_repository_is_signed_by_a_dearmored_keyring(host) -> None:  # noqa: ANN001 - testinfra fixture
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").content_string
    assert f"deb [signed-by={KEYRING}] https://172.30.253.1:8443/nvidia/stable/deb/$(ARCH) /" in source
    keyring = host.file(KEYRING)
    assert keyring.exists
    assert keyring.mode == 0o644
    assert not keyring.content.startswith(b"-----BEGIN")  # binary, not armored
    assert "glm.fleet lab apt signing key" in host.check_output(f"gpg --show-keys {KEYRING}")


def test_apt_trusts_the_mirrors_ca_for_its_host_only_and_needs_it(host) -> None:  # noqa: ANN001
    """The lab's mirror is https with a certificate of a CA no host trusts by default: apt reaches it
    with the role's setting for that host, and refuses its certificate without it."""
    ca = host.file(CA_FILE)
    assert (ca.mode, ca.user) == (0o644, "root")
    assert ca.content_string == (REPO / ".lab" / "upstream-tls" / "ca.pem").read_text()
    setting = host.file(APT_CA_CONF).content_string
    assert f'Acquire::https::172.30.253.1::CaInfo "{CA_FILE}";' in setting
    update = f"apt-get update -o Dir::Etc::sourcelist={SOURCE} -o Dir::Etc::sourceparts=- 2>&1"
    assert "Certificate verification failed" not in host.check_output(update)
    host.check_output(f"mv {APT_CA_CONF} /root/apt-ca.conf")
    try:
        host.check_output("rm -rf /var/lib/apt/lists/172.30.253.1*")
        assert "Certificate verification failed: The certificate is NOT trusted" in host.check_output(update)
    finally:
        host.check_output(f"mv /root/apt-ca.conf {APT_CA_CONF}")
    assert "Certificate verification failed" not in host.check_output(update)


@pytest.mark.parametrize("name", PACKAGES)
def test_pinned_version_is_installed_and_held_though_newer_exists(host, name: str) -> None:  # noqa: ANN001
    assert host.package(name).version == PINNED
    policy = host.check_output(f"apt-cache policy {name}")
    assert "1.18.1-1" in policy  # the repository offers a newer one, which was not taken
    assert host.check_output(f"dpkg-query -W -f='${{Status}}' {name}").startswith("hold ")


def test_pigz_is_installed(host) -> None:  # noqa: ANN001 - testinfra fixture
    assert host.package("pigz").is_installed


def test_daemon_json_keeps_user_keys_and_gains_runtime_and_mirror(host) -> None:  # noqa: ANN001
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["log-driver"] == "json-file"
    assert config["log-opts"] == {"max-size": "10m"}
    assert config["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert config["registry-mirrors"] == ["http://172.30.253.1:5000"]
    # the mirror, and the lab's private registry (a login, reached through a slow link)
    assert config["insecure-registries"] == ["172.30.253.1:5000", "172.30.253.1:5002"]
    assert "default-runtime" not in config


def test_docker_lists_the_nvidia_runtime(host) -> None:  # noqa: ANN001 - testinfra fixture
    assert host.service("docker").is_running
    assert host.service("docker").is_enabled
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert "nvidia" in runtimes


def test_docker_runs_a_container_with_the_seeds_gpu_flag(host) -> None:  # noqa: ANN001
    image = smoke_image()
    host.check_output(f"docker pull {image}")
    out = host.run(f"""docker run --rm --gpus '"device=0,1,2,3"' {image}""")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip() == "glm.fleet lab smoke image"
    out = host.run(f"docker run --rm --runtime=nvidia {image}")
    assert out.rc == 0, out.stderr


def test_a_gpu_the_node_does_not_have_is_refused_at_start(host) -> None:  # noqa: ANN001
    """As libnvidia-container refuses it: the node's stand-in nvidia-smi reports GPUs 0-3."""
    out = host.run(f"""docker run --rm --gpus '"device=3,4"' {smoke_image()}""")
    assert out.rc != 0
    assert "nvidia-container-cli: device error: 4: unknown device" in out.stderr
