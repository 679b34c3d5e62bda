"""The fleet's Prometheus jobs come from what its hosts published; bad site jobs are refused by name."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.glm.fleet.plugins.filter.scrape_configs import scrape_configs

TARGETS: dict[str, Any] = {
    "sglang": {"gpu-2": ["http://10.0.0.12:18081", "http://10.0.0.12:18080"], "gpu-1": ["http://10.0.0.11:18080"],
               "cache-1": []},
    "gateway": {"cache-1": "http://10.0.0.5:29000"},
    "gateway_log": {"cache-1": "http://10.0.0.5:3903"},
    "node": {"gpu-1": "http://10.0.0.11:9100", "cache-1": "http://10.0.0.5:9100", "laptop": []},
}  # fmt: skip
GROUPS = {"all": ["gpu-1", "cache-1"], "site_cache": ["cache-1"], "empty": []}
HOSTVARS = {"cache-1": {"ansible_host": "10.0.0.5"}, "gpu-1": {}}


def jobs(configs: list[dict]) -> dict[str, dict]:
    return {c["job_name"]: c for c in configs}


def test_each_published_target_is_scraped_and_labelled_with_its_host() -> None:
    configs = jobs(scrape_configs(TARGETS, "127.0.0.1:9115"))
    assert list(configs) == ["glm-sglang", "glm-gateway", "glm-gateway-log", "glm-node", "glm-health-generate"]
    assert configs["glm-sglang"]["static_configs"] == [
        {"targets": ["10.0.0.11:18080"], "labels": {"node": "gpu-1"}},
        {"targets": ["10.0.0.12:18080", "10.0.0.12:18081"], "labels": {"node": "gpu-2"}},
    ]
    assert configs["glm-gateway"]["static_configs"] == [{"targets": ["10.0.0.5:29000"], "labels": {"node": "cache-1"}}]
    log = configs["glm-gateway-log"]["static_configs"]
    assert log == [{"targets": ["10.0.0.5:3903"], "labels": {"node": "cache-1"}}]
    assert [g["labels"]["node"] for g in configs["glm-node"]["static_configs"]] == ["cache-1", "gpu-1"]


def test_health_generate_is_probed_through_the_blackbox_exporter() -> None:
    probe = jobs(scrape_configs(TARGETS, "127.0.0.1:9115"))["glm-health-generate"]
    assert probe["metrics_path"] == "/probe"
    assert probe["params"] == {"module": ["glm_health_generate"]}
    assert probe["static_configs"] == jobs(scrape_configs(TARGETS, "127.0.0.1:9115"))["glm-sglang"]["static_configs"]
    relabel = probe["relabel_configs"]
    assert relabel[0]["replacement"] == "http://$1/health_generate"
    assert relabel[-1] == {"target_label": "__address__", "replacement": "127.0.0.1:9115"}


def test_each_gateways_front_door_is_probed_over_https_through_the_blackbox_exporter() -> None:
    targets = {**TARGETS, "gateway_https": {"cache-1": "https://10.0.0.5:443"}}
    probe = jobs(scrape_configs(targets, "127.0.0.1:9115"))["glm-gateway-https"]
    assert probe["params"] == {"module": ["glm_gateway_https"]}
    assert probe["static_configs"] == [{"targets": ["10.0.0.5:443"], "labels": {"node": "cache-1"}}]
    assert probe["relabel_configs"][0]["replacement"] == "https://$1/health"
    with pytest.raises(AnsibleFilterError, match="glm-gateway-https: a target must be an https://host:port URL"):
        scrape_configs({"gateway_https": {"cache-1": "http://10.0.0.5:443"}}, "127.0.0.1:9115")


def test_servers_behind_their_tls_front_are_scraped_and_probed_over_mutual_tls() -> None:
    tls = {
        "ca_file": "/etc/prometheus/s/ca.pem",
        "cert_file": "/etc/prometheus/s/c.pem",
        "key_file": "/etc/prometheus/s/c.key",
    }
    servers = {"gpu-1": ["https://10.0.0.11:18080"]}
    configs = jobs(scrape_configs({"sglang": servers}, "127.0.0.1:9115", tls=tls))
    assert configs["glm-sglang"]["scheme"] == "https"
    assert configs["glm-sglang"]["tls_config"] == tls
    assert configs["glm-sglang"]["static_configs"] == [{"targets": ["10.0.0.11:18080"], "labels": {"node": "gpu-1"}}]
    assert configs["glm-health-generate"]["relabel_configs"][0]["replacement"] == "https://$1/health_generate"
    # No other job presents the client certificate.
    plain = jobs(scrape_configs({**TARGETS, "sglang": servers}, "127.0.0.1:9115", tls=tls))
    assert [name for name, job in plain.items() if "tls_config" in job] == ["glm-sglang"]
    # Plain servers beside node exporters over TLS: the servers' job presents nothing.
    mixed = jobs(scrape_configs({**TARGETS, "node": {"gpu-1": "https://10.0.0.11:9100"}}, "127.0.0.1:9115", tls=tls))
    assert [name for name, job in mixed.items() if "tls_config" in job] == ["glm-node"]
    assert mixed["glm-health-generate"]["relabel_configs"][0]["replacement"] == "http://$1/health_generate"
    with pytest.raises(AnsibleFilterError, match="glm-sglang: https:// targets need tls"):
        scrape_configs({"sglang": servers}, "127.0.0.1:9115")
    with pytest.raises(AnsibleFilterError, match="tls must be null or"):
        scrape_configs({"sglang": servers}, "127.0.0.1:9115", tls={"ca_file": "/x"})


def test_node_exporters_that_require_a_client_certificate_are_scraped_over_mutual_tls() -> None:
    tls = {"ca_file": "/etc/p/ca.pem", "cert_file": "/etc/p/c.pem", "key_file": "/etc/p/c.key"}
    nodes = {"gpu-1": "https://10.0.0.11:9100", "cache-1": ["https://10.0.0.5:9100"]}
    configs = jobs(scrape_configs({"node": nodes}, "127.0.0.1:9115", tls=tls))
    assert (configs["glm-node"]["scheme"], configs["glm-node"]["tls_config"]) == ("https", tls)
    assert configs["glm-node"]["static_configs"] == [
        {"targets": ["10.0.0.5:9100"], "labels": {"node": "cache-1"}},
        {"targets": ["10.0.0.11:9100"], "labels": {"node": "gpu-1"}},
    ]
    # Plain node exporters with TLS servers: only the servers' job presents the certificate.
    both = jobs(
        scrape_configs({**TARGETS, "sglang": {"gpu-1": ["https://10.0.0.11:18080"]}}, "127.0.0.1:9115", tls=tls)
    )
    assert "scheme" not in both["glm-node"]
    with pytest.raises(AnsibleFilterError, match="glm-node: https:// targets need tls"):
        scrape_configs({"node": nodes}, "127.0.0.1:9115")
    with pytest.raises(AnsibleFilterError, match="glm-node: the targets mix http:// and https://"):
        scrape_configs({"node": {**nodes, "gpu-2": "http://10.0.0.12:9100"}}, "127.0.0.1:9115", tls=tls)


def test_dcgm_exporters_that_require_a_client_certificate_are_scraped_over_mutual_tls() -> None:
    tls = {"ca_file": "/etc/p/ca.pem", "cert_file": "/etc/p/c.pem", "key_file": "/etc/p/c.key"}
    dcgm = {"gpu-1": "https://10.0.0.11:9400", "gpu-2": "https://10.0.0.12:9400"}
    configs = jobs(
        scrape_configs({"dcgm": dcgm, "node": {"gpu-1": "http://10.0.0.11:9100"}}, "127.0.0.1:9115", tls=tls)
    )
    assert (configs["glm-dcgm"]["scheme"], configs["glm-dcgm"]["tls_config"]) == ("https", tls)
    assert configs["glm-dcgm"]["static_configs"] == [
        {"targets": ["10.0.0.11:9400"], "labels": {"node": "gpu-1"}},
        {"targets": ["10.0.0.12:9400"], "labels": {"node": "gpu-2"}},
    ]
    assert "scheme" not in configs["glm-node"]  # each kind by its own targets' scheme
    with pytest.raises(AnsibleFilterError, match="glm-dcgm: https:// targets need tls"):
        scrape_configs({"dcgm": dcgm}, "127.0.0.1:9115")
    with pytest.raises(AnsibleFilterError, match="glm-dcgm: the targets mix http:// and https://"):
        scrape_configs({"dcgm": {**dcgm, "gpu-3": "http://10.0.0.13:9400"}}, "127.0.0.1:9115", tls=tls)


def test_the_gateways_metrics_behind_mutual_tls_are_scraped_with_the_client_certificate() -> None:
    tls = {"ca_file": "/etc/p/ca.pem", "cert_file": "/etc/p/c.pem", "key_file": "/etc/p/c.key"}
    published = {"gateway": {"cache-1": "https://10.0.0.5:29000"}, "gateway_log": {"cache-1": "https://10.0.0.5:3903"}}
    configs = jobs(scrape_configs(published, "127.0.0.1:9115", tls=tls))
    for job, port in (("glm-gateway", 29000), ("glm-gateway-log", 3903)):
        assert (configs[job]["scheme"], configs[job]["tls_config"]) == ("https", tls)
        assert configs[job]["static_configs"] == [{"targets": [f"10.0.0.5:{port}"], "labels": {"node": "cache-1"}}]
    with pytest.raises(AnsibleFilterError, match="glm-gateway: https:// targets need tls"):
        scrape_configs(published, "127.0.0.1:9115")


def test_nothing_published_gives_no_jobs() -> None:
    assert scrape_configs({}, "127.0.0.1:9115") == []


def test_site_jobs_scrape_each_host_of_their_group_at_its_address() -> None:
    site = [
        {"name": "cache-http", "group": "site_cache", "port": 8080, "path": "/stats"},
        {"name": "none", "group": "empty", "port": 1},
    ]
    configs = jobs(scrape_configs({}, "127.0.0.1:9115", site, GROUPS, HOSTVARS))
    assert configs["cache-http"] == {
        "job_name": "cache-http", "metrics_path": "/stats",
        "static_configs": [{"targets": ["10.0.0.5:8080"], "labels": {"node": "cache-1"}}],
    }  # fmt: skip
    assert "none" not in configs  # a group without hosts gives no job


@pytest.mark.parametrize(
    ("site", "expected"),
    [
        ([{"name": "x", "group": "gpus", "port": 9400}], "monitoring_scrape_jobs[0] (x).group: 'gpus' is not a group"),
        ([{"name": "x", "group": "all", "port": 70000}], "[0] (x).port must be a port 1-65535; got: 70000"),
        ([{"name": "x", "group": "all", "port": "9x"}], "(x).port must be a port 1-65535; got: '9x'"),
        ([{"name": "x", "group": "all", "port": 1, "path": "metrics"}], "(x).path must be an absolute URL path"),
        ([{"name": "x y", "group": "all", "port": 1}], "monitoring_scrape_jobs[0] (x y): name must be letters"),
        ([{"name": "glm-sglang", "group": "all", "port": 1}], "the job name is used twice"),
        ([{"name": "a", "group": "all", "port": 1}, {"name": "a", "group": "all", "port": 2}],
         "[1] (a): the job name is used twice"),
        (["not-a-mapping"], "monitoring_scrape_jobs[0] (no name): name must be letters"),
    ],
    ids=["unknown-group", "port-range", "port-text", "relative-path", "name-space", "fleet-name", "duplicate",
         "not-a-dict"],
)  # fmt: skip
def test_bad_site_jobs_are_refused_by_name(site: list, expected: str) -> None:
    with pytest.raises(AnsibleFilterError) as e:
        scrape_configs(TARGETS, "127.0.0.1:9115", site, GROUPS, HOSTVARS)
    assert expected in str(e.value)


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.11", "http://10.0.0.11:18080/metrics", "http://a b:1", "http://x:1\n", "ftp://10.0.0.11:18080"],
)
def test_a_published_url_that_is_not_http_host_port_is_refused(url: str) -> None:
    with pytest.raises(AnsibleFilterError, match="a target must be an http://host:port URL"):
        scrape_configs({"sglang": {"gpu-1": [url]}}, "127.0.0.1:9115")


def test_the_gpu_nodes_dcgm_exporters_are_a_job_of_their_own() -> None:
    published = {**TARGETS, "dcgm": {"gpu-1": "http://10.0.0.11:9400", "gpu-2": "http://10.0.0.12:9400", "cache-1": []}}
    dcgm = jobs(scrape_configs(published, "127.0.0.1:9115"))["glm-dcgm"]
    assert dcgm["metrics_path"] == "/metrics"
    assert dcgm["static_configs"] == [
        {"targets": ["10.0.0.11:9400"], "labels": {"node": "gpu-1"}},
        {"targets": ["10.0.0.12:9400"], "labels": {"node": "gpu-2"}},
    ]
