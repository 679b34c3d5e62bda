"""What a person checks by hand on the fleet's monitoring host: the services, Prometheus' configuration
and rules as promtool sees them, every target up, the server's metrics and its probe in Prometheus."""

from __future__ import annotations

import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMETHEUS = "http://127.0.0.1:9090"


def query(host, expr: str) -> list[dict]:  # noqa: ANN001 - testinfra host
    out = host.check_output(f"curl -s --get {PROMETHEUS}/api/v1/query --data-urlencode 'query={expr}'")
    body = json.loads(out)
    assert body["status"] == "success", body
    return body["data"]["result"]


def targets(host) -> list[dict]:  # noqa: ANN001
    return json.loads(host.check_output(f"curl -s {PROMETHEUS}/api/v1/targets"))["data"]["activeTargets"]


def test_services_run_and_start_at_boot(host) -> None:  # noqa: ANN001
    for unit in ("prometheus", "prometheus-blackbox-exporter", "prometheus-alertmanager", "prometheus-node-exporter"):
        service = host.service(unit)
        assert service.is_running, host.run(f"journalctl -u {unit} --no-pager -n 30").stdout
        assert service.is_enabled


def test_prometheus_listens_on_loopback_with_the_retention(host) -> None:  # noqa: ANN001
    assert host.socket("tcp://127.0.0.1:9090").is_listening
    assert not host.socket("tcp://0.0.0.0:9090").is_listening
    assert host.socket("tcp://127.0.0.1:9115").is_listening  # the blackbox exporter, loopback only
    assert not host.socket("tcp://0.0.0.0:9115").is_listening
    args = host.check_output("ps -o args= -C prometheus")
    assert "--storage.tsdb.retention.time=30d" in args
    assert "--web.listen-address=127.0.0.1:9090" in args


def test_promtool_accepts_the_configuration_and_the_rules(host) -> None:  # noqa: ANN001
    assert host.run("promtool check config /etc/prometheus/prometheus.yml").rc == 0
    check = host.run("promtool check rules /etc/prometheus/glm-fleet-alerts.yml")
    assert check.rc == 0, check.stdout + check.stderr
    assert "SUCCESS: 16 rules found" in check.stdout


def test_alertmanager_listens_on_loopback_alone_and_prometheus_sends_to_it(host) -> None:  # noqa: ANN001
    assert host.socket("tcp://127.0.0.1:9093").is_listening
    assert not host.socket("tcp://0.0.0.0:9093").is_listening
    assert not host.socket("tcp://0.0.0.0:9094").is_listening  # no cluster gossip
    assert not host.socket("udp://0.0.0.0:9094").is_listening
    active = json.loads(host.check_output(f"curl -s {PROMETHEUS}/api/v1/alertmanagers"))["data"]["activeAlertmanagers"]
    assert [a["url"] for a in active] == ["http://127.0.0.1:9093/api/v2/alerts"]


def test_alertmanagers_configuration_is_the_prometheus_users_alone_and_amtool_accepts_it(host) -> None:  # noqa: ANN001
    config = host.file("/etc/prometheus/alertmanager.yml")
    assert (config.user, config.group, config.mode) == ("prometheus", "prometheus", 0o600)
    check = host.run("amtool check-config /etc/prometheus/alertmanager.yml")
    assert check.rc == 0, check.stdout + check.stderr
    assert "- 3 receivers" in check.stdout, check.stdout


def test_alerts_route_by_severity_to_the_inventorys_receiver(host) -> None:  # noqa: ANN001
    """The lab routes critical and warning to its webhook, critical by e-mail too; anything else
    reaches no one."""

    def route(*labels: str) -> str:
        return host.check_output(
            "amtool config routes test --config.file=/etc/prometheus/alertmanager.yml " + " ".join(labels)
        )

    assert route("alertname=GLMServerDown", "severity=critical", "node=gpu-1") == "lab-hook,lab-mail"
    assert route("alertname=GLMKVCacheFull", "severity=warning", "node=gpu-1") == "lab-hook"
    assert route("alertname=Other", "severity=info") == "glm-fleet-nobody"


def test_alert_rules_pass_promtools_unit_tests(host) -> None:  # noqa: ANN001
    """Each alert fires on synthetic series that should fire it, and not on those that should not."""
    host.ansible(
        "copy", f"src={HERE / 'alerts_test.yml'} dest=/root/alerts_test.yml mode=0644", become=True, check=False
    )
    result = host.run("promtool test rules /root/alerts_test.yml")
    assert result.rc == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_target_is_up(host) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 60
    while True:
        found = {(t["labels"]["job"], t["health"]) for t in targets(host)}
        jobs = {job for job, health in found if health == "up"}
        if {"prometheus", "glm-sglang", "glm-health-generate", "glm-node"} <= jobs or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {"prometheus", "glm-sglang", "glm-health-generate", "glm-node"} <= jobs, targets(host)
    assert all(health == "up" for _job, health in found), targets(host)


def test_the_servers_metrics_and_its_generation_probe_reach_prometheus(host) -> None:  # noqa: ANN001
    running = query(host, 'sglang:num_running_reqs{job="glm-sglang"}')
    assert running, "no sglang:num_running_reqs in Prometheus"
    assert running[0]["metric"]["node"] == host.backend.host
    assert running[0]["metric"]["model_name"] == "zai-org/GLM-5.3-Flash"
    probe = query(host, 'probe_success{job="glm-health-generate"}')
    assert [p["value"][1] for p in probe] == ["1"], probe
    assert probe[0]["metric"]["instance"].endswith(":18099")
