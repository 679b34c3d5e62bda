"""Bad input and unfit nodes are refused before anything on the host changes, with a message that
names the variable and the value."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO, Runner, lab, run_log

PLAYBOOK = REPO / "tests" / "integration" / "playbooks" / "apply_role.yml"
TARGET = "gpu-2"
CONTAINER = "glm-lab-gpu-2"

ROCKY_OS_RELEASE = """NAME="Rocky Linux"
VERSION="9.4 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"
"""


def node_state(container: str = CONTAINER) -> str:
    """What the roles would change first: apt sources, packages, daemon.json, the developer's home."""
    script = (
        "ls /etc/apt/sources.list.d; dpkg-query -W -f='${Package} ${Version}\\n'; "
        "cat /etc/docker/daemon.json 2>&1 || true; find /home/dev -path /home/dev/.ansible -prune -o -print"
    )
    return subprocess.run(
        ["docker", "exec", container, "sh", "-c", script], check=True, capture_output=True, text=True
    ).stdout


def refusal(runner: Runner, role: str, extravars: dict[str, Any], target: str = TARGET) -> str:
    container = f"glm-lab-{target}"
    before = node_state(container)
    become = role != "glm.fleet.claude_code"  # the laptop role runs as the developer
    run = runner.playbook(PLAYBOOK, extravars={"target": target, "role": role, "become_role": become, **extravars})
    assert run.status == "failed", run_log(run)
    assert run.stats["changed"].get(target, 0) == 0, run.stats
    assert node_state(container) == before, "the host changed before the refusal"
    failures = [
        e["event_data"]["res"].get("msg", "")
        for e in run.events
        if e.get("event") == "runner_on_failed" and e["event_data"].get("host") == target
    ]
    assert len(failures) == 1, run_log(run)
    return failures[0]


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        # the target, gpu-2, is the lab's 8x B200 node
        ({"preflight_required_gpus": 16}, ["has 8 GPU(s)", "preflight_required_gpus", "is 16"]),
        ({"preflight_min_gpu_memory_gb": 2000}, ["1538.1 GB of GPU memory", "preflight_min_gpu_memory_gb is 2000"]),
        ({"preflight_min_driver_version": "590.10"}, ["driver 580.95.05", "preflight_min_driver_version is 590.10"]),
        (
            {"preflight_disk_requirements": [{"path": "/var/lib/glm-fleet", "min_free_gb": 100000}]},
            ["preflight_disk_requirements", "/var/lib/glm-fleet need 100000.0 GB on /"],
        ),
        ({"preflight_required_gpus": "four"}, ["argument 'preflight_required_gpus'", "'four'"]),
    ],
    ids=["too-few-gpus", "too-little-gpu-memory", "old-driver", "too-little-disk", "malformed-gpu-count"],
)
def test_preflight_refuses_an_unfit_node(runner: Runner, extravars: dict[str, Any], expected: list[str]) -> None:
    message = refusal(runner, "glm.fleet.preflight", extravars)
    for part in expected:
        assert part in message, message


@pytest.fixture
def fabric_manager_stopped() -> Iterator[None]:
    subprocess.run(["docker", "exec", CONTAINER, "systemctl", "stop", "nvidia-fabricmanager"], check=True)
    yield
    subprocess.run(["docker", "exec", CONTAINER, "systemctl", "start", "nvidia-fabricmanager"], check=True)


