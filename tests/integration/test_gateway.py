"""The fleet's one endpoint on the lab: HTTPS at the gateway (cache-1), per-developer keys that a
run revokes without touching a GPU node, the serving routes only (the servers themselves are closed
to all but the gateway: test_server.py)."""

from __future__ import annotations

import datetime
import hashlib
import json
import ssl
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
import yaml
from conftest import (
    PRECOMPILE_TASK,
    REPO,
    ROLLING_PLAY,
    ROUTER_ADMIN_KEY_FILE,
    Runner,
    host_results,
    lab,
    lab_secrets,
    router_api,
    router_workers,
    run_log,
    site_stage,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PLAYBOOK = REPO / "playbooks" / "gateway.yml"
SECRETS = lab.INVENTORY.parent / ".secrets"
JIT_SHARE = lab.INVENTORY.parent / ".jit-cache"  # sglang_server_jit_share_dir's default for the lab
LAPTOP, GATEWAY = f"{lab.PREFIX}-laptop-1", f"{lab.PREFIX}-cache-1"
GATEWAY_FILES = (
    "/etc/nginx/sites-available/glm-fleet-gateway.conf",
    "/etc/glm-fleet/gateway/router.json",
    "/etc/glm-fleet/gateway/workers.json",
)
PACE_FILE = "/tmp/glm-standin-seconds-per-token"  # noqa: S108 - the stand-in's switch, inside its container
CONCURRENCY = 8
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


class StreamingLoad:
    """CONCURRENCY developers streaming /v1/messages through the gateway, one request after the
    other, until stopped: each request's start, end and what went wrong ("" when it answered)."""

    def __init__(self, max_tokens: int) -> None:
        self.client = anthropic.Anthropic(
            base_url=f"https://{lab.SITE_CACHE_ADDRESS}", auth_token=developer_key("laptop-1"), api_key=None,
            max_retries=0, http_client=anthropic.DefaultHttpxClient(
                verify=ssl.create_default_context(cafile=str(SECRETS / "ca" / "ca.pem"))),
        )  # fmt: skip
        self.max_tokens = max_tokens
        self.results: list[tuple[float, float, str]] = []
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.stream, args=(i,)) for i in range(CONCURRENCY)]

    def stream(self, i: int) -> None:
        while not self.done.is_set():
            start = time.monotonic()
            try:
                with self.client.messages.stream(
                    model="zai-org/GLM-5.3-Flash", max_tokens=self.max_tokens,
                    messages=[{"role": "user", "content": f"client {i} at {start}"}],
                ) as events:  # fmt: skip
                    error = "" if "Hello from GLM-5.3-Flash" in events.get_final_text() else "a wrong answer"
            except (anthropic.APIError, OSError) as e:
                error = f"{type(e).__name__}: {e}"
            self.results.append((start, time.monotonic(), error))

    def __enter__(self) -> StreamingLoad:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=60)


