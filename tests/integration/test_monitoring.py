"""The fleet's Prometheus and Alertmanager on the lab (cache-1, from the distribution): every target
up, the servers' throughput moving under load through the gateway, an alert that fires when a server
stops and resolves when it is back, reaching the inventory's webhook once each way, and a node that
is down holding back its server's alert."""

from __future__ import annotations

import csv
import datetime
import email
import io
import json
import math
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import anthropic
import pytest
import yaml
from conftest import REPO, Runner, lab, run_log, site_stage
from test_gateway import call, developer_key, in_node

MONITORING = f"{lab.PREFIX}-cache-1"
SECRETS = lab.INVENTORY.parent / ".secrets"
GATEWAY_PLAYBOOK = REPO / "playbooks" / "gateway.yml"
GATEWAY_HOSTS = (f"{lab.PREFIX}-cache-1", f"{lab.PREFIX}-gateway-2")
KEYS_SERVICE = "glm-fleet-gateway-keys.service"


def prometheus(path: str, **params: str) -> Any:
    """Prometheus' HTTP API on the monitoring host's loopback (where it listens)."""
    url = f"http://127.0.0.1:9090{path}?{urllib.parse.urlencode(params)}"
    body = json.loads(in_node(MONITORING, "curl", "-s", "--max-time", "10", url))
    assert body["status"] == "success", body
    return body["data"]


def value(expr: str) -> float:
    result = prometheus("/api/v1/query", query=expr)["result"]
    return float(result[0]["value"][1]) if result else float("nan")


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, f"{what}: not within {timeout} s"
            return found
        time.sleep(1)


def keys_run_until(check: Any, every: float = 5) -> Any:
    """`check`, for wait_for, with the gateways' keys service started (what its timer starts each
    minute: the ledger, the maps, nginx's reload) at most every `every` seconds while it fails."""
    last = [0.0]

    def checked() -> Any:
        if time.monotonic() - last[0] >= every:
            for host in GATEWAY_HOSTS:
                subprocess.run(["docker", "exec", host, "systemctl", "start", KEYS_SERVICE], check=True)
            last[0] = time.monotonic()
        return check()

    return checked


