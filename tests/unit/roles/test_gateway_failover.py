"""The front door's floating address (deployment_gateway_address): keepalived's configuration as the
gateway role renders it for each gateway host, the interface it finds from the host's routes, and
the names and URL that follow the address. Rendered with Ansible's own templating from the roles'
defaults and vars."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from conftest import REPO

from ansible_collections.glm.fleet.plugins.action.stage_receipt import trusted

GATEWAYS = {"cache-1": "10.0.10.5", "gw-2": "10.0.10.6"}
LAN_ROUTES = [
    {"dst": "default", "gateway": "10.0.10.1", "dev": "eth0", "flags": []},
    {"dst": "10.0.10.0/24", "dev": "bond0", "protocol": "kernel", "scope": "link", "prefsrc": "10.0.10.6"},
]


def context(host: str, routes: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "inventory_hostname": host,
        "ansible_host": GATEWAYS[host],
        "inventory_dir": "/site",
        "groups": {"all": list(GATEWAYS), "gateway": list(GATEWAYS)},
        "hostvars": {name: {"inventory_hostname": name, "ansible_host": a} for name, a in GATEWAYS.items()},
        "ansible_managed": "Ansible managed",
        "__gateway_vrrp_reads": {"results": [{"rc": 0, "stdout": json.dumps(routes)}, {"rc": 0}]},
    }
    for role, part in (("deployment", "defaults"), ("gateway", "defaults"), ("gateway", "vars")):
        out.update(trusted(yaml.safe_load((REPO / "roles" / role / part / "main.yml").read_text())))
    out.update({"deployment_gateway_address": "10.0.10.60", **settings})
    return out


def render(ctx: dict[str, Any], text: str) -> Any:
    return Templar(loader=DataLoader(), variables=ctx).template(trusted(text))


def keepalived_conf(ctx: dict[str, Any]) -> str:
    template = (REPO / "roles/gateway/templates/keepalived.conf.j2").read_text()
    return str(render(ctx, template.replace("{{ ansible_managed | comment }}", "# Ansible managed")))


def test_each_gateway_waits_as_a_backup_and_the_first_host_takes_the_address() -> None:
    confs = {host: keepalived_conf(context(host, LAN_ROUTES)) for host in GATEWAYS}
    priorities = {host: int(re.search(r"^\s+priority (\d+)$", conf, re.M).group(1)) for host, conf in confs.items()}
    assert priorities["cache-1"] > priorities["gw-2"]  # the group's first host wins at start
    for host, conf in confs.items():
        assert re.search(r"^\s+state BACKUP$", conf, re.M), host
        assert re.search(r"^\s+nopreempt$", conf, re.M), host  # no move back when the first returns
        assert re.search(r"^\s+advert_int 1$", conf, re.M), host
        assert re.search(r"^\s+virtual_router_id 51$", conf, re.M), host
        # the interface of the host's own route to the address, never the default route's
        assert re.search(r"^\s+interface bond0$", conf, re.M), host
        assert re.search(r"^\s+10\.0\.10\.60/32 dev bond0$", conf, re.M), host
        # it holds the address only while the front door's two services run
        assert 'script "/usr/bin/systemctl is-active --quiet nginx.service glm-gateway.service"' in conf
        assert re.search(r"^# glm\.fleet\.gateway: ", conf, re.M), "the marker preflight.yml looks for"


@pytest.mark.parametrize(
    ("routes", "interface", "expected"),
    [
        (LAN_ROUTES, "", "bond0"),
        ([{"dst": "default", "gateway": "10.0.10.1", "dev": "eth0"}], "", ""),  # only through a router
        ([{"dst": "10.0.10.0/24", "gateway": "10.0.9.1", "dev": "eth1"}], "", ""),
        ([], "", ""),
        ([], "eth7", "eth7"),  # the site names it
    ],
    ids=["lan", "default-only", "routed", "none", "given"],
)
def test_the_address_goes_on_the_interface_of_the_hosts_own_route(
    routes: list[dict[str, Any]], interface: str, expected: str
) -> None:
    ctx = context("gw-2", routes, gateway_vrrp_interface=interface)
    assert render(ctx, "{{ __gateway_vrrp_device }}") == expected


def test_without_a_floating_address_there_is_no_keepalived() -> None:
    ctx = context("cache-1", LAN_ROUTES, deployment_gateway_address="")
    assert render(ctx, "{{ __gateway_failover | bool }}") is False
    assert "keepalived" not in render(ctx, "{{ __gateway_packages }}")
    assert "keepalived.service" not in render(ctx, "{{ __gateway_receipt.units }}")
    assert render(ctx, "{{ deployment_gateway_url }}") == "https://10.0.10.5:443"  # the first gateway host
    assert render(ctx, "{{ gateway_tls_names }}") == ["cache-1", "10.0.10.5"]


def test_the_address_and_the_name_are_in_every_certificate_and_the_url_follows_them() -> None:
    ctx = context("gw-2", LAN_ROUTES)
    assert render(ctx, "{{ deployment_gateway_url }}") == "https://10.0.10.60:443"
    assert render(ctx, "{{ gateway_tls_names }}") == ["gw-2", "10.0.10.6", "10.0.10.60"]
    assert "keepalived.service" in render(ctx, "{{ __gateway_receipt.units }}")
    named = context("gw-2", LAN_ROUTES, deployment_gateway_name="glm.example.internal")
    assert render(named, "{{ deployment_gateway_url }}") == "https://glm.example.internal:443"
    assert render(named, "{{ gateway_tls_names }}") == ["gw-2", "10.0.10.6", "10.0.10.60", "glm.example.internal"]