@pytest.fixture(scope="module")
def gateway(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    site_stage(tmp_path_factory.mktemp("gateway"), "server,gateway")
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
    # Claude Code's own path (a query string), and a path nginx normalises to a served route: the router
    # gets the route as matched, not the raw URI.
    assert call("/v1/messages?beta=true", key) == "200"
    assert call("/v1//messages", key) == "200"
    assert call("/v1/./chat/completions", key) == "200"


def test_the_routers_worker_api_opens_to_its_own_host_s_control_plane_key_only(gateway: dict[str, Any]) -> None:
    """N16: the key nginx adds to every request it forwards (the servers') no longer opens SMG's worker
    API; each gateway host's router has a control-plane key of its own, made and kept on that host."""
    server_key = (lab.STATE_DIR / "api_key").read_text().strip()
    keys = {}
    for host in ("cache-1", "gateway-2"):
        assert router_api(host, "/workers", key=server_key).endswith("\n401"), host
        assert router_api(host, "/workers").endswith("\n401"), host
        body, _newline, status = router_api(host, "/workers", ROUTER_ADMIN_KEY_FILE).rpartition("\n")
        assert status == "200", (host, status)
        assert len(json.loads(body)["workers"]) == 3, host  # gpu-1's server and gpu-2's two
        stat = in_node(f"{lab.PREFIX}-{host}", "stat", "-c", "%U %G %a", ROUTER_ADMIN_KEY_FILE)
        assert stat == "glm-gateway glm-gateway 600", (host, stat)
        keys[host] = in_node(f"{lab.PREFIX}-{host}", "cat", ROUTER_ADMIN_KEY_FILE)
        assert len(keys[host]) == 48, host
        # Not on the router's command line, nor in its journal.
        argv = in_node(f"{lab.PREFIX}-{host}", "ps", "-eo", "args")
        journal = in_node(f"{lab.PREFIX}-{host}", "journalctl", "--no-pager", "-u", "glm-gateway")
        assert keys[host] not in argv, host
        assert keys[host] not in journal, host
    assert keys["cache-1"] != keys["gateway-2"]  # one per host: neither router opens to the other's
    # The controller never held it: no file of the inventory's directory (the secrets included) has it.
    for path in lab.INVENTORY.parent.rglob("*"):
        if path.is_file() and path.stat().st_size < 1 << 20:
            text = path.read_text(errors="replace")
            assert not any(key in text for key in keys.values()), path
    assert {f"router control-plane key on {host}" for host in keys} <= set(lab_secrets())


def responses_by_developer() -> dict[str, float]:
    """The gateway's answers so far by developer (mtail's counter over nginx's log), all statuses."""
    text = in_node(GATEWAY, "curl", "-s", "http://127.0.0.1:13903/metrics")  # mtail on loopback, behind nginx
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("glm_gateway_responses_total{"):
            developer = line.split('developer="', 1)[1].split('"', 1)[0]
            counts[developer] = counts.get(developer, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def settled_responses() -> dict[str, float]:
    """responses_by_developer once two reads a second apart agree (at most 15 s)."""
    last, deadline = responses_by_developer(), time.monotonic() + 15
    while time.monotonic() < deadline:
        time.sleep(1)
        now = responses_by_developer()
        if now == last:
            return now
        last = now
    return last


def test_the_fleet_report_probes_with_a_key_of_its_own_not_a_developers(
    runner: Runner, gateway: dict[str, Any]
) -> None:
    """The report's streamed message goes through the front door with the fleet probe's key: nginx
    counts it under fleet-probe, not under a developer, and the probe's key is no developer's."""
    probe = (SECRETS / "probe.key").read_text().strip()
    assert (SECRETS / "probe.key").stat().st_mode & 0o777 == 0o600
    assert probe not in {developer_key("laptop-1")}
    assert not (SECRETS / "bundles" / "fleet-probe.yml").exists()
    before = settled_responses()  # mtail follows nginx's log a moment behind: earlier tests' answers first
    report = runner.playbook(REPO / "playbooks" / "fleet_report.yml")
    assert report.status == "successful", run_log(report)
    assert "front door OK (a streamed message, HTTP 200)" in run_log(report)
    assert probe not in run_log(report)
    after = settled_responses()
    assert after.get("fleet-probe", 0.0) - before.get("fleet-probe", 0.0) == 1.0, (before, after)
    assert after.get("laptop-1", 0.0) == before.get("laptop-1", 0.0), (before, after)


def test_the_gateway_does_not_tell_its_version(gateway: dict[str, Any]) -> None:
    script = f"curl -s -k -D - -o /dev/null https://{lab.SITE_CACHE_ADDRESS}/no-such-route"  # headers only
    headers = in_node(LAPTOP, "bash", "-c", script).lower()
    assert "server: nginx" in headers.splitlines(), headers  # the name alone, no version


def expiry_answer(key: str) -> str:
    """The status and body of a request with key, from the laptop (key on stdin)."""
    script = (
        'read -r key; cat > /tmp/ca.pem.$$ <<"EOF"\n' + (SECRETS / "ca" / "ca.pem").read_text() + "EOF\n"
        "curl -s -w '\\n%{http_code}' --max-time 20 --cacert /tmp/ca.pem.$$ -H \"Authorization: Bearer $key\" "
        f"-H 'content-type: application/json' -d '{BODY}' https://{lab.SITE_CACHE_ADDRESS}/v1/messages;"
        " rm -f /tmp/ca.pem.$$"
    )
    return in_node(LAPTOP, "bash", "-c", script, stdin=key + "\n")


def test_removing_a_developer_revokes_the_key_without_restarting_anything(
    runner: Runner, gateway: dict[str, Any]
) -> None:
    """alice's key, issued a day ago less 58 to 118 s with a lifetime of one day: it answers after the run,
    then 401 "expired" within a minute of its expiry with no run (the gateway's timer); renewed, it
    answers again with a new expiry in her bundle. Removed from the inventory, it answers 401; no
    server and not the router restarted for any of it."""
    gpu_nodes = [n["container"] for n in gateway["nodes"] if n["group"] == "gpu_nodes"]

    def started() -> dict[str, str]:
        servers = {
            node: in_node(node, "docker", "ps", "-q", "--no-trunc", "--filter", "name=pareto-glm53-flash")
            for node in gpu_nodes
        }
        router = in_node(GATEWAY, "systemctl", "show", "-P", "ActiveEnterTimestampMonotonic", "glm-gateway")
        return servers | {"router": router}

    moment = "%Y-%m-%dT%H:%M:%SZ"
    # Two seconds before a whole minute, at least 58 s away (longer than the run): the timer's run on
    # that minute finds the key expired.
    soonest = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=60)
    expiry = soonest.replace(second=0, microsecond=0) + datetime.timedelta(seconds=58)
    issued = SECRETS / "developer-keys" / "alice.issued"
    issued.write_text((expiry - datetime.timedelta(days=1)).strftime(moment) + "\n")
    one_day = {"gateway_developers": ["laptop-1", "alice"], "gateway_developer_key_lifetime_days": 1}
    added = runner.playbook(PLAYBOOK, extravars=one_day)
    assert added.status == "successful", run_log(added)
    alice = developer_key("alice")
    assert len(alice) == 48
    assert (SECRETS / "developer-keys" / "alice.key").stat().st_mode & 0o777 == 0o600
    assert [(SECRETS / d).stat().st_mode & 0o777 for d in ("", "developer-keys", "bundles", "ca")] == [0o700] * 4
    assert (SECRETS / "bundles" / "alice.yml").stat().st_mode & 0o777 == 0o600
    bundle = yaml.safe_load((SECRETS / "bundles" / "alice.yml").read_text())["claude_code_bundle"]
    assert (bundle["developer"], bundle["auth_token"], bundle["expires"]) == ("alice", alice, expiry.strftime(moment))
    assert datetime.datetime.now(datetime.UTC) < expiry, "the run outlasted the key: nothing tested"
    assert call("/v1/messages", alice) == "200"
    before = started()

    # No run from here: the gateway's timer takes the key out within a minute of its expiry.
    while (answer := expiry_answer(alice)).endswith("\n200"):
        assert datetime.datetime.now(datetime.UTC) < expiry + datetime.timedelta(seconds=75), answer
        time.sleep(2)
    refused_at = datetime.datetime.now(datetime.UTC)
    assert expiry <= refused_at, f"refused before its expiry: {answer}"
    body, _newline, status = answer.rpartition("\n")
    assert status == "401", answer
    message = f"this key expired at {expiry.strftime(moment)}; ask your operator to renew it"
    assert json.loads(body)["error"] == {"type": "authentication_error", "message": message}
    assert call("/v1/messages", developer_key("laptop-1")) == "200"  # the others keep theirs

    renewed = runner.playbook(PLAYBOOK, extravars=one_day | {"gateway_renew_developers": ["alice"]})
    assert renewed.status == "successful", run_log(renewed)
    assert developer_key("alice") == alice  # the same key, a new lifetime
    bundle = yaml.safe_load((SECRETS / "bundles" / "alice.yml").read_text())["claude_code_bundle"]
    new_expiry = datetime.datetime.strptime(bundle["expires"], moment).replace(tzinfo=datetime.UTC)
    assert new_expiry - refused_at > datetime.timedelta(hours=23)
    assert call("/v1/messages", alice) == "200"

    removed = runner.playbook(PLAYBOOK)  # alice is no longer in the inventory
    assert removed.status == "successful", run_log(removed)
    assert call("/v1/messages", alice) == "401"
    assert not (SECRETS / "developer-keys" / "alice.key").exists()
    assert not (SECRETS / "developer-keys" / "alice.issued").exists()
    assert not (SECRETS / "bundles" / "alice.yml").exists()
    assert (SECRETS / "bundles" / "laptop-1.yml").exists()
    assert call("/v1/messages", developer_key("laptop-1")) == "200"  # the others keep theirs
    assert started() == before, "a GPU node's server or the router restarted for a key change"


def anthropic_client(key: str, max_retries: int = 0) -> anthropic.Anthropic:
    trust = ssl.create_default_context(cafile=str(SECRETS / "ca" / "ca.pem"))
    return anthropic.Anthropic(
        base_url=f"https://{lab.SITE_CACHE_ADDRESS}", auth_token=key, api_key=None, max_retries=max_retries,
        http_client=anthropic.DefaultHttpxClient(verify=trust),
    )  # fmt: skip


def test_a_developer_over_their_limit_gets_429_to_retry_and_the_others_are_not_slowed(
    runner: Runner, gateway: dict[str, Any], slow_generation: list[tuple[str, str]]
) -> None:
    """alice may have 2 requests at once, bob 2 a minute (1 more in a burst); laptop-1 has the lab's
    share. Over a limit: 429, Retry-After, an Anthropic rate_limit_error the SDK retries on its own,
    and no other developer held back."""
    lab_limits = yaml.safe_load((lab.INVENTORY.parent / "group_vars" / "gateway.yml").read_text())[
        "gateway_developer_limits"
    ]
    limits = lab_limits | {"alice": {"concurrency": 2}, "bob": {"requests_per_minute": 2, "burst": 1}}
    added = runner.playbook(PLAYBOOK, extravars={"gateway_developers": ["laptop-1", "alice", "bob"],
                                                 "gateway_developer_limits": limits})  # fmt: skip
    assert added.status == "successful", run_log(added)
    logged = int(in_node(GATEWAY, "sh", "-c", "wc -l < /var/log/nginx/glm-fleet-gateway.log"))
    alice, bob, laptop = (anthropic_client(developer_key(name)) for name in ("alice", "bob", "laptop-1"))
    ask = {"model": "zai-org/GLM-5.3-Flash", "max_tokens": 24, "messages": [{"role": "user", "content": "hi"}]}
    try:
        # alice: two streams at once, a third is refused while they run; laptop-1 goes on meanwhile.
        with alice.messages.stream(**ask) as first, alice.messages.stream(**ask) as second:
            with pytest.raises(anthropic.RateLimitError) as refused:
                alice.messages.create(**ask)
            assert refused.value.response.headers["retry-after"] == "1"  # 300 a minute: a request's share
            assert refused.value.body["type"] == "error"
            assert refused.value.body["error"]["type"] == "rate_limit_error"
            assert all(laptop.messages.create(**ask).content for _turn in range(3))
            assert "Hello from GLM-5.3-Flash" in first.get_final_text() + second.get_final_text()
        # The SDK (as Claude Code) retries a 429 on its own after Retry-After, and gets through once a
        # slot is free.
        with alice.messages.stream(**ask) as first, alice.messages.stream(**ask) as second:
            assert anthropic_client(developer_key("alice"), max_retries=8).messages.create(**ask).content
            first.get_final_text(), second.get_final_text()
        # bob: one request, one more in the burst, then 429 for half a minute (2 a minute).
        assert bob.messages.create(**ask).content
        assert bob.messages.create(**ask).content
        with pytest.raises(anthropic.RateLimitError) as refused:
            bob.messages.create(**ask)
        assert refused.value.response.headers["retry-after"] == "30"
        assert laptop.messages.create(**ask).content
    finally:
        removed = runner.playbook(PLAYBOOK)
        assert removed.status == "successful", run_log(removed)
    # The gateway's log names who was throttled (the 429 rate that GLMGatewayThrottling reads).
    log = in_node(GATEWAY, "tail", "-n", f"+{logged + 1}", "/var/log/nginx/glm-fleet-gateway.log")
    throttled = [line for line in log.splitlines() if '" 429 ' in line]
    assert {line.split("developer=")[1].split()[0] for line in throttled} == {"alice", "bob"}, throttled


def self_signed(key: ec.EllipticCurvePrivateKey) -> str:
    """A certificate for `key` (its own CA), as a site would give one."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cache-1")])
    start = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=30)).sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    encoding, private = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    return key.private_bytes(encoding, private, serialization.NoEncryption()).decode()


SITE_KEY, OTHER_KEY = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())


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
            {
                "gateway_tls_cert": self_signed(SITE_KEY),
                "gateway_tls_key": key_pem(OTHER_KEY),
                "gateway_tls_ca_cert": self_signed(SITE_KEY),
            },
            "gateway_tls_cert and gateway_tls_key: the certificate does not match the key",
        ),
        (
            {"gateway_policy": "fastest"},
            'gateway_policy must be one of cache_aware, round_robin, random, power_of_two; got: "fastest"',
        ),
        (
            {"gateway_workers": ["http://gpu-1:18080/v1\nX"]},
            "gateway_workers must be https://address:port URLs (servers behind their TLS front), or all"
            ' http://address:port; got: ["http',
        ),
        (
            {"gateway_developer_limits": {"laptop-1": {"concurrency": 0}}},
            'gateway_developer_limits["laptop-1"].concurrency must be a whole number from 1 to 999999; got: 0',
        ),
        (
            {"gateway_developers": ["a"], "gateway_developer_keys": {"a": "k" * 40 + "\n"}},
            'must be 32-128 characters of letters, digits, _ and - (values not shown); wrong for: ["a"]',
        ),
        (
            {"deployment_developer_lyceum_keys": {"laptop-1": "lk_" + "k" * 40, "mallory": "lk_" + "m" * 40}},
            'deployment_developer_lyceum_keys names developers not in gateway_developers: ["mallory"]',
        ),
        (
            {"gateway_max_request_mib": 0},
            "gateway_max_request_mib must be a whole number of MiB from 1 to 1024; got: 0",
        ),
        (
            {"gateway_developer_budgets": {"laptop-1": {"monthly": 50}}},
            'gateway_developer_budgets["laptop-1"] has no unit (and gateway_developer_budget gives none): a budget'
            ' is an amount and its unit; got: {"monthly": 50}',
        ),
        (
            {"gateway_developer_budget": {"monthly": -1, "unit": "usd"}},
            "gateway_developer_budget.monthly must be a number above 0 (at most 4 decimals); got: -1",
        ),
        ({"gateway_vrrp_router_id": 300}, "gateway_vrrp_router_id must be a whole number from 1 to 255; got: 300"),
        (
            {"deployment_gateway_address": "172.30.253.51"},
            'deployment_gateway_address must be an address no host has; it is the ansible_host of ["gateway-2"]',
        ),
    ],
    ids=[
        "no-workers",
        "duplicate-developer",
        "shared-key",
        "unknown-developer",
        "cert-without-key",
        "mismatched-pair",
        "policy",
        "worker-newline",
        "zero-limit",
        "key-newline",
        "lyceum-unknown-developer",
        "zero-body-size",
        "budget-without-unit",
        "negative-budget",
        "vrrp-router-id",
        "floating-address-of-a-host",
    ],
)
def test_bad_input_is_refused_before_any_change(
    runner: Runner, gateway: dict[str, Any], extravars: dict[str, Any], expected: str
) -> None:
    site = in_node(GATEWAY, "sha256sum", *GATEWAY_FILES)
    run = runner.playbook(PLAYBOOK, extravars=extravars)
    assert run.status == "failed", run_log(run)
    assert not any(run.stats["changed"].values()), run.stats
    failed = [e["event_data"] for e in run.events if e.get("event") == "runner_on_failed"]
    # each gateway host (cache-1 and gateway-2) refused, once
    assert sorted(f["host"] for f in failed) == ["cache-1", "gateway-2"], run_log(run)
    for failure in (f["res"].get("msg", "") for f in failed):
        assert expected in failure, failure
        assert "k" * 40 not in failure
        assert "m" * 40 not in failure
        assert "BEGIN" not in failure  # no certificate or key quoted
    assert in_node(GATEWAY, "sha256sum", *GATEWAY_FILES) == site


def server_containers(nodes: list[str]) -> list[tuple[str, str]]:
    return [
        (node, name)
        for node in nodes
        for name in in_node(node, "docker", "ps", "--format", "{{.Names}}").split()
        if name.startswith("pareto-glm53-flash")
    ]


@pytest.fixture
def slow_generation(gateway: dict[str, Any]) -> Iterator[list[tuple[str, str]]]:
    """Every server streams at 0.1 s per token (a stream lasts about 2.5 s), so requests are in flight."""
    nodes = [n["container"] for n in gateway["nodes"] if n["group"] == "gpu_nodes"]
    servers = server_containers(nodes)
    for node, name in servers:
        in_node(node, "docker", "exec", name, "sh", "-c", f"echo 0.1 > {PACE_FILE}")
    yield servers
    for node, name in server_containers(nodes):
        in_node(node, "docker", "exec", name, "rm", "-f", PACE_FILE)


def test_a_stopped_server_fails_only_its_requests_in_flight_and_rejoins_when_back(
    gateway: dict[str, Any], slow_generation: list[tuple[str, str]]
) -> None:
    victim = next(n for n in gateway["nodes"] if n["name"] == "gpu-1")
    victim_url = f"https://{victim['address']}:18080"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 1))
    try:
        with StreamingLoad(max_tokens=64) as load:
            time.sleep(4)
            stopped_at = time.monotonic()
            in_node(victim["container"], "systemctl", "stop", "pareto-glm53-flash.service")
            time.sleep(10)
    finally:
        in_node(victim["container"], "systemctl", "start", "pareto-glm53-flash.service")
    results = [(start, end, not error) for start, end, error in load.results]
    journal = in_node(victim["container"], "journalctl", "-u", "pareto-glm53-flash", "-o", "cat", f"--since={since}")
    served = sum(1 for line in journal.splitlines() if '"path": "/v1/messages"' in line and '"max_tokens": 64' in line)
    assert served > 0, "the stopped server had no share of the load: nothing failed over"
    before = [r for r in results if r[0] < stopped_at]
    in_flight_failed = [r for r in before if not r[2] and r[1] >= stopped_at]
    after = [r for r in results if r[0] >= stopped_at]
    print(  # the figures, for the closing report
        f"failover: {len(results)} streamed requests over {CONCURRENCY} clients, {served} of them on gpu-1 "
        f"before it stopped; stopped gpu-1's server with "
        f"{sum(1 for r in before if r[1] >= stopped_at)} in flight, {len(in_flight_failed)} of them failed; "
        f"{len(after)} started after the stop, {sum(1 for r in after if not r[2])} failed"
    )
    assert all(ok for _start, _end, ok in after), "a request started after the stop failed"
    assert len(after) >= CONCURRENCY
    assert all(ok for _start, end, ok in before if end < stopped_at)
    assert len(in_flight_failed) <= CONCURRENCY
    # Out of rotation while down; back on its own once healthy (no run of the playbook).
    deadline = time.monotonic() + 90
    while not router_workers().get(victim_url):
        assert time.monotonic() < deadline, f"{victim_url} did not rejoin: {router_workers()}"
        time.sleep(1)
    assert all(router_workers().values())


def test_a_new_image_rolls_through_the_gateway_without_failing_a_request(
    runner: Runner, gateway: dict[str, Any], slow_generation: list[tuple[str, str]]
) -> None:
    """A rollout of a new image digest (site.yml's artifacts and server stages, at -vvv, with
    sglang_server_precompile) while developers stream through the gateway: each server leaves the
    router's rotation, finishes what it is generating, restarts, passes its gate and comes back; not
    one request fails. The canary's kernels are compiled before its restart, every other node loads
    the canary's copy."""
    image = json.loads((lab.STATE_DIR / "services.json").read_text())["sglang_image_next"]
    nodes = [n["container"] for n in gateway["nodes"] if n["group"] == "gpu_nodes"]
    servers = server_containers(nodes)
    before = {(node, name): in_node(node, "docker", "inspect", "-f", "{{.Id}}", name) for node, name in servers}
    paced = {"GLM_STANDIN_LOAD_SECONDS": "3", "GLM_STANDIN_JIT_SECONDS": "4", "GLM_STANDIN_SECONDS_PER_TOKEN": "0.1"}
    # The stand-in's compile_deep_gemm polls and lingers 1 s instead of the real script's 10 s.
    paced |= {"GLM_STANDIN_COMPILE_POLL_SECONDS": "1", "GLM_STANDIN_COMPILE_SAFETY_SECONDS": "1"}
    # No node and not the controller holds kernels of the new image yet.
    digest = image.split("@sha256:")[1][:16]
    for node in nodes:
        in_node(node, "rm", "-rf", f"/var/lib/glm-fleet/sglang-cache/{digest}")
    for stale in JIT_SHARE.glob(f"{digest}-*"):
        stale.unlink()
    since = f"@{int(time.time())}"
    with StreamingLoad(max_tokens=24) as load:
        time.sleep(6)  # the baseline: the old image, every server in rotation
        rollout_start = time.monotonic()
        run = runner.playbook(
            REPO / "site.yml", tags="artifacts,server", verbosity=3,
            extravars={"deployment_image": image, "sglang_server_env": paced, "sglang_server_precompile": True},
        )  # fmt: skip
        rollout_end = time.monotonic()
        time.sleep(3)
    results = load.results
    try:
        assert run.status == "successful", run_log(run)
        failed = [error for _start, _end, error in results if error]
        baseline = sorted(end - start for start, end, _e in results if end < rollout_start)
        during = [end - start for start, end, _e in results if start < rollout_end and end > rollout_start]
        median = baseline[len(baseline) // 2]
        print(  # the figures, for the closing report
            f"rollout of a new image over {len(servers)} servers on {len(nodes)} nodes "
            f"in {rollout_end - rollout_start:.0f} s: "
            f"{len(results)} streamed requests from {CONCURRENCY} clients, {len(during)} during the rollout, "
            f"{len(failed)} failed; request time median {median:.2f} s before, worst {max(during):.2f} s during "
            f"(+{max(during) - median:.2f} s)"
        )
        assert not failed, f"{len(failed)} of {len(results)} requests failed during the rollout: {failed[:3]}"
        assert len(during) >= 2 * CONCURRENCY
        # Every server runs the new image, each restarted once, one node per batch (canary first).
        for node, name in servers:
            assert in_node(node, "docker", "inspect", "-f", "{{.Config.Image}}", name) == image, name
            assert in_node(node, "docker", "inspect", "-f", "{{.Id}}", name) != before[(node, name)], name
        plays = [e["event_data"]["play"] for e in run.events if e.get("event") == "playbook_on_play_start"]
        assert plays.count(ROLLING_PLAY) == len(nodes)
        # Each server was drained out of the router before its restart and is back in rotation.
        drained = [
            e["event_data"] for e in run.events if e.get("event") == "runner_on_ok"
            and e["event_data"].get("task", "").startswith("Take out of the gateways' rotation")
        ]  # fmt: skip
        assert len(drained) == len(servers), [d.get("task") for d in drained]
        assert all(gw["changed"] and gw["router_running"] for d in drained for gw in d["res"]["results"])
        assert all(router_workers().values())
        assert len(router_workers()) == len(servers)
        # The servers' key, through restarts at -vvv (the output is scanned for it by conftest):
        # not in argv, the unit, the journal or docker's view on a node; its file root-only.
        key = (lab.STATE_DIR / "api_key").read_text().strip()
        node, name = servers[0]
        for where in (["ps", "-eo", "args"], ["cat", f"/etc/systemd/system/{name}.service"],
                      ["journalctl", "--no-pager", "-u", name], ["docker", "inspect", name]):  # fmt: skip
            assert key not in in_node(node, *where), where
        assert in_node(node, "stat", "-c", "%a %U", f"/etc/glm-fleet/sglang/{name}.yaml") == "600 root"
        compiled_once_before_the_canarys_restart(run, gateway, servers, digest, since)
    finally:
        restore = runner.playbook(REPO / "site.yml", tags="artifacts,server")
        assert restore.status == "successful", run_log(restore)


def test_servers_join_and_leave_the_running_router_without_cutting_a_stream(
    runner: Runner, gateway: dict[str, Any], slow_generation: list[tuple[str, str]]
) -> None:
    """A change to gateway_workers (a server leaves, then comes back) reaches the running router
    through its worker API while developers stream: the router is not restarted, the leaving
    server is drained, not one request fails."""
    workers = sorted(router_workers())
    assert len(workers) == 3
    router_pid = in_node(GATEWAY, "systemctl", "show", "--property", "MainPID", "--value", "glm-gateway.service")
    with StreamingLoad(max_tokens=24) as load:
        time.sleep(3)
        smaller = runner.playbook(PLAYBOOK, extravars={"gateway_workers": workers[:-1]})
        during = sorted(router_workers())
        back = runner.playbook(PLAYBOOK)
        time.sleep(3)
    assert smaller.status == "successful", run_log(smaller)
    assert back.status == "successful", run_log(back)
    assert during == workers[:-1]
    assert router_workers() == dict.fromkeys(workers, True)
    assert (
        in_node(GATEWAY, "systemctl", "show", "--property", "MainPID", "--value", "glm-gateway.service") == router_pid
    )
    assert host_results(smaller, "Drain the servers that left gateway_workers out of the router")["cache-1"]["changed"]
    assert host_results(back, "Add the servers new to gateway_workers to the router")["cache-1"]["changed"]
    failed = [error for _start, _end, error in load.results if error]
    print(
        f"servers out of and back into the running router: {len(load.results)} streamed requests, {len(failed)} failed"
    )
    assert not failed, f"{len(failed)} of {len(load.results)} requests failed: {failed[:3]}"
    assert len(load.results) >= 2 * CONCURRENCY


def compiled_once_before_the_canarys_restart(
    run: Any, gateway: dict[str, Any], servers: list[tuple[str, str]], digest: str, since: str
) -> None:
    """Compiled once for the fleet, before the canary's restart: sglang.compile_deep_gemm with the
    canary's arguments compiled the new image's kernels (the stand-in's JIT is 4 s, as DeepGEMM's is
    10-20 minutes), the canary's server loaded them, the controller kept a copy, and every other
    server loaded that copy."""
    compiles = [
        e["event_data"] for e in run.events if e.get("event") == "runner_on_ok"
        and e["event_data"].get("task", "").startswith(PRECOMPILE_TASK)
    ]  # fmt: skip
    canary_node = servers[0][0]
    canary_host = next(n["name"] for n in gateway["nodes"] if n["container"] == canary_node)
    assert [c["host"] for c in compiles] == [canary_host], compiles
    assert compiles[0]["res"]["rc"] == 0
    assert "DeepGEMM: compiled glm-standin-kernels-" in compiles[0]["res"]["stdout"]
    assert "DeepGEMM Kernels compilation finished successfully." in compiles[0]["res"]["stdout"]
    archive = JIT_SHARE / f"{digest}-NVIDIA-B200-cc10.0.tar.gz"
    assert sorted(path.name for path in JIT_SHARE.glob(f"{digest}-*")) == [archive.name, f"{archive.name}.sha256"]
    # Published with its SHA-256 (glm.fleet.jit_archive), which each seeded node's run checked.
    assert (archive.parent / f"{archive.name}.sha256").read_text() == (
        f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  {archive.name}\n"
    )
    checked = {e["event_data"]["host"] for e in run.events if e.get("event") == "runner_on_ok"
               and e["event_data"].get("task") == "Check the fleet's copy against what was published"}  # fmt: skip
    others = {n["name"] for n in gateway["nodes"] if n["group"] == "gpu_nodes"} - {canary_host}
    assert checked == others, (checked, others)
    # What the compile wrote, and nothing the canary's server wrote while it served: its Triton kernel
    # from the health gate's first chat request is in its own cache, not in the fleet's copy.
    with tarfile.open(archive) as copy:
        members = copy.getnames()
    assert [m for m in members if m.endswith(".cubin")], members
    assert not [m for m in members if "glm-standin-lazy-" in m], members
    served = in_node(
        canary_node, "sh", "-c", f"ls -d /var/lib/glm-fleet/sglang-cache/{digest}/triton/glm-standin-lazy-*"
    )
    assert served, "the canary's server compiled nothing while it served: the check above proves nothing"
    starts = {server: server_start(*server, since) for server in servers}
    assert all(start["jit"] == "cache" for start in starts.values()), starts
    seeded = [start["ready_s"] for server, start in starts.items() if server[0] != canary_node]
    print(
        f"time to ready in the rollout: the canary's compile {compiles[0].get('duration', float('nan')):.1f} s"
        f" before its restart, its server {starts[servers[0]]['ready_s']:.1f} s (kernels precompiled), "
        f"other nodes' servers {min(seeded):.1f}-{max(seeded):.1f} s (kernels from the canary's copy)"
    )


def server_start(node: str, name: str, since: str) -> dict[str, Any]:
    """A server's last start since `since` from its journal: whether its kernels were compiled or came
    from the JIT cache, and the seconds from the stand-in's "loading" line to its "ready" line."""
    journal = in_node(node, "journalctl", "--no-pager", "--output", "short-unix", "--since", since, "-u", name)
    lines = journal.splitlines()
    loading = max(i for i, line in enumerate(lines) if "lab stand-in] sglang" in line and ": loading " in line)
    after = lines[loading:]
    ready = next(line for line in after if "fired up and ready" in line)
    jit = next(("compiled" if " compiled " in line else "cache") for line in after if "DeepGEMM: " in line)
    return {"jit": jit, "ready_s": float(ready.split()[0]) - float(lines[loading].split()[0])}


def test_no_key_in_the_gateways_process_list_logs_or_world_readable_files(gateway: dict[str, Any]) -> None:
    keys = {"servers' key": (lab.STATE_DIR / "api_key").read_text().strip(), "developer key": developer_key("laptop-1")}
    places = {
        "processes": in_node(GATEWAY, "ps", "-eo", "args"),
        "journal": in_node(GATEWAY, "journalctl", "--no-pager", "-u", "glm-gateway", "-u", "nginx"),
        "nginx logs": in_node(GATEWAY, "sh", "-c", "cat /var/log/nginx/*.log"),
        # every file of the gateway's that others may read
        "readable files": in_node(
            GATEWAY, "sh", "-c", "find /etc/glm-fleet /etc/nginx /etc/systemd/system -type f -perm -o=r -exec cat {} +"
        ),
    }  # fmt: skip
    assert "smg::router" in places["processes"]  # the router runs, under its own title
    for where, text in places.items():
        for name, key in keys.items():
            assert key not in text, f"the {name} is in the gateway's {where}"
    holders = "/etc/glm-fleet/gateway/router.json /etc/glm-fleet/gateway/keys.json"
    modes = in_node(GATEWAY, "sh", "-c", f"stat -c '%a %U' {holders} /etc/glm-fleet/gateway/nginx/upstream-auth.conf")
    assert modes.split("\n") == ["600 glm-gateway", "600 root", "600 root"]
    # Not even a root-only file holds a developer's key: the gateway keeps its SHA-256.
    found = in_node(
        GATEWAY, "grep", "-rlF", "--", developer_key("laptop-1"), "/etc/glm-fleet", "/etc/nginx", "/usr/local"
    )
    assert found == "", found
