"""The fleet's one endpoint on the lab: HTTPS at the gateway (cache-1), per-developer keys that a
run revokes without touching a GPU node, the serving routes only (the servers themselves are closed
to all but the gateway: test_server.py)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from conftest import REPO, Runner, lab, run_log

PLAYBOOK = REPO / "playbooks" / "gateway.yml"
SECRETS = lab.INVENTORY.parent / ".secrets"
LAPTOP, GATEWAY = f"{lab.PREFIX}-laptop-1", f"{lab.PREFIX}-cache-1"
BODY = json.dumps({"model": "zai-org/GLM-5.3-Flash", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})


def in_node(container: str, *cmd: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["docker", "exec", "-i", container, *cmd], input=stdin, capture_output=True, text=True, check=False
    ).stdout.strip()


def call(path: str, key: str, method: str = "POST", header: str = "Authorization: Bearer {}") -> str:
    """The HTTP status of one request from the laptop to the gateway, over HTTPS against the site CA
    (the key goes in on stdin, so it is in no process list)."""
    script = (
        'read -r key; cat > /tmp/ca.pem.$$ <<"EOF"\n' + (SECRETS / "ca" / "ca.pem").read_text() + "EOF\n"
        f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 20 --cacert /tmp/ca.pem.$$ -X {method} "
        f"-H \"{header.format('$key')}\" -H 'content-type: application/json' -d '{BODY}' "
        f"https://{lab.SITE_CACHE_ADDRESS}{path}; rm -f /tmp/ca.pem.$$"
    )
    return in_node(LAPTOP, "bash", "-c", script, stdin=key + "\n")


def developer_key(name: str) -> str:
    return (SECRETS / "developer-keys" / f"{name}.key").read_text().strip()


@pytest.fixture(scope="module")
def gateway(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = Runner(tmp_path_factory.mktemp("gateway")).playbook(REPO / "site.yml", tags="server,gateway")
    assert run.status == "successful", run_log(run)
    return lab_state


def test_a_developer_key_opens_the_serving_routes_and_nothing_else(gateway: dict[str, Any]) -> None:
    key = developer_key("laptop-1")
    assert call("/v1/messages", key) == "200"
    assert call("/v1/messages", key, header="x-api-key: {}") == "200"  # as the Anthropic SDK sends it
    assert call("/v1/chat/completions", key) == "200"
    assert call("/v1/messages", "a-random-key-of-no-developer-0123456789") == "401"
    assert call("/v1/messages", "") == "401"
    # The servers' key is no developer's key, and SGLang's and SMG's admin routes are not served.
    server_key = (lab.STATE_DIR / "api_key").read_text().strip()
    assert call("/v1/messages", server_key) == "401"
    for admin in ("/flush_cache", "/update_weights_from_disk", "/get_server_info", "/workers", "/start_profile"):
        assert call(admin, key) == "404", admin


def test_removing_a_developer_revokes_the_key_without_restarting_anything(
    runner: Runner, gateway: dict[str, Any]
) -> None:
    gpu_nodes = [n["container"] for n in gateway["nodes"] if n["group"] == "gpu_nodes"]

    def started() -> dict[str, str]:
        servers = {
            node: in_node(node, "docker", "ps", "-q", "--no-trunc", "--filter", "name=pareto-glm53-flash")
            for node in gpu_nodes
        }
        router = in_node(GATEWAY, "systemctl", "show", "-P", "ActiveEnterTimestampMonotonic", "glm-gateway")
        return servers | {"router": router}

    added = runner.playbook(PLAYBOOK, extravars={"gateway_developers": ["laptop-1", "alice"]})
    assert added.status == "successful", run_log(added)
    alice = developer_key("alice")
    assert len(alice) == 48
    assert (SECRETS / "developer-keys" / "alice.key").stat().st_mode & 0o777 == 0o600
    assert call("/v1/messages", alice) == "200"
    before = started()

    removed = runner.playbook(PLAYBOOK)  # alice is no longer in the inventory
    assert removed.status == "successful", run_log(removed)
    assert call("/v1/messages", alice) == "401"
    assert not (SECRETS / "developer-keys" / "alice.key").exists()
    assert call("/v1/messages", developer_key("laptop-1")) == "200"  # the others keep theirs
    assert started() == before, "a GPU node's server or the router restarted for a key change"


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        ({"gateway_workers": []}, "gateway_workers is empty: no SGLang server to route to"),
        (
            {"gateway_developers": ["alice", "alice"]},
            'gateway_developers must be names of letters, digits, ., _ and - (no duplicates); got: ["alice", "alice"]',
        ),
        (
            {"gateway_developers": ["a", "b"], "gateway_developer_keys": {"a": "k" * 40, "b": "k" * 40}},
            "gateway_developer_keys gives two developers the same key (values not shown)",
        ),
        (
            {"gateway_developer_keys": {"mallory": "m" * 40}},
            'gateway_developer_keys names developers not in gateway_developers: ["mallory"]',
        ),
        ({"gateway_tls_cert": "-----BEGIN CERTIFICATE-----"}, "gateway_tls_cert and gateway_tls_key go together"),
        (
            {"gateway_policy": "fastest"},
            'gateway_policy must be one of cache_aware, round_robin, random, power_of_two; got: "fastest"',
        ),
    ],
    ids=["no-workers", "duplicate-developer", "shared-key", "unknown-developer", "cert-without-key", "policy"],
)
def test_bad_input_is_refused_before_any_change(
    runner: Runner, gateway: dict[str, Any], extravars: dict[str, Any], expected: str
) -> None:
    site = in_node(
        GATEWAY, "sha256sum", "/etc/nginx/sites-available/glm-fleet-gateway.conf", "/etc/glm-fleet/gateway/router.json"
    )
    run = runner.playbook(PLAYBOOK, extravars=extravars)
    assert run.status == "failed", run_log(run)
    assert run.stats["changed"].get("cache-1", 0) == 0, run.stats
    failures = [e["event_data"]["res"].get("msg", "") for e in run.events if e.get("event") == "runner_on_failed"]
    assert len(failures) == 1, run_log(run)
    assert expected in failures[0], failures[0]
    assert (
        in_node(
            GATEWAY,
            "sha256sum",
            "/etc/nginx/sites-available/glm-fleet-gateway.conf",
            "/etc/glm-fleet/gateway/router.json",
        )
        == site
    )
