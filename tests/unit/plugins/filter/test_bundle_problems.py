"""A developer's onboarding bundle: the one glm.fleet.gateway writes passes; a bundle missing a field,
of another format or with a field of the wrong shape is refused with the field named, its key never
shown."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.filter.bundle_problems import bundle_problems

CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQk9p\nZm9v\n-----END CERTIFICATE-----"
KEY = "Zk3q9secretKEYvalue0123456789abcdef"
BUNDLE = {
    "format": 1, "developer": "alice", "base_url": "https://glm.example.internal:443", "ca_cert": CERT,
    "auth_token": KEY, "model": "zai-org/GLM-5.3-Flash", "context_length": 200000,
}  # fmt: skip


def test_the_gateways_bundle_passes_and_so_does_one_for_the_systems_cas() -> None:
    assert bundle_problems(BUNDLE) == []
    assert bundle_problems({**BUNDLE, "ca_cert": "", "context_length": "131072"}) == []
    assert bundle_problems({**BUNDLE, "ca_cert": CERT + "\n" + CERT + "\n"}) == []


@pytest.mark.parametrize(
    ("bundle", "expected"),
    [
        ("alice.yml", "claude_code_bundle must be a mapping of format, developer"),
        ({k: v for k, v in BUNDLE.items() if k not in ("model", "ca_cert")},
         "claude_code_bundle lacks ca_cert, model; it holds: auth_token, base_url, context_length, developer, format"),
        ({**BUNDLE, "format": 2}, "claude_code_bundle.format must be 1 (the bundles this collection writes); got: 2"),
        ({**BUNDLE, "expiry": "2027-01-01"}, 'claude_code_bundle has unknown fields ["expiry"]'),
        ({**BUNDLE, "developer": "../root"}, 'developer must be a developer\'s name; got: "../root"'),
        ({**BUNDLE, "base_url": ""}, 'claude_code_bundle.base_url must be a non-empty string; got: ""'),
        ({**BUNDLE, "context_length": 0}, "claude_code_bundle.context_length must be a whole number of tokens; got: 0"),
        ({**BUNDLE, "context_length": True}, "context_length must be a whole number of tokens; got: true"),
        ({**BUNDLE, "ca_cert": "not a pem\nsecond line"}, 'ca_cert must be PEM certificates (or empty for the system\'s'
                                                          ' CAs); it begins: "not a pem"'),
        ({**BUNDLE, "ca_cert": CERT + "\n-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n"},
         "claude_code_bundle.ca_cert holds a private key: a bundle carries the CA's certificate only"),
    ],
    ids=["not-a-mapping", "missing", "format", "unknown-field", "developer", "url", "zero-context", "bool-context",
         "not-pem", "private-key"],
)  # fmt: skip
def test_a_bad_bundle_is_refused_with_the_field_named(bundle: Any, expected: str) -> None:
    problems = bundle_problems(bundle)
    assert len(problems) == 1, problems
    assert expected in problems[0]


@pytest.mark.parametrize("token", ["", 42, None])
def test_a_bad_key_is_named_never_shown(token: Any) -> None:
    problems = bundle_problems({**BUNDLE, "auth_token": token})
    assert problems == ["claude_code_bundle.auth_token must be a non-empty string; got: (not shown)"]
    assert all(KEY not in p for p in bundle_problems({**BUNDLE, "format": 1, "model": ""}))


def test_a_developers_own_lyceum_key_is_welcome_and_never_shown() -> None:
    own = {**BUNDLE, "lyceum_auth_token": "lk_" + "c3" * 20}
    assert bundle_problems(own) == []
    for token in ("", 7):
        problems = bundle_problems({**BUNDLE, "lyceum_auth_token": token})
        assert problems == ["claude_code_bundle.lyceum_auth_token must be a non-empty string; got: (not shown)"]


def test_a_bundle_whose_key_has_expired_is_refused() -> None:
    assert bundle_problems({**BUNDLE, "expires": "2999-01-01T00:00:00Z"}) == []
    assert bundle_problems({**BUNDLE, "expires": None}) == []
    assert bundle_problems({**BUNDLE, "expires": "2026-01-01T00:00:00Z"}) == [
        "claude_code_bundle.expires is 2026-01-01T00:00:00Z: this bundle's key has expired; ask your operator to renew"
        " it (they hand you a new bundle)"
    ]
    assert bundle_problems({**BUNDLE, "expires": "next year"}) == [
        'claude_code_bundle.expires must be YYYY-MM-DDTHH:MM:SSZ (UTC) or null; got: "next year"'
    ]
