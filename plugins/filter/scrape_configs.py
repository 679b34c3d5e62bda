# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus scrape configurations for the fleet, from what its hosts published."""

from __future__ import annotations

import re
from typing import Any

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: scrape_configs
short_description: Prometheus scrape configurations for the fleet's servers, gateway and hosts
version_added: 0.1.0
description:
  - Turns what the fleet's hosts published in this run into Prometheus C(scrape_configs), one job per
    kind, every target labelled with its inventory host (C(node)).
  - C(glm-sglang) scrapes each SGLang server's C(/metrics) (open without the API key; over mutual TLS
    with O(tls));
    C(glm-health-generate) probes each server's C(/health_generate) through the blackbox exporter
    (a real generation, no key needed); C(glm-gateway) the router's metrics; C(glm-gateway-log)
    the gateway's answers by status and developer (mtail over nginx's log); C(glm-node) node
    exporter; C(glm-dcgm) NVIDIA's DCGM exporter; C(glm-gateway-https) probes each gateway's
    C(/health) over HTTPS as clients reach it (the blackbox exporter's C(glm_gateway_https) module
    verifies the certificate and reports its expiry); then the site's own jobs.
  - Raises an error naming the job and the value for a URL that is not C(http://host:port), a job
    name that is not letters, digits, C(_) and C(-) or is used twice, a group the inventory does not
    have, a port outside 1-65535 or a path that is not absolute.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description:
      - Targets by kind, each a mapping of inventory host to a list of C(http://address:port) URLs
        (keys C(sglang), C(gateway), C(gateway_log), C(node), C(dcgm)), and C(gateway_https), each
        gateway's C(https://address:port) front door.
    type: dict
    required: true
  jobs:
    description: The site's own jobs (C(monitoring_scrape_jobs)), each C(name), C(group), C(port) and C(path).
    type: list
    elements: dict
    default: []
  groups:
    description: The inventory's C(groups), where each job's group is looked up.
    type: dict
  hostvars:
    description: The inventory's C(hostvars), for each host's C(ansible_host).
    type: dict
  blackbox:
    description: The blackbox exporter's C(address:port), which probes C(/health_generate).
    type: str
    required: true
  tls:
    description:
      - The servers behind their TLS front (C(sglang_server_tls)), whose targets are then
        C(https://host:port); the files Prometheus and the blackbox exporter present and verify with,
        C(ca_file) (the site CA), C(cert_file) and C(key_file) (the monitoring host's client certificate).
      - C(glm-sglang) scrapes over mutual TLS, and C(glm-health-generate) probes C(https://), when the servers'
        targets are C(https://host:port) (behind their TLS fronts); C(glm-node) when node exporters' are
        (glm.fleet.exporters' C(exporters_node_tls)), C(glm-dcgm) when the DCGM exporters' are
        (C(exporters_dcgm_tls)), C(glm-gateway) and C(glm-gateway-log) when the gateways' are (glm.fleet.gateway's
        C(gateway_metrics_tls)). Each needs O(tls); a kind's targets are all C(http://) or all C(https://).
    type: dict
"""

EXAMPLES = r"""
- name: Write Prometheus' configuration
  ansible.builtin.copy:
    content: "{{ {'scrape_configs': targets | glm.fleet.scrape_configs(blackbox='127.0.0.1:9115')} | to_nice_yaml }}"
    dest: /etc/prometheus/prometheus.yml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The C(scrape_configs) list, jobs in a fixed order, targets sorted.
  type: list
  elements: dict
"""

KINDS = (("sglang", "glm-sglang", "/metrics"), ("gateway", "glm-gateway", "/metrics"),
         ("gateway_log", "glm-gateway-log", "/metrics"), ("node", "glm-node", "/metrics"),
         ("dcgm", "glm-dcgm", "/metrics"))  # fmt: skip
JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,62}")
PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
HOST_PORT = re.compile(r"[A-Za-z0-9.-]+:[0-9]{1,5}|\[[0-9A-Fa-f:]+\]:[0-9]{1,5}")
TARGET_URL = re.compile(rf"http://({HOST_PORT.pattern})/?")
HTTPS_URL = re.compile(rf"https://({HOST_PORT.pattern})/?")


def _address(job: str, url: str, scheme: str = "http") -> str:
    """host:port of http://host:port[/] (or https://), matched on the whole text (urlsplit drops line breaks)."""
    found = (HTTPS_URL if scheme == "https" else TARGET_URL).fullmatch(str(url))
    if not found:
        raise AnsibleFilterError(f"{job}: a target must be an {scheme}://host:port URL; got: {url!r}")
    return found.group(1)


def _static(job: str, by_host: dict, scheme: str = "http") -> list[dict]:
    """One static config per inventory host, its targets sorted, labelled with the host."""
    groups = []
    for host in sorted(by_host):
        urls = by_host[host] or []
        if isinstance(urls, str):
            urls = [urls]
        targets = sorted({_address(job, u, scheme) for u in urls})
        if targets:
            groups.append({"targets": targets, "labels": {"node": str(host)}})
    return groups


PROBES = (("glm-health-generate", "sglang", "http", "glm_health_generate", "http://$1/health_generate"),
          ("glm-gateway-https", "gateway_https", "https", "glm_gateway_https", "https://$1/health"))  # fmt: skip
TLS_FILES = ("ca_file", "cert_file", "key_file")


def _https(job: str, by_host: Any) -> bool:
    """Whether a kind's targets are https:// (all of them) or http:// (all of them)."""
    urls = [str(u) for urls in (by_host or {}).values() for u in ([urls] if isinstance(urls, str) else urls or [])]
    schemes = {u.split("://", 1)[0] for u in urls}
    if len(schemes) > 1:
        raise AnsibleFilterError(f"{job}: the targets mix http:// and https://; got: {sorted(urls)!r}")
    return schemes == {"https"}


def _over_tls(kind: str, job: str, by_host: Any, tls: dict | None) -> bool:
    """Whether a kind's job scrapes over mutual TLS: the servers', node and DCGM exporters', the
    router's and the gateway's answers' where their targets are https://."""
    over_tls = kind in ("sglang", "node", "dcgm", "gateway", "gateway_log") and _https(job, by_host)
    if over_tls and tls is None:
        raise AnsibleFilterError(f"{job}: https:// targets need tls, the client certificate Prometheus presents")
    return over_tls


def _tls(tls: Any) -> dict | None:
    if tls is None:
        return None
    if not isinstance(tls, dict) or set(tls) != set(TLS_FILES) or not all(PATH.fullmatch(str(v)) for v in tls.values()):
        raise AnsibleFilterError(
            f"scrape_configs: tls must be null or {{ca_file, cert_file, key_file}} paths; got: {tls!r}"
        )
    return {key: str(tls[key]) for key in TLS_FILES}


def _probes(targets: dict, blackbox: str, tls: dict | None = None) -> list[dict]:
    """The blackbox exporter's jobs: each target's URL probed with the job's module, labelled with
    the target's host:port (instance) and inventory host (node)."""
    configs = []
    for job, kind, plain_scheme, module, plain_url in PROBES:
        over_tls = kind == "sglang" and _over_tls(kind, job, targets.get(kind), tls)
        scheme = "https" if over_tls else plain_scheme
        url = plain_url.replace("http://", "https://") if over_tls else plain_url
        static = _static(job, targets.get(kind) or {}, scheme)
        if static:
            configs.append({
                "job_name": job, "metrics_path": "/probe", "params": {"module": [module]},
                "static_configs": static,
                "relabel_configs": [
                    {"source_labels": ["__address__"], "target_label": "__param_target", "replacement": url},
                    {"source_labels": ["__address__"], "target_label": "instance"},
                    {"target_label": "__address__", "replacement": blackbox},
                ],
            })  # fmt: skip
    return configs


def scrape_configs(  # noqa: PLR0917 - a Jinja filter's keyword options
    targets: dict,
    blackbox: str,
    jobs: list | None = None,
    groups: dict | None = None,
    hostvars: Any = None,
    tls: Any = None,
) -> list[dict]:
    if not isinstance(targets, dict):
        raise AnsibleFilterError(f"scrape_configs expects a mapping of targets; got: {type(targets).__name__}")
    if not HOST_PORT.fullmatch(str(blackbox)):
        raise AnsibleFilterError(f"scrape_configs: blackbox must be address:port; got: {blackbox!r}")
    servers_tls = _tls(tls)
    configs = []
    for kind, job, path in KINDS:
        over_tls = _over_tls(kind, job, targets.get(kind), servers_tls)
        static = _static(job, targets.get(kind) or {}, "https" if over_tls else "http")
        if static:
            configs.append({"job_name": job, "metrics_path": path, "static_configs": static})
            if over_tls:
                configs[-1].update({"scheme": "https", "tls_config": dict(servers_tls)})
    configs += _probes(targets, str(blackbox), servers_tls)
    names = {c["job_name"] for c in configs}
    for index, job in enumerate(jobs or []):
        name = str(job.get("name", "")) if isinstance(job, dict) else ""
        where = f"monitoring_scrape_jobs[{index}] ({name or 'no name'})"
        if not isinstance(job, dict) or not JOB_NAME.fullmatch(name):
            raise AnsibleFilterError(f"{where}: name must be letters, digits, _ and - ; got: {job!r}")
        if name in names:
            raise AnsibleFilterError(f"{where}: the job name is used twice (glm-* names are the fleet's own)")
        group, port, path = job.get("group"), job.get("port"), str(job.get("path", "/metrics"))
        if group not in (groups or {}):
            raise AnsibleFilterError(f"{where}.group: {group!r} is not a group of the inventory")
        if not str(port).isdigit() or not 1 <= int(port) <= 65535:
            raise AnsibleFilterError(f"{where}.port must be a port 1-65535; got: {port!r}")
        if not PATH.fullmatch(path):
            raise AnsibleFilterError(f"{where}.path must be an absolute URL path; got: {path!r}")
        names.add(name)
        hosts = groups[group]
        by_host = {h: [f"http://{(hostvars or {}).get(h, {}).get('ansible_host', h)}:{int(port)}"] for h in hosts}
        static = _static(where, by_host)
        if static:
            configs.append({"job_name": name, "metrics_path": path, "static_configs": static})
    return configs


class FilterModule:
    def filters(self) -> dict:
        return {"scrape_configs": scrape_configs}
