# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Alertmanager's configuration for the fleet: its receivers, routed by severity."""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
---
name: alertmanager_config
short_description: Alertmanager's configuration for the fleet's alerts, routed by severity to the site's receivers
version_added: 0.1.0
description:
  - Builds Alertmanager's configuration from C(monitoring_alert_receivers) and the role's grouping,
    e-mail and inhibition settings. Each receiver gets the alerts of its C(severities), by a route
    that lets the next route see them too (C(continue)); an alert no receiver takes goes to
    C(glm-fleet-nobody), a receiver that sends nothing.
  - Alerts are grouped by alert name, node and developer (a budget's alerts, one notification per
    developer); while C(GLMNodeDown) fires for a node, every other alert of that node is inhibited
    (the node's server, GPUs and probes are down because the node is).
  - Raises an error naming the receiver's index and field, never the URL (a webhook URL often holds
    a token), for a name that is not letters, digits, C(_) and C(-) or is used twice, a receiver
    with not exactly one of C(webhook_url) and C(email_to), an unknown severity, a webhook URL that
    is not https (http only to loopback, or with C(allow_insecure_http)), an address that is not
    one, and e-mail receivers without a relay and a sender.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description:
      - The receivers (C(monitoring_alert_receivers)), each C(name), C(severities) and one of
        C(webhook_url), C(email_to).
    type: list
    elements: dict
    required: true
  group_wait:
    description: How long a new group waits for more alerts before its first notification.
    type: str
    required: true
  group_interval:
    description: How long a group waits before it notifies again of a change (new or resolved alerts).
    type: str
    required: true
  repeat_interval:
    description: How long before a notification that changed nothing is sent again.
    type: str
    required: true
  smtp:
    description: C(smarthost), C(from), C(auth_username), C(auth_password), C(require_tls) for e-mail receivers.
    type: dict
    default: {}
  allow_insecure_http:
    description: Allow C(http://) webhook URLs to other hosts than this one.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Write Alertmanager's configuration
  ansible.builtin.copy:
    content: >-
      {{ monitoring_alert_receivers | glm.fleet.alertmanager_config(group_wait='30s', group_interval='5m',
         repeat_interval='4h') | to_nice_yaml }}
    dest: /etc/prometheus/alertmanager.yml
    owner: prometheus
    mode: "0600"
  no_log: true
"""

RETURN = r"""
_value:
  description: Alertmanager's configuration (C(global), C(route), C(receivers), C(inhibit_rules)).
  type: dict
"""

SEVERITIES = ("critical", "warning")
NOBODY = "glm-fleet-nobody"
NODE_DOWN = "GLMNodeDown"
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,62}")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
SMARTHOST = re.compile(r"[A-Za-z0-9.-]+:[0-9]{1,5}|\[[0-9A-Fa-f:]+\]:[0-9]{1,5}")
HOST = re.compile(r"[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _webhook_problem(url: Any, allow_insecure_http: bool) -> str:
    """What is wrong with a webhook URL, in words that do not repeat it."""
    text = str(url)
    if any(ord(c) < 33 or ord(c) == 127 for c in text):
        return "holds a space or a control character"
    parts = urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.netloc or not HOST.fullmatch(parts.hostname or ""):
        return "must be an https:// URL with a host"
    if parts.scheme == "http" and not allow_insecure_http and not _loopback(parts.hostname or ""):
        return (
            f"is http:// to {parts.hostname}: it must be https (http only to this host, or with "
            "monitoring_alert_allow_insecure_http=true), as the URL and the alerts would cross the network in clear"
        )
    return ""


def _receiver(index: int, item: Any, allow_insecure_http: bool) -> dict:
    if not isinstance(item, dict):
        raise AnsibleFilterError(f"monitoring_alert_receivers[{index}] must be a mapping; got: {type(item).__name__}")
    name = str(item.get("name", ""))
    where = f"monitoring_alert_receivers[{index}]"
    if not NAME.fullmatch(name) or name == NOBODY:
        raise AnsibleFilterError(f"{where}.name must be letters, digits, _ and - (not {NOBODY}); got: {name!r}")
    where = f"{where} ({name})"
    unknown = sorted(set(item) - {"name", "severities", "webhook_url", "email_to"})
    if unknown:
        raise AnsibleFilterError(
            f"{where}: unknown fields {unknown}; a receiver has name, severities and one of webhook_url, email_to"
        )
    severities = item.get("severities", list(SEVERITIES))
    if not isinstance(severities, list) or not severities or not set(map(str, severities)) <= set(SEVERITIES):
        raise AnsibleFilterError(
            f"{where}.severities must be a non-empty list of {list(SEVERITIES)}; got: {severities!r}"
        )
    kinds = [k for k in ("webhook_url", "email_to") if item.get(k)]
    if len(kinds) != 1:
        raise AnsibleFilterError(f"{where}: give exactly one of webhook_url and email_to; got: {kinds or 'neither'}")
    if kinds == ["webhook_url"]:
        problem = _webhook_problem(item["webhook_url"], allow_insecure_http)
        if problem:
            raise AnsibleFilterError(f"{where}.webhook_url {problem}")
        sink = {"webhook_configs": [{"url": str(item["webhook_url"]), "send_resolved": True}]}
    else:
        to = str(item["email_to"])
        if not EMAIL.fullmatch(to):
            raise AnsibleFilterError(f"{where}.email_to must be one e-mail address; got: {to!r}")
        sink = {"email_configs": [{"to": to, "send_resolved": True}]}
    return {"name": name, "severities": sorted(set(map(str, severities)), key=SEVERITIES.index), **sink}


def _smtp(smtp: dict) -> dict:
    smarthost, sender = str(smtp.get("smarthost") or ""), str(smtp.get("from") or "")
    if not SMARTHOST.fullmatch(smarthost):
        raise AnsibleFilterError(
            "monitoring_alert_smtp_smarthost must be the mail relay's host:port for the e-mail receivers; "
            f"got: {smarthost!r}"
        )
    if not EMAIL.fullmatch(sender):
        raise AnsibleFilterError(f"monitoring_alert_smtp_from must be the sender's e-mail address; got: {sender!r}")
    out = {"smtp_smarthost": smarthost, "smtp_from": sender, "smtp_require_tls": bool(smtp.get("require_tls", True))}
    if smtp.get("auth_username"):
        if not smtp.get("auth_password"):
            raise AnsibleFilterError(
                "monitoring_alert_smtp_auth_password is empty while monitoring_alert_smtp_auth_username is set"
            )
        out |= {"smtp_auth_username": str(smtp["auth_username"]), "smtp_auth_password": str(smtp["auth_password"])}
    return out


def alertmanager_config(
    receivers: Any,
    *,
    group_wait: str,
    group_interval: str,
    repeat_interval: str,
    smtp: dict | None = None,
    allow_insecure_http: bool = False,
) -> dict:
    if not isinstance(receivers, list):
        raise AnsibleFilterError(f"monitoring_alert_receivers must be a list; got: {type(receivers).__name__}")
    built = [_receiver(i, item, allow_insecure_http) for i, item in enumerate(receivers)]
    names = [r["name"] for r in built]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AnsibleFilterError(f"monitoring_alert_receivers: each name once; used twice: {twice}")
    config: dict[str, Any] = {}
    if any("email_configs" in r for r in built):
        config["global"] = _smtp(smtp or {})
    config["route"] = {
        "receiver": NOBODY,
        "group_by": ["alertname", "node", "developer"],
        "group_wait": group_wait,
        "group_interval": group_interval,
        "repeat_interval": repeat_interval,
        "routes": [
            {"receiver": r["name"], "matchers": [f'severity=~"{"|".join(r["severities"])}"'], "continue": True}
            for r in built
        ],
    }
    config["receivers"] = [{"name": NOBODY}] + [{k: v for k, v in r.items() if k != "severities"} for r in built]
    config["inhibit_rules"] = [
        {
            "source_matchers": [f'alertname="{NODE_DOWN}"'],
            "target_matchers": [f'alertname!="{NODE_DOWN}"'],
            "equal": ["node"],
        }
    ]
    return config


class FilterModule:
    def filters(self) -> dict:
        return {"alertmanager_config": alertmanager_config}
