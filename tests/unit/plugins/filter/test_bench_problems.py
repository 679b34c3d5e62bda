"""The serving benchmark's settings are refused with the variable and the value, the key never shown."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.filter.bench_problems import bench_problems

GOOD: dict[str, Any] = {
    "bench_serving_concurrency": [1, 2, 4, 8, 16, 32, 64, 128, 256],
    "bench_serving_input_tokens": 1024,
    "bench_serving_output_tokens": 1024,
    "bench_serving_requests_per_client": 4,
    "bench_serving_gpu_hour_usd": 4.0,
    "bench_serving_cost_min_user_tps": "140",
    "bench_serving_hosted": {"name": "Lyceum", "input": 0.2, "cached_input": 0.05, "output": 0.5},
    "bench_serving_targets": ["https://10.0.0.5:443"],
    "bench_serving_api_key": "k" * 48,
    "context_length": 200000,
    "bench_serving_profiles": ["synthetic", "claude_code"],
    "bench_serving_claude_code_concurrency": [1, 4, 16, 64],
    "bench_serving_claude_code_sessions_per_client": 1,
    "bench_serving_claude_code_turns": 8,
    "bench_serving_claude_code_system_tokens": 12000,
    "bench_serving_claude_code_context_tokens": 4000,
    "bench_serving_claude_code_turn_tokens": 4000,
    "bench_serving_claude_code_output_tokens": 800,
}


def test_good_settings() -> None:
    assert bench_problems(GOOD) == []


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("bench_serving_concurrency", [],
         "bench_serving_concurrency must be a list of distinct whole numbers 1-4096; got: []"),
        ("bench_serving_concurrency", [1, 1], "got: [1, 1]"),
        ("bench_serving_concurrency", [0, 8], "got: [0, 8]"),
        ("bench_serving_concurrency", [8, 5000], "got: [8, 5000]"),
        ("bench_serving_concurrency", "1,8", 'got: "1,8"'),
        ("bench_serving_input_tokens", "12\n",
         'bench_serving_input_tokens must be a whole number above 0; got: "12\\n"'),
        ("bench_serving_output_tokens", 0, "bench_serving_output_tokens must be a whole number above 0; got: 0"),
        ("bench_serving_requests_per_client", True, "got: true"),
        ("bench_serving_output_tokens", 199000,
         "bench_serving_input_tokens + bench_serving_output_tokens (1024 + 199000) exceed the fleet's context length"),
        ("bench_serving_gpu_hour_usd", -1, "bench_serving_gpu_hour_usd must be a positive number; got: -1"),
        ("bench_serving_cost_min_user_tps", "fast", 'got: "fast"'),
        ("bench_serving_hosted", {"input": 0.2, "output": 0.5},
         "bench_serving_hosted must hold input, cached_input and output prices"),
        ("bench_serving_profiles", [],
         "bench_serving_profiles must list synthetic, claude_code or both, each once; got: []"),
        ("bench_serving_profiles", ["claude"], 'got: ["claude"]'),
        ("bench_serving_profiles", ["synthetic", "synthetic"], 'got: ["synthetic", "synthetic"]'),
        ("bench_serving_claude_code_concurrency", [0],
         "bench_serving_claude_code_concurrency must be a list of distinct"),
        ("bench_serving_claude_code_turns", 0,
         "bench_serving_claude_code_turns must be a whole number above 0; got: 0"),
        ("bench_serving_claude_code_system_tokens", "-5", 'got: "-5"'),
        ("bench_serving_claude_code_turns", 40,
         "a conversation's last request of bench_serving_claude_code_* (12000 + 4000 + 40 x 4000 + 39 x 800 = 207200 "
         "tokens) plus its answer (800) exceeds the fleet's context length, deployment_context_length (200000)"),
        ("bench_serving_targets", [], "bench_serving_targets must list at least one URL; got: []"),
        ("bench_serving_targets", ["https://gw\n.example"],
         'bench_serving_targets: "https://gw\\n.example" must hold no'),
        ("bench_serving_targets", ["ftp://gw"], "must be an http(s) URL with a host"),
        ("bench_serving_api_key", "", "bench_serving_api_key is empty: set it to a developer's gateway key"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_variable_and_value(name: str, value: Any, expected: str) -> None:
    problems = bench_problems({**GOOD, name: value})
    assert len(problems) == 1, problems
    assert expected in problems[0]


@pytest.mark.parametrize("key", ["secret-key\r\nX-Injected: 1", " secret-key", "secret\tkey"])
def test_a_key_that_would_break_the_header_is_refused_and_not_shown(key: str) -> None:
    problems = bench_problems({**GOOD, "bench_serving_api_key": key})
    assert problems == ["bench_serving_api_key holds a control character or surrounding space (not shown): it goes "
                        "into an HTTP header"]  # fmt: skip
    assert "secret" not in problems[0]


def test_the_claude_code_profile_is_not_checked_when_it_does_not_run() -> None:
    assert bench_problems({**GOOD, "bench_serving_profiles": ["synthetic"], "bench_serving_claude_code_turns": 0}) == []


def test_the_last_request_that_just_fits_is_accepted() -> None:
    # 12000 + 4000 + 8 x 4000 + 7 x 800 = 53600, plus its answer: 54400 tokens.
    assert bench_problems({**GOOD, "context_length": 54400}) == []
    assert len(bench_problems({**GOOD, "context_length": 54399})) == 1


def test_servers_behind_their_tls_front_are_benchmarked_through_the_gateway_only() -> None:
    fronts = {**GOOD, "bench_serving_targets": ["https://10.0.0.11:18080"], "bench_serving_via": "servers"}
    assert bench_problems(fronts) == [
        'bench_serving_via is servers, but ["https://10.0.0.11:18080"] are TLS fronts that require a client certificate'
        " of the site CA (sglang_server_tls), which the load generators do not present: benchmark through the"
        " gateway (bench_serving_via: gateway)"
    ]
    assert bench_problems({**fronts, "bench_serving_via": "gateway"}) == []
    assert bench_problems({**fronts, "bench_serving_targets": ["http://10.0.0.11:18080"]}) == []
