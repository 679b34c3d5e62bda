# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong, if anything, with the serving benchmark's settings."""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.glm.fleet.plugins.filter.url_problem import shape_problem

DOCUMENTATION = r"""
---
name: bench_problems
short_description: The problems of glm.fleet.bench_serving's settings, each naming its variable and value
version_added: 0.1.0
description:
  - Checks the levels of concurrency (whole numbers 1-4096, none twice), the lengths (whole numbers, input plus
    output within the fleet's context length), the requests per client, the prices and the per-user speed (positive
    numbers), the targets (C(http) or C(https) URLs with a host of their own) and the key (present, no control
    character, as it goes into an HTTP header).
  - Checks the profiles (C(synthetic), C(claude_code), at least one, none twice) and, with C(claude_code), its
    levels, its sizes (whole numbers) and that a conversation's last request (the system prompt, the context, every
    turn and every answer before it) plus its answer fits the fleet's context length.
  - Values are shown JSON-escaped; the key never is.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The settings, by variable name (the role's C(bench_serving_*) variables, and C(context_length)).
    type: dict
    required: true
"""

EXAMPLES = r"""
problems: "{{ {'bench_serving_concurrency': [1, 8], 'bench_serving_input_tokens': 1024} | glm.fleet.bench_problems }}"
"""

RETURN = r"""
_value:
  description: One sentence per problem; empty when the settings are fine.
  type: list
  elements: str
"""

WHOLE = re.compile(r"[1-9][0-9]{0,8}")
NUMBER = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _whole(value: Any) -> int | None:
    text = str(value) if not isinstance(value, bool) else ""
    return int(text) if WHOLE.fullmatch(text) else None


def _positive(value: Any) -> float | None:
    text = str(value) if not isinstance(value, bool) else ""
    return float(text) if NUMBER.fullmatch(text) and float(text) > 0 else None


PROFILES = ("synthetic", "claude_code")
CONVERSATION = ("turns", "system_tokens", "context_tokens", "turn_tokens", "output_tokens", "sessions_per_client")


def _levels_problem(name: str, levels: Any) -> list[str]:
    counts = [_whole(v) for v in levels] if isinstance(levels, list) else []
    if not counts or None in counts or max(c or 0 for c in counts) > 4096 or len(set(counts)) != len(counts):
        return [f"{name} must be a list of distinct whole numbers 1-4096; got: " + json.dumps(levels)]
    return []


def _conversation_problems(s: dict) -> list[str]:
    """Claude Code's shape: its levels, its sizes, and its longest request within the context."""
    profiles = s.get("bench_serving_profiles")
    if (
        not isinstance(profiles, list)
        or not profiles
        or any(p not in PROFILES for p in profiles)
        or len(set(profiles)) != len(profiles)
    ):
        return [
            f"bench_serving_profiles must list synthetic, claude_code or both, each once; got: {json.dumps(profiles)}"
        ]
    if "claude_code" not in profiles:
        return []
    problems = _levels_problem("bench_serving_claude_code_concurrency", s.get("bench_serving_claude_code_concurrency"))
    sizes = {}
    for field in CONVERSATION:
        name = f"bench_serving_claude_code_{field}"
        sizes[field] = _whole(s.get(name))
        if sizes[field] is None:
            problems.append(f"{name} must be a whole number above 0; got: {json.dumps(s.get(name))}")
    context = _whole(s.get("context_length"))
    if context and None not in sizes.values():
        turns = sizes["turns"]
        last = sizes["system_tokens"] + sizes["context_tokens"] + turns * sizes["turn_tokens"]
        last += (turns - 1) * sizes["output_tokens"]
        if last + sizes["output_tokens"] > context:
            problems.append(
                f"a conversation's last request of bench_serving_claude_code_* ({sizes['system_tokens']} + "
                f"{sizes['context_tokens']} + {turns} x {sizes['turn_tokens']} + {turns - 1} x "
                f"{sizes['output_tokens']} = {last} tokens) plus its answer ({sizes['output_tokens']}) exceeds the "
                f"fleet's context length, deployment_context_length ({context}): the servers would refuse it"
            )
    return problems


def _size_problems(s: dict) -> list[str]:
    problems = _levels_problem("bench_serving_concurrency", s.get("bench_serving_concurrency"))
    lengths = {}
    for name in ("bench_serving_input_tokens", "bench_serving_output_tokens", "bench_serving_requests_per_client"):
        lengths[name] = _whole(s.get(name))
        if lengths[name] is None:
            problems.append(f"{name} must be a whole number above 0; got: {json.dumps(s.get(name))}")
    context = _whole(s.get("context_length"))
    tokens_in, tokens_out = lengths["bench_serving_input_tokens"], lengths["bench_serving_output_tokens"]
    if context and tokens_in and tokens_out and tokens_in + tokens_out > context:
        problems.append(
            f"bench_serving_input_tokens + bench_serving_output_tokens ({tokens_in} + {tokens_out}) exceed the fleet's "
            f"context length, deployment_context_length ({context}): the servers would refuse every request"
        )
    return problems


def _price_problems(s: dict) -> list[str]:
    problems = [
        f"{name} must be a positive number; got: {json.dumps(s.get(name))}"
        for name in ("bench_serving_gpu_hour_usd", "bench_serving_cost_min_user_tps")
        if _positive(s.get(name)) is None
    ]
    hosted = s.get("bench_serving_hosted")
    if not isinstance(hosted, dict) or any(
        _positive(hosted.get(k)) is None for k in ("input", "cached_input", "output")
    ):
        problems.append(
            "bench_serving_hosted must hold input, cached_input and output prices ($ per 1M tokens, positive); got: "
            + json.dumps(hosted)
        )
    return problems


def _target_problems(s: dict) -> list[str]:
    targets = s.get("bench_serving_targets")
    if not isinstance(targets, list) or not targets:
        return [f"bench_serving_targets must list at least one URL; got: {json.dumps(targets)}"]
    shapes = [(url, shape_problem(url)) for url in targets]
    problems = [f"bench_serving_targets: {json.dumps(url)} {problem}" for url, problem in shapes if problem]
    fronts = [url for url in targets if s.get("bench_serving_via") == "servers" and str(url).startswith("https://")]
    if fronts:
        problems.append(
            f"bench_serving_via is servers, but {json.dumps(fronts)} are TLS fronts that require a client certificate"
            " of the site CA (sglang_server_tls), which the load generators do not present: benchmark through the"
            " gateway (bench_serving_via: gateway)"
        )
    key = s.get("bench_serving_api_key")
    if not isinstance(key, str) or not key:
        problems.append(
            "bench_serving_api_key is empty: set it to a developer's gateway key (or, with bench_serving_via: "
            "servers, the servers' key), or run the gateway first, which writes the developers' keys to "
            + json.dumps(str(s.get("keys_dir", "<deployment_secrets_dir>/developer-keys")))
        )
    elif CONTROL.search(key) or key != key.strip():
        problems.append(
            "bench_serving_api_key holds a control character or surrounding space (not shown): it goes into an HTTP "
            "header"
        )
    return problems


def bench_problems(settings: dict) -> list:
    return (
        _size_problems(settings)
        + _conversation_problems(settings)
        + _price_problems(settings)
        + _target_problems(settings)
    )


class FilterModule:
    def filters(self) -> dict:
        return {"bench_problems": bench_problems}
