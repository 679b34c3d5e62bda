"""Each developer's limits at the gateway: the defaults, a developer's own over them, and bad input refused
with the variable and the value named."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.filter.gateway_limits import gateway_limit_problems, gateway_limits

DEFAULTS = {"concurrency": 16, "requests_per_minute": "300", "burst": 16, "tokens_per_minute": "600000"}
DEVELOPERS = ["laptop-1", "alice", "bob.smith"]
WHOLE = "must be a whole number from 1 to 999999; got:"
TOKENS = "must be a whole number from 1 to 999999999; got:"
KNOWN = "concurrency, requests_per_minute, burst, tokens_per_minute"
ALICE = 'gateway_developer_limits["alice"]'


def test_the_defaults_hold_for_every_developer_without_an_override_of_their_own() -> None:
    limits = gateway_limits(DEVELOPERS, DEFAULTS, {"alice": {"concurrency": 2, "requests_per_minute": 7}})
    assert list(limits) == ["alice", "bob.smith", "laptop-1"]
    assert limits["laptop-1"] == limits["bob.smith"] == {
        "concurrency": 16, "requests_per_minute": 300, "burst": 16, "tokens_per_minute": 600000, "retry_after": 1,
        "rate_zone": "300_16",
    }  # fmt: skip
    # Seven a minute: a request's share is 8.6 s, rounded up; the burst is the default.
    assert limits["alice"] == {
        "concurrency": 2, "requests_per_minute": 7, "burst": 16, "tokens_per_minute": 600000, "retry_after": 9,
        "rate_zone": "7_16",
    }  # fmt: skip


def test_no_developer_no_limits() -> None:
    assert gateway_limits([], DEFAULTS, {}) == {}
    assert gateway_limit_problems([], DEFAULTS, {}) == []


@pytest.mark.parametrize(
    ("defaults", "overrides", "expected"),
    [
        (DEFAULTS, {}, []),
        (DEFAULTS | {"concurrency": 0}, {}, [f"gateway_developer_concurrency {WHOLE} 0"]),
        (DEFAULTS | {"requests_per_minute": -5}, {}, [f"gateway_developer_requests_per_minute {WHOLE} -5"]),
        (DEFAULTS | {"burst": "ten"}, {}, [f'gateway_developer_burst {WHOLE} "ten"']),
        (DEFAULTS | {"burst": True}, {}, [f"gateway_developer_burst {WHOLE} true"]),
        (DEFAULTS, {"mallory": {"concurrency": 4}},
         ['gateway_developer_limits["mallory"] names no developer of gateway_developers']),
        (DEFAULTS, {"alice": {"concurrency": 0}}, [f"{ALICE}.concurrency {WHOLE} 0"]),
        (DEFAULTS, {"alice": {"requests_per_minute": 1.5}}, [f"{ALICE}.requests_per_minute {WHOLE} 1.5"]),
        (DEFAULTS, {"alice": {"tokens": 1000}},
         [f'{ALICE} has unknown fields ["tokens"] (known: {KNOWN})']),
        (DEFAULTS, {"alice": {"tokens_per_minute": 0}}, [f"{ALICE}.tokens_per_minute {TOKENS} 0"]),
        (DEFAULTS | {"tokens_per_minute": -1}, {}, [f"gateway_developer_tokens_per_minute {TOKENS} -1"]),
        (DEFAULTS, {"alice": {"tokens_per_minute": 5000000}}, []),  # above what a request count may be
        (DEFAULTS, {"alice": 4},
         [f"{ALICE} must be a dict of concurrency, requests_per_minute, burst, tokens_per_minute; got: 4"]),
        (DEFAULTS, ["alice"], ['gateway_developer_limits must be a dict by developer name; got: ["alice"]']),
    ],
)  # fmt: skip
def test_bad_limits_are_named_with_their_value(defaults: dict[str, Any], overrides: Any, expected: list[str]) -> None:
    assert gateway_limit_problems(DEVELOPERS, defaults, overrides) == expected
