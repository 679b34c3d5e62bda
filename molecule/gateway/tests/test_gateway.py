"""What a person checks by hand on the fleet's gateway: the units, HTTPS with the site CA, each
developer's key opening the serving routes only, the servers' key never leaving the gateway, and
the answers counted by status and developer (mtail)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
SECRETS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory" / ".secrets"
SERVED = "zai-org/GLM-5.3-Flash"
WORKER_LOG = REPO / ".lab" / "worker.log"


def developer_key(name: str) -> str:
    return (SECRETS / "developer-keys" / f"{name}.key").read_text().strip()


def curl(
    host,  # noqa: ANN001 - testinfra host
    path: str,
    key: str | None = None,
    body: dict | None = None,
    header: str = "Authorization",
) -> tuple[str, str]:
    """Status and body of an HTTPS request to the gateway, verified against the site CA."""
    parts = ["curl -s --cacert /etc/glm-fleet/gateway/tls/ca.pem -w '\\n%{http_code}'"]
    if key is not None:
        value = f"Bearer {key}" if header == "Authorization" else key
        parts.append(f"-H '{header}: {value}'")
    if body is not None:
        parts.append(f"-H 'content-type: application/json' -d '{json.dumps(body)}'")
    name = host.backend.host  # the node's inventory name, which the certificate is issued for
    parts.append(f"https://{name}{path}")
    out = host.run(" ".join(parts) + f" --resolve {name}:443:127.0.0.1").stdout
    text, _newline, status = out.rpartition("\n")
    return status, text


def test_each_bundle_holds_its_developers_own_keys_only() -> None:
    """alice's bundle: her gateway key and her Lyceum key; bob's: his gateway key, no Lyceum key
    (he has none) and nothing of alice's. Both 0600."""
    bundles = {}
    for name in ("alice", "bob"):
        path = SECRETS / "bundles" / f"{name}.yml"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        bundles[name] = path.read_text()
    alice = yaml.safe_load(bundles["alice"])["claude_code_bundle"]
    bob = yaml.safe_load(bundles["bob"])["claude_code_bundle"]
    assert (alice["auth_token"], alice["lyceum_auth_token"]) == (
        developer_key("alice"),
        "lk_molecule_alice_own_lyceum_key",
    )
    assert bob["auth_token"] == developer_key("bob")
    assert "lyceum_auth_token" not in bob
    assert developer_key("alice") not in bundles["bob"]
    assert "lk_molecule" not in bundles["bob"]