@pytest.mark.usefixtures("fabric_manager_stopped")
def test_preflight_refuses_an_nvswitch_node_without_fabric_manager(runner: Runner) -> None:
    message = refusal(runner, "glm.fleet.preflight", {})
    assert "nvidia-fabricmanager.service (preflight_fabric_manager_service) is not active" in message


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        ({"nvidia_container_toolkit_version": "latest"}, "nvidia_container_toolkit_version must pin"),
        ({"nvidia_container_toolkit_version": "1.18"}, "got: 1.18"),
        (
            {"nvidia_container_toolkit_registry_mirrors": ["ftp://mirror.example.internal"]},
            'nvidia_container_toolkit_registry_mirrors entries must be http(s)://host[:port]; got: ["ftp://mirror.exa',
        ),
        (
            {"nvidia_container_toolkit_repo_base_url": "mirror.example.internal/nvidia"},
            "nvidia_container_toolkit_repo_base_url must be an https URL (a repository fetched over plain http is"
            ' whoever answers); got: "mirror.example.internal/nvidia"',
        ),
        (
            {"nvidia_container_toolkit_repo_base_url": "https://mirror.example.internal/nvidia\tstable main"},
            "must be an https URL (a repository fetched over plain http is whoever answers); got:"
            ' "https://mirror.example.internal/nvidia\\tstable main"',
        ),
        (
            {"nvidia_container_toolkit_repo_base_url": "http://mirror.example.internal/nvidia"},
            "nvidia_container_toolkit_repo_base_url must be an https URL (a repository fetched over plain http is"
            ' whoever answers); got: "http://mirror.example.internal/nvidia"',
        ),
        (
            {"nvidia_container_toolkit_gpg_key_url": "http://mirror.example.internal/gpgkey"},
            "nvidia_container_toolkit_gpg_key_url must be an https URL (a key fetched over plain http is whoever"
            ' answers); got: "http://mirror.example.internal/gpgkey"',
        ),
        (
            {"nvidia_container_toolkit_repo_ca": "a site CA"},
            "nvidia_container_toolkit_repo_ca must be a PEM certificate (-----BEGIN CERTIFICATE----- ...) or empty",
        ),
        (
            {"nvidia_container_toolkit_insecure_registries": ["mirror.example.internal:5000\n"]},
            'entries must be host[:port]; got: ["mirror.example.internal:5000\\n"]',
        ),
        ({"nvidia_container_toolkit_gpg_key_fingerprint": "F796ECB0"}, "must be a 40-hex key fingerprint"),
    ],
    ids=[
        "unpinned-latest",
        "unpinned-minor",
        "malformed-mirror",
        "malformed-repo-url",
        "repo-url-tab",
        "plain-http-repo",
        "plain-http-key",
        "not-a-ca",
        "insecure-newline",
        "short-fingerprint",
    ],
)
def test_toolkit_refuses_bad_input(runner: Runner, extravars: dict[str, Any], expected: str) -> None:
    assert expected in refusal(runner, "glm.fleet.nvidia_container_toolkit", extravars)


def test_toolkit_names_every_bad_setting_at_once(runner: Runner) -> None:
    message = refusal(
        runner,
        "glm.fleet.nvidia_container_toolkit",
        {"nvidia_container_toolkit_version": "latest", "nvidia_container_toolkit_gpg_key_fingerprint": "F796ECB0"},
    )
    assert "nvidia_container_toolkit_version must pin an exact apt version such as 1.18.0-1; got: latest" in message
    assert 'nvidia_container_toolkit_gpg_key_fingerprint must be a 40-hex key fingerprint; got: "F796ECB0"' in message


@pytest.fixture
def rhel_family_node() -> Iterator[None]:
    """Make the node identify itself as Rocky Linux 9, as Ansible's fact gathering reads it."""
    script = (
        "cp /etc/os-release /root/os-release.debian && rm /etc/os-release && "
        f"printf '%s' '{ROCKY_OS_RELEASE}' > /etc/os-release && "
        "echo 'Rocky Linux release 9.4 (Blue Onyx)' > /etc/redhat-release"
    )
    subprocess.run(["docker", "exec", CONTAINER, "sh", "-c", script], check=True)
    yield
    restore = "rm -f /etc/redhat-release /etc/os-release && mv /root/os-release.debian /etc/os-release"
    subprocess.run(["docker", "exec", CONTAINER, "sh", "-c", restore], check=True)


