"""The deployment's checks: the role's defaults pass; each bad value is named, JSON-escaped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.glm.fleet.plugins.filter.deployment_problems import deployment_problems

REPO = Path(__file__).resolve().parents[4]  # the collection (plugin tests also run under ansible-test units)

DEFAULTS = yaml.safe_load((REPO / "roles" / "deployment" / "defaults" / "main.yml").read_text())


def test_the_collections_deployment_is_fit() -> None:
    assert deployment_problems(DEFAULTS) == []


def test_a_floating_address_and_a_name_of_the_front_door_are_fit() -> None:
    settings = {
        **DEFAULTS,
        "deployment_gateway_address": "10.0.10.60",
        "deployment_gateway_name": "glm.example.internal",
    }
    assert deployment_problems(settings) == []


def test_the_lab_runs_the_sglang_release_the_deployment_records() -> None:
    """The lab's stand-in image holds the pinned wheel's SGLang; the deployment records the same."""
    deps = (REPO / "tests" / "lab" / "standin_deps.py").read_text()
    assert f'SGLANG_VERSION = "{DEFAULTS["deployment_sglang_version"]}"' in deps


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"deployment_image": "lmsysorg/sglang:glm-5.3-flash"}, "deployment_image must be pinned by digest"),
        ({"deployment_image": DEFAULTS["deployment_image"] + "\n"}, '\\n"'),
        (
            {"deployment_sglang_version": "latest"},
            'deployment_sglang_version must be a release as Python packaging writes it, like 0.5.23; got: "latest"',
        ),
        ({"deployment_sglang_version": "0.5.23\n"}, 'got: "0.5.23\\n"'),
        ({"deployment_sglang_version": 0.5}, "got: 0.5"),
        ({"deployment_model_revision": "main"}, "deployment_model_revision must be a full 40-hex commit"),
        ({"deployment_model_revision": DEFAULTS["deployment_model_revision"] + "\n"}, "must be a full 40-hex commit"),
        (
            {"deployment_model_repo_id": "../../etc"},
            'deployment_model_repo_id must be ORG/NAME (letters, digits, . _ -); got: "../../etc"',
        ),
        ({"deployment_served_model_name": "glm %Z"}, "deployment_served_model_name must be a model name"),
        ({"deployment_served_model_name": ""}, 'got: ""'),
        ({"deployment_tp_size": 0}, "deployment_tp_size must be whole numbers of at least 1; got: [0]"),
        (
            {"deployment_context_length": "-5"},
            'deployment_context_length must be whole numbers of at least 1; got: ["-5"]',
        ),
        ({"deployment_ep_size": 8}, "deployment_ep_size (8) must equal deployment_tp_size (4)"),
        ({"deployment_usage_label_header": "x-custom-labels"}, "must be a header name that begins x-request-id-"),
        ({"deployment_usage_label_header": "x-request-id-"}, 'got: "x-request-id-"'),
        (
            {"deployment_usage_label_header": "x-request-id-l\r\nX-Api-Key: k"},
            'got: "x-request-id-l\\r\\nX-Api-Key: k"',
        ),
        (
            {"deployment_gateway_address": "127.0.0.1"},
            "deployment_gateway_address must be empty or one IPv4 address of the gateway hosts' LAN"
            ' (not loopback, multicast or 0.0.0.0); got: "127.0.0.1"',
        ),
        ({"deployment_gateway_address": "10.0.10.60/24"}, 'got: "10.0.10.60/24"'),
        ({"deployment_gateway_address": "fd00::60"}, 'got: "fd00::60"'),
        ({"deployment_gateway_address": "224.0.0.18"}, 'got: "224.0.0.18"'),
        ({"deployment_gateway_name": "glm fleet.example"}, "deployment_gateway_name must be empty or a DNS name"),
        ({"deployment_gateway_name": "-glm.example"}, 'got: "-glm.example"'),
    ],
)
def test_a_bad_value_is_named(change: dict, expected: str) -> None:
    problems = deployment_problems({**DEFAULTS, **change})
    assert len(problems) == 1, problems
    assert expected in problems[0]


OWN_KEY = "lk_" + "a1" * 20


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["alice"], "deployment_developer_lyceum_keys must be a mapping of developer name to Lyceum key; got list"),
        ({"alice": "sk-" + "a" * 40}, 'values not shown); wrong for: ["alice"]'),
        ({"alice": OWN_KEY + "\n"}, 'wrong for: ["alice"]'),
        ({"alice": ""}, 'wrong for: ["alice"]'),
        ({"a lice": OWN_KEY}, 'developer names are letters, digits, ., _ and -; got: ["a lice"]'),
        ({"alice": OWN_KEY, "bob": OWN_KEY}, "gives two developers the same key (values not shown)"),
    ],
)
def test_a_developers_lyceum_key_is_their_own_and_never_shown(keys: object, expected: str) -> None:
    problems = deployment_problems({**DEFAULTS, "deployment_developer_lyceum_keys": keys})
    assert len(problems) == 1, problems
    assert expected in problems[0]
    assert OWN_KEY not in problems[0]
    assert "a" * 40 not in problems[0]


def test_developers_with_keys_of_their_own_are_fit() -> None:
    keys = {"alice": OWN_KEY, "bob-thinkpad.example.internal": "lk_" + "b2" * 20}
    assert deployment_problems({**DEFAULTS, "deployment_developer_lyceum_keys": keys}) == []
