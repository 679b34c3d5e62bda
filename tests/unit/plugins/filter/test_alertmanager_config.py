"""Alertmanager's routes: each receiver gets the severities it asked for, a node's other alerts wait
while it is down, and bad receivers are refused by index and field without repeating a URL."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.glm.fleet.plugins.filter.alertmanager_config import alertmanager_config

HOOK = "https://hooks.example.org/services/T0KEN-s3cret"
TIMES = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}
SMTP = {"smarthost": "mail.example.org:587", "from": "glm@example.org", "auth_username": "glm",
        "auth_password": "relay-pass", "require_tls": True}  # fmt: skip


def build(receivers: Any, **kwargs: Any) -> dict:
    return alertmanager_config(receivers, **{**TIMES, **kwargs})


def test_each_receiver_gets_its_severities_and_the_next_route_sees_them_too() -> None:
    config = build(
        [{"name": "oncall", "severities": ["critical"], "webhook_url": HOOK},
         {"name": "llm-ops", "email_to": "llm-ops@example.org"}],
        smtp=SMTP,
    )  # fmt: skip
    route = config["route"]
    assert route["receiver"] == "glm-fleet-nobody"
    assert route["group_by"] == ["alertname", "node", "developer"]
    assert (route["group_wait"], route["group_interval"], route["repeat_interval"]) == ("30s", "5m", "4h")
    assert route["routes"] == [
        {"receiver": "oncall", "matchers": ['severity=~"critical"'], "continue": True},
        {"receiver": "llm-ops", "matchers": ['severity=~"critical|warning"'], "continue": True},
    ]
    assert config["receivers"] == [
        {"name": "glm-fleet-nobody"},
        {"name": "oncall", "webhook_configs": [{"url": HOOK, "send_resolved": True}]},
        {"name": "llm-ops", "email_configs": [{"to": "llm-ops@example.org", "send_resolved": True}]},
    ]
    assert config["global"] == {
        "smtp_smarthost": "mail.example.org:587", "smtp_from": "glm@example.org", "smtp_require_tls": True,
        "smtp_auth_username": "glm", "smtp_auth_password": "relay-pass",
    }  # fmt: skip


def test_a_node_that_is_down_holds_back_its_other_alerts() -> None:
    assert build([])["inhibit_rules"] == [
        {"source_matchers": ['alertname="GLMNodeDown"'], "target_matchers": ['alertname!="GLMNodeDown"'],
         "equal": ["node"]},
    ]  # fmt: skip


def test_without_receivers_alerts_go_to_nobody_and_no_mail_settings_are_needed() -> None:
    config = build([])
    assert "global" not in config
    assert config["route"]["routes"] == []
    assert config["receivers"] == [{"name": "glm-fleet-nobody"}]


def test_plain_http_only_to_loopback_unless_allowed() -> None:
    lab = "http://172.30.253.1:8095/hooks/t0ken"
    with pytest.raises(AnsibleFilterError) as refused:
        build([{"name": "lab", "webhook_url": lab}])
    assert "monitoring_alert_receivers[0] (lab).webhook_url is http:// to 172.30.253.1" in str(refused.value)
    assert "t0ken" not in str(refused.value)
    assert build([{"name": "lab", "webhook_url": lab}], allow_insecure_http=True)["receivers"][1]["webhook_configs"]
    assert build([{"name": "local", "webhook_url": "http://127.0.0.1:9000/x"}])["receivers"][1]["name"] == "local"


@pytest.mark.parametrize(
    ("receivers", "smtp", "message"),
    [
        ([{"name": "a b", "webhook_url": HOOK}], {}, "monitoring_alert_receivers[0].name must be letters"),
        ([{"name": "glm-fleet-nobody", "webhook_url": HOOK}], {}, "(not glm-fleet-nobody)"),
        (
            [{"name": "x"}],
            {},
            "monitoring_alert_receivers[0] (x): give exactly one of webhook_url and email_to; got: neither",
        ),
        ([{"name": "x", "webhook_url": HOOK, "email_to": "a@b.org"}], SMTP, "exactly one of webhook_url and email_to"),
        ([{"name": "x", "webhook_url": HOOK, "severities": ["page"]}], {}, "(x).severities must be a non-empty list"),
        ([{"name": "x", "webhook_url": HOOK, "severities": []}], {}, "(x).severities must be a non-empty list"),
        ([{"name": "x", "webhook_url": HOOK, "channel": "#ops"}], {}, "(x): unknown fields ['channel']"),
        (
            [{"name": "x", "webhook_url": "hooks.example.org/T0KEN-s3cret"}],
            {},
            "(x).webhook_url must be an https:// URL",
        ),
        ([{"name": "x", "webhook_url": HOOK + "\nX-Evil: 1"}], {}, "(x).webhook_url holds a space or a control"),
        ([{"name": "x", "email_to": "ops"}], SMTP, "(x).email_to must be one e-mail address; got: 'ops'"),
        ([{"name": "x", "email_to": "ops@example.org"}], {}, "monitoring_alert_smtp_smarthost must be the mail relay"),
        ([{"name": "x", "email_to": "ops@example.org"}], {**SMTP, "from": "glm"}, "monitoring_alert_smtp_from must be"),
        ([{"name": "x", "email_to": "ops@example.org"}], {**SMTP, "auth_password": ""}, "smtp_auth_password is empty"),
        ([{"name": "x", "webhook_url": HOOK}, {"name": "x", "email_to": "o@example.org"}], SMTP, "used twice: ['x']"),
        ("oncall", {}, "monitoring_alert_receivers must be a list; got: str"),
        (["oncall"], {}, "monitoring_alert_receivers[0] must be a mapping; got: str"),
    ],
)
def test_bad_receivers_are_refused_by_index_and_field_never_with_the_url(
    receivers: Any, smtp: dict, message: str
) -> None:
    with pytest.raises(AnsibleFilterError) as refused:
        build(receivers, smtp=smtp)
    assert message in str(refused.value)
    assert "T0KEN-s3cret" not in str(refused.value)
    assert "relay-pass" not in str(refused.value)