@pytest.mark.usefixtures("rhel_family_node")
def test_toolkit_refuses_a_rhel_family_system(runner: Runner) -> None:
    message = refusal(runner, "glm.fleet.nvidia_container_toolkit", {})
    assert "runs Rocky 9.4 (ansible_facts['distribution'], os_family RedHat)" in message
    assert "RHEL-family systems are refused until they are supported" in message


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        (
            {"claude_code_fleet_base_url": "http://172.30.253.11:18080", "claude_code_allow_insecure_http": False},
            "claude_code_fleet_base_url=http://172.30.253.11:18080 must be an https URL",
        ),
        ({"claude_code_fleet_auth_token": ""}, "claude_code_fleet_auth_token must not be empty (empty)"),
        ({"claude_code_profiles": ["fleet", "openrouter"]}, 'unknown: ["openrouter"]'),
        (
            {"claude_code_default_profile": "lyceum", "claude_code_profiles": ["fleet"]},
            "claude_code_default_profile=lyceum",
        ),
        (
            {"claude_code_fleet_context_length": 16384},
            "claude_code_fleet_context_length=16384 is too small for Claude Code: it needs at least 100000 tokens",
        ),
        ({"claude_code_max_output_tokens": 32000}, "claude_code_max_output_tokens=32000 must be 1 to 20000"),
        (
            {"claude_code_fleet_auth_token": "sk-from-echo-with-newline\n"},
            "claude_code_fleet_auth_token holds a space, a line break",
        ),
        (
            {
                "claude_code_fleet_base_url": "http://127.0.0.1@evil.example:18080",
                "claude_code_allow_insecure_http": False,
            },
            'claude_code_fleet_base_url must not carry user info (the part before @ is not the host); got: "http://127.0.0.1@',
        ),
        (
            {"claude_code_fleet_base_url": "http://127.evil.example:18080", "claude_code_allow_insecure_http": False},
            "claude_code_fleet_base_url=http://127.evil.example:18080 must be an https URL",
        ),
        (
            {"claude_code_fleet_base_url": "https://glm.example.internal\necho owned"},
            'claude_code_fleet_base_url must hold no spaces or control characters; got: "https://glm.example.internal\\necho',
        ),
        (
            {
                "claude_code_env_overrides": {"OPENAI_BASE_URL": "http://10.9.9.9/v1"},
                "claude_code_allow_insecure_http": False,
            },
            "claude_code_env_overrides.OPENAI_BASE_URL=http://10.9.9.9/v1 must be an https URL",
        ),
        ({"claude_code_env_overrides": {"BAD NAME": "x"}}, '"BAD NAME" is not an environment variable name'),
        (
            {
                "claude_code_bundle": {
                    "format": 1,
                    "developer": "laptop-1",
                    "base_url": "https://172.30.253.50",
                    "auth_token": "sk-from-echo-with-newline",
                }
            },
            "claude_code_bundle lacks ca_cert, model, context_length; it holds: auth_token, base_url, developer",
        ),
        (
            {
                "claude_code_bundle": {
                    "format": 1,
                    "developer": "laptop-1",
                    "base_url": "https://172.30.253.50",
                    "auth_token": "sk-from-echo-with-newline",
                    "model": "zai-org/GLM-5.3-Flash",
                    "context_length": 100000,
                    "ca_cert": "-----BEGIN PRIVATE KEY-----\nMC4CAQA=\n-----END PRIVATE KEY-----\n",
                }
            },
            "claude_code_bundle.ca_cert holds a private key",
        ),
    ],
    ids=[
        "insecure-http",
        "empty-token",
        "unknown-backend",
        "default-not-enabled",
        "small-window",
        "big-output",
        "token-with-newline",
        "user-info-host",
        "look-alike-loopback",
        "newline-in-url",
        "override-url",
        "override-name",
        "bundle-missing-fields",
        "bundle-with-a-key",
    ],
)
def test_claude_code_refuses_bad_input(runner: Runner, extravars: dict[str, Any], expected: str) -> None:
    message = refusal(runner, "glm.fleet.claude_code", extravars, target="laptop-1")
    assert expected in message, message
    assert "sk-from-echo-with-newline" not in message
    assert (lab.STATE_DIR / "api_key").read_text().strip() not in message  # the token is never printed