def worker_requests() -> list[dict]:
    """The SGLang stand-in's request lines (one JSON object each, the bearer token as its sha256)."""
    lines = WORKER_LOG.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{") and '"path"' in line]


def test_the_keys_timer_runs_every_minute(host) -> None:  # noqa: ANN001
    timer = host.service("glm-fleet-gateway-keys.timer")
    assert timer.is_running
    assert timer.is_enabled
    shown = host.check_output("systemctl show glm-fleet-gateway-keys.timer -p TimersCalendar")
    assert "OnCalendar=*-*-* *:*:00 UTC" in shown


def test_router_and_nginx_run_and_start_at_boot(host) -> None:  # noqa: ANN001
    for unit in ("glm-gateway", "nginx"):
        service = host.service(unit)
        assert service.is_running, host.run(f"journalctl -u {unit} --no-pager -n 40").stdout
        assert service.is_enabled
    router = [p.args for p in host.process.filter(user="glm-gateway")]
    assert router == ["smg::router"], router  # SMG names its process; it runs as the role's user only


def test_router_listens_on_loopback_and_nginx_on_https(host) -> None:  # noqa: ANN001
    assert host.socket("tcp://127.0.0.1:30000").is_listening
    assert not host.socket("tcp://0.0.0.0:30000").is_listening
    assert host.socket("tcp://0.0.0.0:443").is_listening
    metrics = host.check_output("curl -s http://127.0.0.1:39000/metrics")  # the router's own, on loopback
    assert "smg_" in metrics, metrics[:500]
    assert not host.socket("tcp://0.0.0.0:39000").is_listening


def test_the_gateways_metrics_answer_only_a_client_certificate_of_the_site_ca(host) -> None:  # noqa: ANN001
    """gateway_metrics_tls: nginx answers on the router's metrics port (29000) and mtail's (3903) over
    HTTPS only, with a certificate of the site CA for the host's name, and 400 to a client without a
    certificate; plain HTTP gets no metrics (the monitoring scenario and the lab's Prometheus scrape
    them with a client certificate of the site CA)."""
    ca = (SECRETS / "ca" / "ca.pem").read_text()
    host.run(f"printf %s {shlex.quote(ca)} > /root/glm-site-ca.pem")
    name = host.backend.get_hostname()
    for port, metric in ((29000, "smg_"), (3903, "glm_gateway_responses_total")):
        assert host.socket(f"tcp://0.0.0.0:{port}").is_listening
        plain = host.run(f"curl -s --max-time 5 http://127.0.0.1:{port}/metrics")
        assert metric not in plain.stdout, port
        bare = host.run(
            f"curl -s --max-time 5 --cacert /root/glm-site-ca.pem --resolve {name}:{port}:127.0.0.1"
            f" https://{name}:{port}/metrics"
        )
        assert bare.rc == 0, (port, bare.rc, bare.stderr)  # the certificate verified against the site CA
        assert metric not in bare.stdout, port
        assert "No required SSL certificate was sent" in bare.stdout, (port, bare.stdout[:300])


def test_the_certificate_is_the_site_cas_and_names_the_host(host) -> None:  # noqa: ANN001
    ca = (SECRETS / "ca" / "ca.pem").read_text()
    assert host.file("/etc/glm-fleet/gateway/tls/ca.pem").content_string == ca
    subject = host.check_output("openssl x509 -in /etc/glm-fleet/gateway/tls/gateway.pem -noout -ext subjectAltName")
    assert f"DNS:{host.backend.host}" in subject
    verify = host.run("openssl verify -CAfile /etc/glm-fleet/gateway/tls/ca.pem /etc/glm-fleet/gateway/tls/gateway.pem")
    assert verify.rc == 0, verify.stderr
    tls_key = host.file("/etc/glm-fleet/gateway/tls/gateway.key")
    assert (tls_key.user, tls_key.mode) == ("root", 0o600)
    assert oct((SECRETS / "ca" / "ca.key").stat().st_mode & 0o777) == "0o600"


def test_each_developer_gets_an_answer_with_their_own_key(host) -> None:  # noqa: ANN001
    for name, header in (("alice", "Authorization"), ("bob", "x-api-key")):
        key = developer_key(name)
        assert len(key) == 48
        assert oct((SECRETS / "developer-keys" / f"{name}.key").stat().st_mode & 0o777) == "0o600"
        body = {"model": SERVED, "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        status, text = curl(host, "/v1/messages", key, body, header)
        assert status == "200", text
        assert "event: message_stop" in text
        assert "Hello from GLM-5.3-Flash" in "".join(
            json.loads(line[6:]).get("delta", {}).get("text", "")
            for line in text.splitlines()
            if line.startswith("data: ")
        )
    log = host.check_output("cat /var/log/nginx/glm-fleet-gateway.log")
    assert "developer=alice" in log
    assert "developer=bob" in log


def test_a_body_over_claude_codes_ceiling_gets_request_too_large(host) -> None:  # noqa: ANN001
    """One byte over 32 MiB (Claude Code's own ceiling) gets 413 and the Anthropic error
    on which Claude Code names the images to remove; the body never reaches a server."""
    name = host.backend.host

    def posted() -> int:  # not the probes (the router's health checks, the keys timer's /metrics reads)
        return sum(1 for request in worker_requests() if request.get("method") == "POST")

    before = posted()
    out = host.run(
        "head -c 33554433 /dev/zero | tr '\\0' x > /tmp/glm-fleet-big.json"
        " && curl -s --cacert /etc/glm-fleet/gateway/tls/ca.pem -w '\\n%{http_code}'"
        f" -H 'Authorization: Bearer {developer_key('alice')}' -H 'content-type: application/json'"
        f" --data-binary @/tmp/glm-fleet-big.json https://{name}/v1/messages --resolve {name}:443:127.0.0.1;"
        " rm -f /tmp/glm-fleet-big.json"
    ).stdout
    text, _newline, status = out.rpartition("\n")
    assert status == "413", out[-500:]
    assert json.loads(text)["error"] == {"type": "request_too_large", "message": "request body over 32 MiB"}
    assert posted() == before


def test_the_servers_see_the_servers_key_not_the_developers(host) -> None:  # noqa: ANN001
    server_key = (REPO / ".lab" / "api_key").read_text().strip()
    status, _body = curl(host, "/v1/models", developer_key("alice"))
    assert status == "200"
    seen = {r.get("token_sha256") for r in worker_requests() if r.get("path") == "/v1/models"}
    assert hashlib.sha256(server_key.encode()).hexdigest() in seen
    assert hashlib.sha256(developer_key("alice").encode()).hexdigest() not in seen


def test_random_and_missing_keys_get_401_and_admin_routes_404(host) -> None:  # noqa: ANN001
    assert curl(host, "/v1/models")[0] == "401"
    assert curl(host, "/v1/models", "x" * 48)[0] == "401"
    # A developer's key in other letter case is another key (nginx's plain map strings ignore case).
    swapped = developer_key("alice").swapcase()
    assert swapped != developer_key("alice")
    assert curl(host, "/v1/models", swapped)[0] == "401"
    assert curl(host, "/v1/models", swapped, header="x-api-key")[0] == "401"
    assert curl(host, "/v1/models", (REPO / ".lab" / "api_key").read_text().strip())[0] == "401"
    for admin in ("/flush_cache", "/get_server_info", "/workers", "/generate", "/metrics"):
        status, text = curl(host, admin, developer_key("alice"))
        assert status == "404", (admin, text)


ROUTER_ADMIN_KEY = "/etc/glm-fleet/gateway/router-admin.key"


def router_workers_status(host, key_source: str) -> str:  # noqa: ANN001 - testinfra host
    """The HTTP status of the router's worker API on the host's loopback, with the key key_source
    prints (a shell command), sent through stdin."""
    script = (
        f'printf "Authorization: Bearer %s\\n" "$({key_source})"'
        " | curl -s -o /dev/null -w '%{http_code}' -H @- http://127.0.0.1:30000/workers"
    )
    return host.check_output(script)


def test_the_routers_worker_api_opens_to_its_control_plane_key_not_the_servers(host) -> None:  # noqa: ANN001
    server_key = (REPO / ".lab" / "api_key").read_text().strip()
    assert router_workers_status(host, f"echo {server_key}") == "401"
    assert router_workers_status(host, "true") == "401"
    assert router_workers_status(host, f"cat {ROUTER_ADMIN_KEY}") == "200"
    key_file = host.file(ROUTER_ADMIN_KEY)
    assert (key_file.user, key_file.group, key_file.mode) == ("glm-gateway", "glm-gateway", 0o600)
    assert (
        json.loads(host.file("/etc/glm-fleet/gateway/router.json").content_string)["admin_key_file"] == ROUTER_ADMIN_KEY
    )


def test_no_key_in_argv_logs_or_readable_files(host) -> None:  # noqa: ANN001
    server_key = (REPO / ".lab" / "api_key").read_text().strip()
    probe_key = (SECRETS / "probe.key").read_text().strip()  # the fleet report's and the benchmark's
    router_key = host.file(ROUTER_ADMIN_KEY).content_string.strip()  # made on the host, kept there
    secrets = [server_key, developer_key("alice"), developer_key("bob"), probe_key, router_key]
    argv = host.check_output("ps -eo args")
    journal = host.check_output("journalctl --no-pager -u glm-gateway -u nginx")
    nginx_logs = host.check_output("cat /var/log/nginx/*.log")
    for secret in secrets:
        assert secret not in argv
        assert secret not in journal
        assert secret not in nginx_logs
    router_config = host.file("/etc/glm-fleet/gateway/router.json")  # read by the router's own user
    assert (router_config.user, router_config.mode) == ("glm-gateway", 0o600)
    # The servers the router starts with: no secret, readable by the router's group, the lab's worker.
    workers = host.file("/etc/glm-fleet/gateway/workers.json")
    assert (workers.user, workers.group, workers.mode) == ("root", "glm-gateway", 0o640)
    assert [url.rsplit(":", 1)[1] for url in json.loads(workers.content_string)] == ["18099"]
    for path in (
        "/etc/glm-fleet/gateway/keys.json",
        "/etc/glm-fleet/gateway/nginx/developer-keys.map",
        "/etc/glm-fleet/gateway/nginx/expired-keys.map",
        "/etc/glm-fleet/gateway/nginx/upstream-auth.conf",
    ):
        f = host.file(path)
        assert (f.user, f.mode) == ("root", 0o600), path
    # The gateway holds no developer's key, only its SHA-256 (nginx hashes the key a request presents);
    # nor the fleet probe's (the report's and the benchmark's), which never expires.
    for name, key in (("alice", developer_key("alice")), ("bob", developer_key("bob")), ("fleet-probe", probe_key)):
        found = host.run(f"grep -rlF -- '{key}' /etc/glm-fleet /etc/nginx /etc/systemd/system")
        assert (found.rc, found.stdout) == (1, ""), found.stdout
        digest = hashlib.sha256(key.encode()).hexdigest()
        assert f'"{digest}" "{name}";' in host.file("/etc/glm-fleet/gateway/nginx/developer-keys.map").content_string
    records = json.loads(host.file("/etc/glm-fleet/gateway/keys.json").content_string)["developers"]
    assert sorted(records) == ["alice", "bob", "fleet-probe"]
    assert all(set(record) == {"sha256", "expires"} for record in records.values())
    assert records["fleet-probe"]["expires"] is None
    assert server_key in host.file("/etc/glm-fleet/gateway/nginx/upstream-auth.conf").content_string
    assert server_key not in host.file("/etc/nginx/sites-available/glm-fleet-gateway.conf").content_string


def answers(host) -> dict[tuple[str, str], float]:  # noqa: ANN001
    """mtail's count of the gateway's answers: (status, developer) -> count."""
    metrics = host.check_output("curl -s http://127.0.0.1:13903/metrics")  # mtail's own, on loopback
    found = re.findall(r"^glm_gateway_responses_total\{([^}]*)\} (\S+)$", metrics, re.MULTILINE)
    out = {}
    for labels, value in found:
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[pairs["status"], pairs["developer"]] = float(value)
    return out


def test_mtail_counts_the_gateways_answers_by_status_and_developer(host) -> None:  # noqa: ANN001
    """The program compiles as the role wrote it; each answer nginx logs is counted under its status
    and developer (none for a request without a valid key), on the metrics address."""
    service = host.service("mtail")
    assert service.is_running, host.run("journalctl -u mtail --no-pager -n 30").stdout
    assert service.is_enabled
    assert host.socket("tcp://127.0.0.1:13903").is_listening  # behind nginx's TLS on 3903
    compiled = host.run("mtail --compile_only --logtostderr --address 127.0.0.1 --port 0 --progs /etc/mtail")
    assert compiled.rc == 0, compiled.stderr
    assert "Loaded program glm-fleet-gateway.mtail" in compiled.stderr
    before = answers(host)
    for _request in range(3):
        assert curl(host, "/v1/models", "y" * 48)[0] == "401"
    assert curl(host, "/v1/models", developer_key("bob"))[0] == "200"
    deadline = time.monotonic() + 20
    while True:
        after = answers(host)
        grew = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        if (grew.get(("401", "")) == 3 and grew.get(("200", "bob")) == 1) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert grew.get(("401", "")) == 3, after
    assert grew.get(("200", "bob")) == 1, after
