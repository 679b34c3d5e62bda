"""The monitoring host presents its client certificate where the fleet's hosts published https://
targets: the servers behind their TLS fronts, node or DCGM exporters that require a client
certificate, or any of them; rendered with Ansible's own templating from the role's vars."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import REPO

from ansible_collections.glm.fleet.plugins.action.stage_receipt import trusted

HOSTS = ["gpu-1", "cache-1"]


def servers_tls(published: dict[str, dict[str, Any]]) -> bool:
    role_vars = trusted(yaml.safe_load((REPO / "roles" / "monitoring" / "vars" / "main.yml").read_text()))
    context = {**role_vars, "groups": {"all": HOSTS}, "hostvars": published}
    return Templar(loader=DataLoader(), variables=context).template(role_vars["__monitoring_servers_tls"])


@pytest.mark.parametrize(
    ("servers", "node", "dcgm", "expected"),
    [
        ("http", "http", "http", False),
        ("https", "http", "http", True),
        ("http", "https", "http", True),
        ("http", "http", "https", True),
        ("https", "https", "https", True),
    ],
)
def test_the_client_certificate_goes_where_a_target_is_https(
    servers: str, node: str, dcgm: str, expected: bool
) -> None:
    published = {
        "gpu-1": {"sglang_server_endpoints": [f"{servers}://10.0.0.11:18080"],
                  "exporters_node_url": f"{node}://10.0.0.11:9100", "exporters_dcgm_url": f"{dcgm}://10.0.0.11:9400"},
        "cache-1": {"exporters_node_url": f"{node}://10.0.0.5:9100"},
    }  # fmt: skip
    assert servers_tls(published) is expected


def test_the_client_certificate_goes_where_the_gateways_metrics_are_https() -> None:
    gateway = {"gateway_metrics_url": "https://10.0.0.5:29000", "gateway_log_metrics_url": "https://10.0.0.5:3903"}
    published = {"gpu-1": {}, "cache-1": gateway}
    assert servers_tls(published) is True
    plain = {"gpu-1": {}, "cache-1": {"gateway_metrics_url": "http://10.0.0.5:29000"}}
    assert servers_tls(plain) is False
