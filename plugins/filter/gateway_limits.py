# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each developer's limits at the gateway, and what is wrong with the settings they come from."""

from __future__ import annotations

import json
import math
import re
from typing import Any

DOCUMENTATION = r"""
---
name: gateway_limits
short_description: Each developer's limits at the gateway (requests at once, per minute, burst, tokens a minute)
version_added: 0.1.0
description:
  - Gives every developer the defaults (C(gateway_developer_concurrency), C(gateway_developer_requests_per_minute),
    C(gateway_developer_burst), C(gateway_developer_tokens_per_minute)) with their own entry of
    C(gateway_developer_limits) over them.
  - Adds C(retry_after), the seconds a throttled request is told to wait (one request's share of the developer's
    minute, at least 1), and C(rate_zone), the name of the nginx zone shared by the developers of the same rate and
    burst.
  - The filter C(glm.fleet.gateway_limit_problems) takes the same input and says what is wrong with it.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The developers' names (C(gateway_developers)).
    type: list
    elements: str
    required: true
  defaults:
    description: C(concurrency), C(requests_per_minute), C(burst) and C(tokens_per_minute) for every developer.
    type: dict
    required: true
  overrides:
    description: C(gateway_developer_limits), by developer name.
    type: dict
    required: true
"""

EXAMPLES = r"""
limits: "{{ ['alice', 'bob'] | glm.fleet.gateway_limits({'concurrency': 16, 'requests_per_minute': 300, 'burst': 16},
                                                   {'bob': {'concurrency': 4}}) }}"
problems: "{{ gateway_developers | glm.fleet.gateway_limit_problems(defaults, gateway_developer_limits) }}"
"""

RETURN = r"""
_value:
  description: C(gateway_limits), a dict by developer of C(concurrency), C(requests_per_minute), C(burst),
    C(tokens_per_minute), C(retry_after) and C(rate_zone); C(gateway_limit_problems), one sentence per problem
    (empty when all is well).
  type: raw
"""

FIELDS = ("concurrency", "requests_per_minute", "burst", "tokens_per_minute")
DEFAULTS = {field: f"gateway_developer_{field}" for field in FIELDS}
# 1 to 999999, and tokens a minute 1 to 999999999
LIMIT = {
    field: re.compile(r"[1-9][0-9]{0,8}" if field == "tokens_per_minute" else r"[1-9][0-9]{0,5}") for field in FIELDS
}
WHOLE = {field: f"must be a whole number from 1 to {'999999999' if field == 'tokens_per_minute' else '999999'}; got:"
         for field in FIELDS}  # fmt: skip


def _whole(value: Any, field: str) -> int | None:
    text = str(value) if not isinstance(value, bool) else ""
    return int(text) if LIMIT[field].fullmatch(text) else None


def gateway_limit_problems(developers: list[str], defaults: dict[str, Any], overrides: Any) -> list[str]:
    problems = [
        f"{DEFAULTS[field]} {WHOLE[field]} {json.dumps(defaults.get(field), default=str)}"
        for field in FIELDS
        if _whole(defaults.get(field), field) is None
    ]
    if not isinstance(overrides, dict):
        return [
            *problems,
            f"gateway_developer_limits must be a dict by developer name; got: {json.dumps(overrides, default=str)}",
        ]
    for name, own in overrides.items():
        where = f"gateway_developer_limits[{json.dumps(name, default=str)}]"
        if name not in developers:
            problems.append(f"{where} names no developer of gateway_developers")
        if not isinstance(own, dict):
            problems.append(f"{where} must be a dict of {', '.join(FIELDS)}; got: {json.dumps(own, default=str)}")
            continue
        unknown = sorted(set(own) - set(FIELDS), key=str)
        if unknown:
            problems.append(
                f"{where} has unknown fields {json.dumps(unknown, default=str)} (known: {', '.join(FIELDS)})"
            )
        problems += [
            f"{where}.{field} {WHOLE[field]} {json.dumps(own[field], default=str)}"
            for field in FIELDS
            if field in own and _whole(own[field], field) is None
        ]
    return problems


def gateway_limits(developers: list[str], defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    limits = {}
    for name in sorted(developers):
        own = {
            field: int(value) for field, value in {**defaults, **(overrides.get(name) or {})}.items() if field in FIELDS
        }
        rpm, burst = own["requests_per_minute"], own["burst"]
        limits[name] = {
            **own,
            "retry_after": max(1, math.ceil(60 / rpm)),
            "rate_zone": f"{rpm}_{burst}",
        }
    return limits


class FilterModule:
    def filters(self) -> dict:
        return {"gateway_limits": gateway_limits, "gateway_limit_problems": gateway_limit_problems}
