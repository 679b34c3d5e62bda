"""The plain-http guard decides on the parsed host, not on the URL's text."""

from __future__ import annotations

import pytest

from ansible_collections.glm.fleet.plugins.filter.url_problem import url_problem


@pytest.mark.parametrize(
    "url",
    ["https://glm.example.internal", "https://glm.example.internal:8443/v1", "http://127.0.0.1:18080",
     "http://127.9.9.9", "http://localhost:18080", "http://[::1]:18080/anthropic"],
)  # fmt: skip
def test_fit_urls(url: str) -> None:
    assert url_problem(url, "v") == ""


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1@other.host", "must not carry user info"),
        ("https://user:pw@glm.example.internal", "must not carry user info"),
        ("http://127.other.host", "must be an https URL"),
        ("http://localhost.evil.example", "must be an https URL"),
        ("http://10.0.0.5:18080", "must be an https URL"),
        ("https://glm.example.internal\nexport X=$(id)", "no spaces or control characters"),
        ("https://glm.example.internal/ x", "no spaces or control characters"),
        ("ftp://glm.example.internal", "must be an http(s) URL with a host"),
        ("https://", "must be an http(s) URL with a host"),
        ("https://glm.example.internal:99999", "invalid port"),
        ("", "must be an http(s) URL"),
        (None, "must be an http(s) URL"),
    ],
)
def test_unfit_urls_name_the_variable_and_the_value(url: object, expected: str) -> None:
    problem = url_problem(url, "claude_code_fleet_base_url", False, "claude_code_allow_insecure_http")
    assert expected in problem
    assert problem.startswith("claude_code_fleet_base_url")


def test_http_beyond_this_machine_only_when_allowed() -> None:
    assert "claude_code_allow_insecure_http=true" in url_problem(
        "http://10.0.0.5", "v", False, "claude_code_allow_insecure_http"
    )
    assert url_problem("http://10.0.0.5", "v", True) == ""
    assert "user info" in url_problem("http://127.0.0.1@10.0.0.5", "v", True)  # allowing http allows no user info