def test_site_refuses_the_recipes_context_length_before_any_stage(runner: Runner) -> None:
    """The recipe's --context-length 16384 cannot hold Claude Code's first request and output
    budget: site.yml stops in its first play, before any host is contacted."""
    before = node_state()
    run = runner.playbook(REPO / "site.yml", extravars={"deployment_context_length": 16384})
    assert run.status == "failed", run_log(run)
    failures = [e["event_data"] for e in run.events if e.get("event") == "runner_on_failed"]
    assert [f["host"] for f in failures] == ["laptop-1"], run_log(run)
    message = failures[0]["res"]["msg"]
    assert "claude_code_fleet_context_length=16384 is too small for Claude Code" in message, message
    assert "deployment_context_length" in message, message
    done = [e["event_data"] for e in run.events if e.get("event") == "runner_on_ok"]
    # Only controller-side checks ran (the include, argument specs, the deployment's assert): no host
    # was contacted, no stage began.
    controller_side = {
        "ansible.builtin.include_role",
        "ansible.builtin.validate_argument_spec",
        "ansible.builtin.assert",
    }
    assert {(d["host"], d["task_action"]) for d in done} <= {("laptop-1", a) for a in controller_side}, done
    assert node_state() == before


SHM = "sglang_server_shm_size must be a size such as 64g"
NAME = "must be a model name (letters, digits and ._/:@+-, no spaces, % or line breaks)"
GPUS = "must be distinct GPU indices from 0"
INST = "sglang_server_instances"
# Two servers, as on the lab's 8-GPU node (gpu-2, the target)
A = {"name": "a", "gpus": [0, 1, 2, 3], "port": 18080}
B = {"name": "b", "gpus": [4, 5, 6, 7], "port": 18081}
ENV = "sglang_server_env values must hold no control characters (line breaks, tabs)"


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        ({"sglang_server_shm_size": "64g --privileged"}, f'{SHM}; got: "64g --privileged"'),
        ({"sglang_server_served_model_name": "glm\nExecStartPost=/bin/sh -c id"}, f'{NAME}; got: ["zai-org'),
        ({"sglang_server_served_model_name": "glm %Z"}, NAME),
        ({"sglang_server_bind_address": "gpu-1.example.internal"}, "must be an IP address (not a host name)"),
        (
            {"sglang_server_bind_address": "::"},
            "or ::1 (the port guard keeps an IPv4 port to sglang_server_allowed_sources",
        ),
        ({INST: [A | {"gpus": [0, 0, 1, 2]}]}, f"{INST}[0] (a).gpus {GPUS}; got: [0, 0, 1, 2]"),
        ({INST: [A, B | {"gpus": [3, 4, 5, 6]}]}, f"{INST}: GPU 3 is used by more than one instance (a, b)"),
        ({INST: [A, B | {"port": 18080}]}, f"{INST}: port 18080 is used by more than one instance (a, b)"),
        (
            {INST: [A, B | {"gpus": [6, 7, 8, 9]}]},
            f"{INST}[1] (b).gpus [6, 7, 8, 9] name GPU(s) [8, 9] this node does not have (it has 8: indices 0-7)",
        ),
        ({"sglang_server_env": {"NCCL_DEBUG": "WARN\nEVIL=1"}}, f'{ENV}; in: ["NCCL_DEBUG"] (values not shown)'),
        ({"sglang_server_extra_args": ["--x", "y\n"]}, "sglang_server_extra_args must hold no control characters"),
        ({"sglang_server_allowed_sources": ["the-lan"]}, 'must be IPv4 addresses or CIDRs; got: ["the-lan"]'),
        ({"sglang_server_admin_api_key": "{{ glm_lab_api_key }}"}, "sglang_server_admin_api_key must differ"),
        ({"sglang_server_hf_cache_dir": "relative/cache"}, "must be absolute paths without spaces"),
        (
            {"sglang_server_jit_share_dir": "/srv/fleet/jit\ncache"},
            "sglang_server_jit_share_dir must be an absolute path on the controller without spaces or control"
            ' characters; got: "/srv/fleet/jit\\ncache"',
        ),
        ({"sglang_server_ready_timeout": -5}, "must be whole numbers of at least 1; got: [60, 2, 5, 1800, -5, 3600]"),
        ({"sglang_server_image": "lmsysorg/sglang@sha256:" + "a" * 64 + "\n"}, "sglang_server_image must be pinned"),
        (
            {INST: [A | {"name": "ssh"}]},
            f'{INST}: the server "ssh" would replace the unit ssh.service, which is not a server of this role'
            " (OpenBSD Secure Shell server, /lib/systemd/system/ssh.service): choose another name",
        ),
    ],
    ids=[
        "shm-flag",
        "name-newline",
        "name-specifier",
        "host-name",
        "ipv6-any",
        "duplicate-gpu",
        "gpu-in-two-instances",
        "port-in-two-instances",
        "gpu-the-node-lacks",
        "env-newline",
        "arg-newline",
        "source-name",
        "admin-equals-serving",
        "relative-dir",
        "share-dir-newline",
        "negative-timeout",
        "image-newline",
        "name-of-a-system-unit",
    ],
)
def test_server_refuses_bad_input(runner: Runner, extravars: dict[str, Any], expected: str) -> None:
    message = refusal(runner, "glm.fleet.sglang_server", extravars)
    assert expected in message, message
    assert (lab.STATE_DIR / "api_key").read_text().strip() not in message