@pytest.fixture(scope="module")
def fleet(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    site_stage(tmp_path_factory.mktemp("monitoring"), "monitoring")
    return lab_state


def test_every_target_of_the_fleet_is_up(fleet: dict[str, Any]) -> None:
    servers = {f"{n['address']}:{port}" for n in fleet["nodes"] if n["group"] == "gpu_nodes"
               for port in ((18080, 18081) if n["name"] == "gpu-2" else (18080,))}  # fmt: skip
    hosts = {n["name"] for n in fleet["nodes"] if n["group"] in ("gpu_nodes", "site_cache", "gateway")}
    # The gateway hosts: cache-1, and gateway-2 beside it (the two share the front door's address).
    gateways = {n["address"] for n in fleet["nodes"] if n["group"] in ("site_cache", "gateway")}
    expected = {
        "glm-sglang": servers,
        "glm-health-generate": servers,
        "glm-gateway": {f"{address}:29000" for address in gateways},
        "glm-gateway-log": {f"{address}:3903" for address in gateways},
        # each gateway's front door and the fleet's (the floating address), certificates verified against the site CA
        "glm-gateway-https": {f"{address}:443" for address in gateways | {lab.FRONT_DOOR_ADDRESS}},
        "glm-node": {f"{n['address']}:9100" for n in fleet["nodes"] if n["name"] in hosts},
        "glm-dcgm": {f"{n['address']}:9400" for n in fleet["nodes"] if n["group"] == "gpu_nodes"},
        "prometheus": {"127.0.0.1:9090"},
    }

    def up() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for target in prometheus("/api/v1/targets")["activeTargets"]:
            if target["health"] == "up":
                found.setdefault(target["labels"]["job"], set()).add(target["labels"]["instance"])
        return found if found == expected else {}

    wait_for(f"every target up: {expected}", up, timeout=30)
    nodes = {r["metric"]["node"] for r in prometheus("/api/v1/query", query="up{job='glm-sglang'}")["result"]}
    assert nodes == {n["name"] for n in fleet["nodes"] if n["group"] == "gpu_nodes"}


def test_exporters_and_the_gateways_metrics_answer_only_a_client_certificate_of_the_site_ca(
    fleet: dict[str, Any],
) -> None:
    """N6: node exporter on every host, the DCGM exporter on each GPU node (published through docker's
    NAT), and on each gateway host the router's metrics and mtail's (behind nginx): from the laptop (a
    host of the LAN), plain HTTP gets no metrics, and HTTPS without a client certificate fails the
    handshake (the exporters' toolkit) or gets nginx's 400; Prometheus scrapes every one (the tests
    around this one) with the monitoring host's client certificate."""
    laptop = f"{lab.PREFIX}-laptop-1"
    ca = (SECRETS / "ca" / "ca.pem").read_text()
    in_node(laptop, "sh", "-c", "cat > /root/glm-site-ca.pem", stdin=ca)
    nodes = fleet["nodes"]
    served = [
        (node, 9100, "node_exporter_build_info")
        for node in nodes
        if node["group"] in ("gpu_nodes", "site_cache", "gateway")
    ]
    served += [(node, 9400, "DCGM_FI_DEV_GPU_TEMP") for node in nodes if node["group"] == "gpu_nodes"]
    gateways = [node for node in nodes if node["group"] in ("site_cache", "gateway")]
    served += [(node, port, metric) for node in gateways for port, metric in ((29000, "smg_"), (3903, "glm_gateway_"))]
    assert len(served) == 10, served  # 4 hosts' node exporters, 2 GPU nodes' DCGM exporters, 2 gateways' two ports
    for node, port, metric in served:
        plain = in_node(laptop, "curl", "-s", "--max-time", "5", f"http://{node['address']}:{port}/metrics")
        assert metric not in plain, (node["name"], port)
        tls = subprocess.run(
            ["docker", "exec", laptop, "curl", "-s", "--max-time", "5", "--cacert", "/root/glm-site-ca.pem",
             f"https://{node['address']}:{port}/metrics"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert metric not in tls.stdout, (node["name"], port)
        if port in (29000, 3903):  # nginx: the handshake completes (its certificate verified), then 400
            assert tls.returncode == 0, (node["name"], port, tls.returncode)
            assert "No required SSL certificate was sent" in tls.stdout, (node["name"], port)
        else:  # The server asks for a certificate and the laptop has none: its TLS 1.3 alert reaches curl
            # during the handshake (35), while it sends the request (55) or reads the answer (56).
            assert tls.returncode in (35, 55, 56), (node["name"], port, tls.returncode, tls.stdout[:200])
    for node in nodes:
        if node["group"] in ("gpu_nodes", "site_cache", "gateway"):
            stat = in_node(
                f"{lab.PREFIX}-{node['name']}",
                "stat",
                "-c",
                "%U %a",
                "/etc/prometheus/glm-fleet-node-exporter/node.key",
            )
            assert stat == "prometheus 600", (node["name"], stat)


def test_a_first_run_refuses_to_replace_a_configuration_of_the_sites_own(runner: Runner, fleet: dict[str, Any]) -> None:
    """N18: where a role has not run yet (no receipt), a file of the distribution that it replaces and
    that a site changed is refused, named, before anything changes (here node exporter's defaults on a
    gateway host, which the exporters role replaces); glm.fleet's own file passes, and the role runs."""
    container, path = f"{lab.PREFIX}-gateway-2", "/etc/default/prometheus-node-exporter"
    receipt = "/var/lib/glm-fleet/receipts/exporters.json"
    ours = in_node(container, "cat", path)
    assert "Managed by glm.fleet.exporters" in ours
    sites = 'ARGS="--collector.systemd --web.listen-address=:9100"\n'
    in_node(container, "sh", "-c", f"cat > {path}", stdin=sites)
    in_node(container, "mv", receipt, f"{receipt}.kept")
    apply_role = REPO / "tests" / "integration" / "playbooks" / "apply_role.yml"
    try:
        refused = runner.playbook(apply_role, extravars={"target": "gateway-2", "role": "glm.fleet.exporters"})
        assert refused.status == "failed", run_log(refused)
        assert refused.stats["changed"].get("gateway-2", 0) == 0, refused.stats
        failed = [e["event_data"]["res"].get("msg", "") for e in refused.events if e.get("event") == "runner_on_failed"]
        assert len(failed) == 1, run_log(refused)
        assert failed[0].startswith(
            f"gateway-2: {path} is not glm.fleet's and differs from the one package prometheus-node-exporter ships"
        ), failed[0]
        assert in_node(container, "cat", path) == sites.strip()  # left as the site wrote it
        assert in_node(container, "sh", "-c", f"test -e {receipt} && echo yes || echo no") == "no"  # none recorded
    finally:
        in_node(container, "sh", "-c", f"cat > {path}", stdin=ours + "\n")
        in_node(container, "rm", "-f", f"{receipt}.kept")
    # glm.fleet's own file passes: the role runs whole and records its receipt again.
    again = runner.playbook(apply_role, extravars={"target": "gateway-2", "role": "glm.fleet.exporters"})
    assert again.status == "successful", run_log(again)
    assert in_node(container, "cat", path) == ours
    assert in_node(container, "sh", "-c", f"test -s {receipt} && echo recorded") == "recorded"


def test_the_dcgm_exporter_reports_every_gpu_of_every_node(fleet: dict[str, Any]) -> None:
    """NVIDIA's DCGM exporter (the lab's stand-in, which sees the GPUs the container toolkit shows
    it) runs on each GPU node: Prometheus has one series per GPU, by node, with DCGM's labels, and
    GLMGPUMissing is quiet."""

    def per_node() -> dict[str, int]:
        result = prometheus("/api/v1/query", query="count by (node) (DCGM_FI_DEV_GPU_TEMP{job='glm-dcgm'})")["result"]
        return {r["metric"]["node"]: int(r["value"][1]) for r in result}

    wait_for("a GPU temperature per GPU", lambda: per_node() == {"gpu-1": 4, "gpu-2": 8}, timeout=45)
    series = [r["metric"] for r in prometheus("/api/v1/query", query="DCGM_FI_DEV_FB_FREE{node='gpu-2'}")["result"]]
    assert sorted(int(s["gpu"]) for s in series) == list(range(8))
    assert {s["modelName"] for s in series} == {"NVIDIA B200"}
    assert all(s["UUID"].startswith("GPU-") and s["device"] == f"nvidia{s['gpu']}" for s in series)
    assert value("sum(DCGM_FI_DEV_FB_FREE{node='gpu-1'})") == 4 * 183359
    firing = prometheus("/api/v1/alerts")["alerts"]
    assert not [a for a in firing if a["labels"]["alertname"] in ("GLMGPUMissing", "GLMGPUXidError")]


def this_machines(address: str) -> bool:
    """Whether `address` is one of this machine's (the controller's): a socket binds only to those."""
    with socket.socket() as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


def test_the_dashboard_is_provisioned_into_grafana_on_its_prometheus(fleet: dict[str, Any]) -> None:
    """The site's Grafana (the lab's stand-in of its API) holds the fleet's dashboard, in its folder,
    opening on the Prometheus datasource the inventory names; the same dashboard is not saved again.
    Every call to Grafana's API came from an address of the controller (the lab's machine), none from a
    monitoring host: the token stays on the controller."""
    shipped = json.loads((REPO / "roles" / "monitoring" / "files" / "dashboards" / "glm-fleet.json").read_text())
    grafana = json.loads((lab.STATE_DIR / "services.json").read_text())["grafana"]
    with urllib.request.urlopen(f"{grafana}/_lab/dashboards", timeout=10) as resp:  # noqa: S310
        stored = json.loads(resp.read())["glm-fleet"]
    assert stored["meta"]["folderUid"] == "glm-fleet"
    dashboard = stored["dashboard"]
    assert dashboard["title"] == shipped["title"]
    assert len(dashboard["panels"]) == len(shipped["panels"])
    variable = next(v for v in dashboard["templating"]["list"] if v["type"] == "datasource")
    assert variable["current"]["value"] == "glm-prometheus"
    assert dashboard["version"] == 1
    with urllib.request.urlopen(f"{grafana}/_lab/callers", timeout=10) as resp:  # noqa: S310
        callers = json.loads(resp.read())
    assert callers, "no call to Grafana's API"
    assert all(this_machines(address) for address in set(callers)), callers


def test_generated_tokens_reach_prometheus_as_the_servers_counted_them(fleet: dict[str, Any]) -> None:
    """The fleet's generation counter in Prometheus grows by exactly the output tokens the answers
    reported, and the servers' generation throughput gauge rises above zero."""
    total = "sum(sglang:generation_tokens_total{job='glm-sglang'})"
    before = value(total)
    trust = ssl.create_default_context(cafile=str(SECRETS / "ca" / "ca.pem"))
    client = anthropic.Anthropic(
        base_url=f"https://{lab.SITE_CACHE_ADDRESS}", auth_token=developer_key("laptop-1"), api_key=None,
        http_client=anthropic.DefaultHttpxClient(verify=trust),
    )  # fmt: skip
    output = 0
    for i in range(12):
        message = client.messages.create(
            model="zai-org/GLM-5.3-Flash", max_tokens=64, messages=[{"role": "user", "content": f"count me {i}"}]
        )
        output += message.usage.output_tokens
    wait_for(f"{total} to grow by {output} from {before}", lambda: value(total) - before == output, timeout=30)
    assert value("max(max_over_time(sglang:gen_throughput{job='glm-sglang'}[1m]))") > 0


def developer_counts() -> dict[str, dict[str, float]]:
    """The fleet's token counters in Prometheus, by developer: input (cached included), cached, output."""
    found: dict[str, dict[str, float]] = {}
    for kind, metric in (("input", "prompt_tokens_total"), ("cached", "cached_tokens_total"),
                         ("output", "generation_tokens_total")):  # fmt: skip
        for series in prometheus("/api/v1/query", query=f"sum by (developer) (sglang:{metric}{{job='glm-sglang'}})")[
            "result"
        ]:
            developer = series["metric"].get("developer", "")
            found.setdefault(developer, {"input": 0, "cached": 0, "output": 0})[kind] = float(series["value"][1])
    return found


def converse(developer: str, turns: int) -> dict[str, int]:
    """A Claude-Code-shaped conversation through the gateway with `developer`'s key (a long system
    prompt, turns that grow it, streamed and not in turn): the usage its answers reported."""
    trust = ssl.create_default_context(cafile=str(SECRETS / "ca" / "ca.pem"))
    client = anthropic.Anthropic(
        base_url=f"https://{lab.SITE_CACHE_ADDRESS}", auth_token=developer_key(developer), api_key=None,
        http_client=anthropic.DefaultHttpxClient(verify=trust),
    )  # fmt: skip
    system = "You are a coding agent in a large repository; read before you write. " * 40
    messages: list[dict[str, Any]] = []
    used = {"input": 0, "cached": 0, "output": 0}
    for turn in range(turns):
        messages.append({"role": "user", "content": f"step {turn} of {developer}'s task"})
        ask = {"model": "zai-org/GLM-5.3-Flash", "max_tokens": 40, "system": system, "messages": messages}
        if turn % 2:
            with client.messages.stream(**ask) as stream:
                answer = stream.get_final_message()
        else:
            answer = client.messages.create(**ask)
        cached = answer.usage.cache_read_input_tokens or 0
        used["input"] += answer.usage.input_tokens + cached
        used["cached"] += cached
        used["output"] += answer.usage.output_tokens
        messages.append({"role": "assistant", "content": [{"type": "text", "text": b.text} for b in answer.content
                                                          if b.type == "text"]})  # fmt: skip
    return used


def usage_file_rows(start: float, end: float) -> tuple[str, dict[str, dict[str, str]]]:
    """Run the monitoring host's usage report for [start, end]: the day and the file's rows by developer,
    after checking the file is the day's, 0640 root:root."""
    report = ("python3", "/usr/local/libexec/glm-fleet/usage-report", "/etc/glm-fleet/usage-report.json")
    out = in_node(MONITORING, *report, "--start", str(start), "--end", str(end))
    day = datetime.datetime.fromtimestamp(start, datetime.UTC).date().isoformat()
    path = f"/var/lib/glm-fleet/usage/usage-{day}.csv"
    assert path in out, out
    assert in_node(MONITORING, "stat", "-c", "%a %U %G", path) == "640 root root"
    return day, {r["developer"]: r for r in csv.DictReader(io.StringIO(in_node(MONITORING, "cat", path)))}


def gateway_ledger() -> dict[str, float]:
    """What the gateway's ledger tells node exporter (its textfile): each sample line's series to its value."""
    text = in_node(MONITORING, "cat", "/var/lib/prometheus/node-exporter/glm-fleet-gateway-usage.prom")
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}


def budget_answer(key: str) -> tuple[str, dict, str]:
    """A short request through the gateway with `key`: its status, its body and its Retry-After."""
    trust = ssl.create_default_context(cafile=str(SECRETS / "ca" / "ca.pem"))
    request = urllib.request.Request(
        f"https://{lab.SITE_CACHE_ADDRESS}/v1/messages", method="POST",
        headers={"x-api-key": key, "content-type": "application/json"},
        data=json.dumps({"model": "zai-org/GLM-5.3-Flash", "max_tokens": 8,
                         "messages": [{"role": "user", "content": "hi"}]}).encode(),
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, context=trust, timeout=60) as resp:  # noqa: S310 - the lab's gateway
            return str(resp.status), json.loads(resp.read()), resp.headers.get("Retry-After", "")
    except urllib.error.HTTPError as refused:
        return str(refused.code), json.loads(refused.read()), refused.headers.get("Retry-After", "")


@pytest.fixture(scope="class")
def metered(fleet: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The developers of the metering tests, added by one run of the gateway's playbook and removed by
    one after the last of them: laptop-1 and alice with the lab's limits; carol with a soft budget in
    dollars, dave with a hard one of 1 token, erin with a limit of 10 tokens a minute. Names of their
    own for the three: the ledger keeps a developer's month across runs of the tests on one lab."""
    lab_limits = yaml.safe_load((lab.INVENTORY.parent / "group_vars" / "gateway.yml").read_text())[
        "gateway_developer_limits"
    ]
    carol, dave, erin = (f"{name}-{int(time.time())}" for name in ("carol", "dave", "erin"))
    budgets = {carol: {"monthly": 0.02, "unit": "usd", "warn_percent": 1},
               dave: {"monthly": 1, "unit": "tokens", "hard": True}}  # fmt: skip
    settings = {"gateway_developers": ["laptop-1", "alice", carol, dave, erin],
                "gateway_developer_limits": lab_limits | {erin: {"tokens_per_minute": 10}},
                "gateway_developer_budgets": budgets}  # fmt: skip
    runner = Runner(tmp_path_factory.mktemp("metered"))
    added = runner.playbook(GATEWAY_PLAYBOOK, extravars=settings)
    assert added.status == "successful", run_log(added)
    yield {"carol": carol, "dave": dave, "erin": erin, "settings": settings, "runner": runner}
    removed = runner.playbook(GATEWAY_PLAYBOOK)
    assert removed.status == "successful", run_log(removed)


@pytest.mark.usefixtures("metered")
class TestMetering:
    """What each developer used, as their answers reported it: in Prometheus and the day's file, and in
    the gateway's ledger against their budgets and limits. One run of the gateway's playbook adds the
    developers of both tests, one removes them."""

    def test_each_developers_tokens_reach_prometheus_and_the_days_file_as_their_answers_reported(self) -> None:
        """Two developers with different loads through the gateway (Claude Code's shape: a long system
        prompt, a conversation that grows): each one's input, cached input and output counters grow by
        exactly the usage their answers reported, and the usage report's file for that window holds the
        same figures with their price at the hosted service's rates."""
        start = time.time() - 1
        before = developer_counts()
        sent = {developer: converse(developer, turns) for developer, turns in (("laptop-1", 5), ("alice", 2))}
        assert sent["laptop-1"]["cached"] > 0, sent  # a conversation's later turns found its prefix cached

        def grown() -> dict[str, dict[str, float]]:
            after = developer_counts()
            zero = {"input": 0, "cached": 0, "output": 0}
            return {d: {k: after.get(d, zero)[k] - before.get(d, zero)[k] for k in zero} for d in sent}

        deadline = time.monotonic() + 30  # a few scrapes
        while grown() != sent and time.monotonic() < deadline:
            time.sleep(1)
        assert grown() == sent, (grown(), sent)
        day, rows = usage_file_rows(start, time.time() + 1)
        for developer, mine in sent.items():
            uncached = mine["input"] - mine["cached"]
            cost = (uncached * 0.20 + mine["cached"] * 0.05 + mine["output"] * 0.50) / 1e6
            assert rows[developer] == {
                "day": day, "developer": developer, "input_tokens": str(uncached),
                "cached_input_tokens": str(mine["cached"]), "output_tokens": str(mine["output"]),
                "hosted_usd": f"{cost:.4f}",
            }, (rows[developer], mine)  # fmt: skip
        assert in_node(MONITORING, "systemctl", "is-enabled", "glm-fleet-usage-report.timer") == "enabled"
        print(f"metering: {sent}")  # the figures, for the closing report

    def test_a_budget_warns_and_a_hard_one_refuses_until_it_is_raised(self, metered: dict[str, Any]) -> None:
        """The gateway's ledger grows by exactly the usage carol's, dave's and erin's answers reported;
        carol's share of her budget warns (GLMDeveloperBudgetWarning, at the inventory's webhook) and her
        requests go on; dave's is spent: at the keys service's next run, with no run of Ansible, the
        gateway answers him 402 (billing_error) with what he used this month, and erin 429 with
        Retry-After 60, while carol keeps her answers; erin is served again once her tokens are a minute
        old; the operator raises dave's budget and he is served at once. The test starts the keys service
        (as its timer does each minute, which test_gateway's expiry test waits for) rather than waiting
        for the minute."""
        carol, dave, erin, settings = (metered[k] for k in ("carol", "dave", "erin", "settings"))
        since = time.time()
        before = gateway_ledger()
        sent = {carol: converse(carol, 4), dave: converse(dave, 1), erin: converse(erin, 1)}

        def month(developer: str, kind: str, since_before: bool = True) -> float:
            series = f'glm_fleet_developer_month_tokens{{developer="{developer}",kind="{kind}"}}'
            return gateway_ledger().get(series, 0.0) - (before.get(series, 0.0) if since_before else 0.0)

        def counted() -> bool:
            return all(month(d, k) == sent[d][u] for d in sent for k, u in
                       (("input", "input"), ("cached_input", "cached"), ("output", "output")))  # fmt: skip

        wait_for(f"the gateway's ledger to grow by {sent}", keys_run_until(counted), timeout=30)
        hers = {k: month(carol, k, since_before=False) for k in ("input", "cached_input", "output")}
        cost = ((hers["input"] - hers["cached_input"]) * 0.20 + hers["cached_input"] * 0.05
                + hers["output"] * 0.50) / 1e6  # fmt: skip
        ratio = gateway_ledger()[
            f'glm_fleet_developer_budget_used_ratio{{developer="{carol}",unit="usd",hard="false"}}'
        ]
        assert ratio == round(cost / 0.02, 6)
        assert 0.01 <= ratio < 1, ratio  # over its warning, under its budget

        def refused() -> tuple[str, dict, str] | None:
            answer = budget_answer(developer_key(dave))
            return answer if answer[0] != "200" else None

        status, body, _after = wait_for("dave refused", keys_run_until(refused), timeout=30)
        used = month(dave, "input", since_before=False) + month(dave, "output", since_before=False)
        assert (status, body["error"]["type"]) == ("402", "billing_error"), body
        assert body["error"]["message"] == (
            f"{dave}: the monthly budget of 1 tokens is spent ({used:.0f} tokens used in"
            f" {datetime.datetime.now(datetime.UTC):%Y-%m}); it starts anew next month,"
            " or ask your operator to raise it"
        )
        theirs = sent[erin]
        status, body, after = wait_for("erin throttled", keys_run_until(
            lambda: (a := budget_answer(developer_key(erin)))[0] != "200" and a), timeout=30)  # fmt: skip
        assert (status, after, body["error"]["type"]) == ("429", "60", "rate_limit_error"), body
        computed = theirs["input"] - theirs["cached"] + theirs["output"]
        assert body["error"]["message"].startswith("this key is over its limit of 10 tokens a minute (input not"
                                                   " from the cache and output: "), body  # fmt: skip
        assert body["error"]["message"].endswith(" in the last minute); retry after 60 s"), body
        assert computed > 10, theirs  # its conversation alone was over
        assert budget_answer(developer_key(carol))[0] == "200"
        assert budget_answer(developer_key("laptop-1"))[0] == "200"

        wait_for("GLMDeveloperBudgetSpent for dave", lambda: firing("GLMDeveloperBudgetSpent", developer=dave),
                 timeout=60)  # fmt: skip
        assert not firing("GLMDeveloperBudgetWarning", developer=dave)

        # Carol's warning goes on its way to the webhook while the operator raises dave's budget.
        raised = settings["gateway_developer_budgets"] | {dave: {"monthly": 10**9, "unit": "tokens", "hard": True}}
        again = metered["runner"].playbook(GATEWAY_PLAYBOOK, extravars=settings | {"gateway_developer_budgets": raised})
        assert again.status == "successful", run_log(again)
        assert budget_answer(developer_key(dave))[0] == "200"  # at once: the run rewrote the map
        warned = wait_for(
            "carol's budget warning at the webhook",
            lambda: [
                n
                for n in notifications(since, "GLMDeveloperBudgetWarning", "")
                if n["status"] == "firing" and n["groupLabels"].get("developer") == carol
            ],
            timeout=30,
        )
        assert [a["labels"]["developer"] for a in warned[0]["alerts"]] == [carol]
        wait_for("erin served once her tokens are a minute old",
                 keys_run_until(lambda: budget_answer(developer_key(erin))[0] == "200"), timeout=90)  # fmt: skip


def test_every_dashboard_query_is_valid_and_the_servers_ones_have_data(fleet: dict[str, Any]) -> None:
    """Each panel query of the Grafana dashboard (tools/dashboards.py) is accepted by the lab's
    Prometheus; those over the servers and the gateway return series (DCGM's need a DCGM exporter)."""
    sys.path.insert(0, str(REPO / "tools"))
    import dashboards  # noqa: PLC0415 - the tool, from tools/

    empty = []
    for query in dashboards.queries():
        expr = query["expr"].replace("$node", ".*")
        result = prometheus("/api/v1/query", query=expr)["result"]
        if not result and "DCGM_" not in expr:
            empty.append(query)
    assert not empty, empty


def firing(alert: str, **labels: str) -> list[dict]:
    return [
        a
        for a in prometheus("/api/v1/alerts")["alerts"]
        if a["labels"]["alertname"] == alert and a["state"] == "firing" and labels.items() <= a["labels"].items()
    ]


def notifications(since: float, alert: str, node: str) -> list[dict]:
    """What the lab's webhook (the inventory's receiver) got since `since` for the groups of `alert`
    on `node` (of no node: ""): each notification's body with its arrival time."""
    receiver = json.loads((lab.STATE_DIR / "services.json").read_text())["alerts"]
    with urllib.request.urlopen(f"{receiver}/_lab/notifications", timeout=10) as resp:  # noqa: S310 - the lab's
        kept = json.loads(resp.read())
    group = {"alertname": alert, "node": node} if node else {"alertname": alert}
    return [
        {**n["body"], "received": n["received"]}
        for n in kept
        if n["received"] >= since and {k: v for k, v in n["body"]["groupLabels"].items() if k != "developer"} == group
    ]


def mails(since: float, alert: str, node: str) -> list[str]:
    """The subjects of the alert e-mails the lab's mail relay kept since `since` for the group of
    `alert` on `node` (Alertmanager's default subject: `[FIRING:1] alert node (...)`), in order."""
    maildir = lab.STATE_DIR / "mail" / "new"
    kept = sorted(maildir.iterdir(), key=lambda p: p.stat().st_mtime) if maildir.is_dir() else []
    subjects = [email.message_from_bytes(p.read_bytes())["Subject"] for p in kept if p.stat().st_mtime >= since]
    return [s for s in subjects if s and s.split("] ", 1)[-1].startswith(f"{alert} {node} ")]


def held_back(alert: str, node: str) -> list[dict]:
    """The alerts Alertmanager holds back (inhibited) for `alert` on `node`, from its own API."""
    url = "http://127.0.0.1:9093/api/v2/alerts?" + urllib.parse.urlencode({"filter": f'alertname="{alert}"'})
    alerts = json.loads(in_node(MONITORING, "curl", "-s", "--max-time", "10", url))
    return [a for a in alerts if a["labels"].get("node") == node and a["status"]["inhibitedBy"]]


# The lab's alert timing (inventories/lab/group_vars/monitoring.yml): scrape and evaluation every 2s,
# GLMServerDown and GLMNodeDown after 6s, a group's first notification after 1s, a change after 2s.
FOR, GROUP_WAIT, GROUP_INTERVAL, SCRAPE = 6, 1, 2, 2


def test_a_stopped_server_fires_an_alert_that_resolves_when_it_is_back(fleet: dict[str, Any]) -> None:
    """Prometheus fires GLMServerDown; Alertmanager sends the inventory's webhook exactly one
    firing notification, within the rule's `for` plus the group wait (and the scrape and evaluation
    that see it), and exactly one resolved one when the server is back; the e-mail receiver (the
    critical alerts) gets the same two, through the lab's mail relay."""
    victim = next(n for n in fleet["nodes"] if n["name"] == "gpu-1")
    assert not firing("GLMServerDown")
    since, stopped = time.time(), time.monotonic()
    in_node(victim["container"], "systemctl", "stop", "pareto-glm53-flash.service")
    try:
        alerts = wait_for("GLMServerDown for gpu-1", lambda: firing("GLMServerDown", node="gpu-1"), timeout=60)
        fired_after = time.monotonic() - stopped
        assert [a["labels"]["instance"] for a in alerts] == [f"{victim['address']}:18080"]
        assert "does not answer /metrics" in alerts[0]["annotations"]["summary"]
        assert not firing("GLMServerDown", node="gpu-2"), "a running server was reported down"
        deadline = FOR + GROUP_WAIT + 2 * SCRAPE + 2 * SCRAPE  # the stop seen, the alert evaluated and sent
        sent = wait_for(
            "the firing notification", lambda: notifications(since, "GLMServerDown", "gpu-1"), timeout=deadline + 10
        )
        notified_after = sent[0]["received"] - since
        assert sent[0]["status"] == "firing"
        assert sent[0]["receiver"] == "lab-hook"
        assert [a["labels"]["instance"] for a in sent[0]["alerts"]] == [f"{victim['address']}:18080"]
        assert notified_after <= deadline + 10, f"notified {notified_after:.1f} s after the stop"
    finally:
        in_node(victim["container"], "systemctl", "start", "pareto-glm53-flash.service")
    restarted = time.monotonic()
    wait_for("GLMServerDown to resolve", lambda: not firing("GLMServerDown"), timeout=90)
    resolved_after = time.monotonic() - restarted
    wait_for(
        "the resolved notification",
        lambda: any(n["status"] == "resolved" for n in notifications(since, "GLMServerDown", "gpu-1")),
        timeout=GROUP_INTERVAL + 20,
    )
    time.sleep(3 * GROUP_INTERVAL)  # a repeat would come within a group interval
    assert [n["status"] for n in notifications(since, "GLMServerDown", "gpu-1")] == ["firing", "resolved"]
    wait_for("both e-mails", lambda: len(mails(since, "GLMServerDown", "gpu-1")) >= 2, timeout=30)
    subjects = mails(since, "GLMServerDown", "gpu-1")
    assert [s.split("]", 1)[0] for s in subjects] == ["[FIRING:1", "[RESOLVED"], subjects
    print(  # the figures, for the closing report
        f"monitoring: GLMServerDown fired {fired_after:.1f} s after the stop (for: {FOR}s, scrape {SCRAPE}s), "
        f"reached the receiver {notified_after:.1f} s after the stop, "
        f"and resolved {resolved_after:.1f} s after the start"
    )


def test_a_node_that_is_down_holds_back_its_servers_alert(fleet: dict[str, Any]) -> None:
    """With GLMNodeDown firing for a node, its server's GLMServerDown fires in Prometheus but
    Alertmanager holds it back (inhibited): the receiver hears of the node only."""
    victim = next(n for n in fleet["nodes"] if n["name"] == "gpu-1")
    wait_for("no GLMServerDown", lambda: not firing("GLMServerDown"), timeout=90)
    since = time.time()
    in_node(victim["container"], "systemctl", "stop", "prometheus-node-exporter.service")
    try:
        wait_for("GLMNodeDown's notification", lambda: notifications(since, "GLMNodeDown", "gpu-1"), timeout=60)
        in_node(victim["container"], "systemctl", "stop", "pareto-glm53-flash.service")
        try:
            wait_for("GLMServerDown for gpu-1", lambda: firing("GLMServerDown", node="gpu-1"), timeout=60)
            wait_for("GLMServerDown held back", lambda: held_back("GLMServerDown", "gpu-1"), timeout=30)
            time.sleep(GROUP_WAIT + 2 * GROUP_INTERVAL + SCRAPE)  # when a notification would have gone
            assert notifications(since, "GLMServerDown", "gpu-1") == []
        finally:
            in_node(victim["container"], "systemctl", "start", "pareto-glm53-flash.service")
        wait_for("GLMServerDown to resolve", lambda: not firing("GLMServerDown"), timeout=90)
    finally:
        in_node(victim["container"], "systemctl", "start", "prometheus-node-exporter.service")
    wait_for(
        "GLMNodeDown's resolved notification",
        lambda: any(n["status"] == "resolved" for n in notifications(since, "GLMNodeDown", "gpu-1")),
        timeout=60,
    )
    time.sleep(3 * GROUP_INTERVAL)
    assert notifications(since, "GLMServerDown", "gpu-1") == [], "a held-back alert was sent when it resolved"
    assert mails(since, "GLMServerDown", "gpu-1") == [], "a held-back alert was e-mailed"
    assert [n["status"] for n in notifications(since, "GLMNodeDown", "gpu-1")] == ["firing", "resolved"]


def test_a_burst_of_requests_without_a_key_reaches_the_receiver(fleet: dict[str, Any]) -> None:
    """mtail counts each 401 the gateway answers (developer empty); Prometheus sees exactly those,
    GLMGatewayUnauthorizedBurst fires (the lab allows 5 in 5 minutes) and its firing notification
    reaches the inventory's webhook."""
    counted = 'sum(glm_gateway_responses_total{job="glm-gateway-log",status="401",developer=""})'
    # A counter's first sample is no increase: the first 401 since mtail started makes the series.
    assert call("/v1/messages", "z" * 48) == "401"
    wait_for("the first 401 in Prometheus", lambda: not math.isnan(value(counted)), timeout=30)
    time.sleep(2 * SCRAPE)
    before = value(counted)
    for _request in range(8):
        assert call("/v1/messages", "z" * 48) == "401"
    wait_for("the 401s in Prometheus", lambda: value(counted) - before == 8, timeout=30)
    alert = wait_for(
        "GLMGatewayUnauthorizedBurst", lambda: firing("GLMGatewayUnauthorizedBurst", node="cache-1"), timeout=30
    )[0]
    assert "requests without a valid key on the gateway on cache-1" in alert["annotations"]["summary"]
    # It may have fired before (earlier tests send 401s too): the notification of this firing.
    active = datetime.datetime.fromisoformat(alert["activeAt"][:19] + "+00:00").timestamp()  # to the second
    sent = wait_for(
        "the burst's notification",
        lambda: [
            n for n in notifications(active - 1, "GLMGatewayUnauthorizedBurst", "cache-1") if n["status"] == "firing"
        ],
        timeout=30,
    )
    assert sent[0]["alerts"][0]["labels"]["severity"] == "warning"