@pytest.mark.parametrize(
    "key",
    [
        "sk-from-echo-with-newline-0123456789abcdef\n",  # `echo key | ansible-vault encrypt_string`
        "sk-0123456789abcdef0123456789abcdef;$evil",  # would rewrite nginx's directive on the gateway
        "sk-short-and-guessable",
    ],
    ids=["newline", "nginx-syntax", "short"],
)
def test_server_refuses_a_bad_api_key_without_showing_it(runner: Runner, key: str) -> None:
    message = refusal(runner, "glm.fleet.sglang_server", {"sglang_server_api_key": key})
    assert "sglang_server_api_key must be 32 to 128 letters, digits, _ or -" in message, message
    assert key.strip() not in message


RETENTION = 'monitoring_retention must be a number and a unit (y, w, d, h, m or s), e.g. 30d; got: "30 days"'
DURATION = 'these must be a number and a unit (ms, s, m or h), e.g. 5m; got: {"monitoring_alert_queue_for": "5min"}'


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        ({"monitoring_retention": "30 days"}, RETENTION),
        ({"monitoring_alert_queue_for": "5min"}, DURATION),
        ({"monitoring_prometheus_address": "prometheus.example"}, "monitoring_prometheus_address must be an IPv4"),
        ({"monitoring_alert_kv_cache_usage": 90}, "monitoring_alert_kv_cache_usage must be a fraction between 0 and 1"),
        (
            {"monitoring_scrape_jobs": [{"name": "dcgm", "group": "gpu_node", "port": 9400}]},
            "monitoring_scrape_jobs[0] (dcgm).group: 'gpu_node' is not a group of the inventory",
        ),
        (
            {"monitoring_grafana_datasource_uid": "prometheus-typo"},
            'monitoring_grafana_datasource_uid="prometheus-typo", monitoring_grafana_folder_uid="glm-fleet": '
            "Grafana at http://172.30.253.1:3000: no datasource with uid 'prometheus-typo' in this Grafana "
            "(it has: glm-prometheus (prometheus), site-loki (loki))",
        ),
        (
            {"monitoring_grafana_datasource_uid": "site-loki"},
            "datasource 'site-loki' is of type 'loki', not prometheus",
        ),
        ({"monitoring_grafana_folder_uid": "ops"}, "no folder with uid 'ops'"),
    ],
    ids=[
        "retention",
        "duration",
        "address",
        "kv-threshold",
        "unknown-group",
        "grafana-datasource",
        "grafana-type",
        "grafana-folder",
    ],
)
def test_monitoring_refuses_bad_input(runner: Runner, extravars: dict[str, Any], expected: str) -> None:
    message = refusal(runner, "glm.fleet.monitoring", extravars, target="cache-1")
    assert expected in message, message


def test_image_retention_must_be_a_whole_number(runner: Runner) -> None:
    message = refusal(runner, "glm.fleet.sglang_image", {"sglang_image_keep_previous": -1})
    assert "gpu-2: sglang_image_keep_previous must be a whole number, 0 or more; got: -1" in message
