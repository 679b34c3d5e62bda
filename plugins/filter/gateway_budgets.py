# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each developer's monthly budget at the gateway, and what is wrong with the settings it comes from."""

from __future__ import annotations

import json
import re
from typing import Any

DOCUMENTATION = r"""
---
name: gateway_budgets
short_description: Each developer's monthly budget at the gateway (an amount in a unit, when to warn, whether to refuse)
version_added: 0.1.0
description:
  - Gives every developer the site's budget (C(gateway_developer_budget)), with their own entry of
    C(gateway_developer_budgets) over it, field by field. A developer with neither has no budget.
  - A budget is C(monthly), an amount of C(unit) (C(usd) at the hosted prices, or C(tokens), input and output
    together) per calendar month (UTC); C(warn_percent), the share of it at which an alert warns (default
    C(gateway_developer_budget_warn_percent)); C(hard), whether the gateway refuses the developer's requests once it
    is spent (default false).
  - The filter C(glm.fleet.gateway_budget_problems) takes the same input and says what is wrong with it.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  _input:
    description: The developers' names (C(gateway_developers)).
    type: list
    elements: str
    required: true
  default:
    description: C(gateway_developer_budget), the budget of every developer without one of their own (empty, none).
    type: dict
    required: true
  overrides:
    description: C(gateway_developer_budgets), by developer name.
    type: dict
    required: true
  warn_percent:
    description: C(gateway_developer_budget_warn_percent), the warning's share where a budget gives none.
    type: int
    required: true
"""

EXAMPLES = r"""
budgets: >-
  {{ ['alice', 'bob'] | glm.fleet.gateway_budgets({'monthly': 100, 'unit': 'usd'},
                                                  {'bob': {'monthly': 2000000, 'unit': 'tokens', 'hard': true}}, 80) }}
problems: >-
  {{ gateway_developers | glm.fleet.gateway_budget_problems(gateway_developer_budget, gateway_developer_budgets,
                                                            gateway_developer_budget_warn_percent) }}
"""

RETURN = r"""
_value:
  description: C(gateway_budgets), a dict by developer (those with a budget only) of C(monthly) (a number), C(unit),
    C(warn_percent) and C(hard); C(gateway_budget_problems), one sentence per problem (empty when all is well).
  type: raw
"""

FIELDS = ("monthly", "unit", "warn_percent", "hard")
UNITS = ("usd", "tokens")
AMOUNT = re.compile(r"(0|[1-9][0-9]{0,11})(\.[0-9]{1,4})?")
PERCENT = re.compile(r"[1-9][0-9]?|100")


def _show(value: Any) -> str:
    return json.dumps(value, default=str)


def _field_problems(where: str, budget: dict[str, Any]) -> list[str]:
    problems = []
    monthly = budget.get("monthly")
    if isinstance(monthly, bool) or not AMOUNT.fullmatch(str(monthly)) or float(str(monthly)) <= 0:
        problems.append(f"{where}.monthly must be a number above 0 (at most 4 decimals); got: {_show(monthly)}")
    if budget.get("unit") not in UNITS:
        problems.append(f"{where}.unit must be one of {', '.join(UNITS)}; got: {_show(budget.get('unit'))}")
    warn = budget.get("warn_percent")
    if isinstance(warn, bool) or not PERCENT.fullmatch(str(warn)):
        problems.append(f"{where}.warn_percent must be a whole number from 1 to 100; got: {_show(warn)}")
    if not isinstance(budget.get("hard"), bool):
        problems.append(f"{where}.hard must be true or false; got: {_show(budget.get('hard'))}")
    return problems


def _unknown(where: str, given: dict[str, Any]) -> list[str]:
    unknown = sorted(set(given) - set(FIELDS), key=str)
    return [f"{where} has unknown fields {_show(unknown)} (known: {', '.join(FIELDS)})"] if unknown else []


def gateway_budget_problems(developers: list[str], default: Any, overrides: Any, warn_percent: Any) -> list[str]:
    problems = []
    if isinstance(warn_percent, bool) or not PERCENT.fullmatch(str(warn_percent)):
        problems.append(
            f"gateway_developer_budget_warn_percent must be a whole number from 1 to 100; got: {_show(warn_percent)}"
        )
    if not isinstance(default, dict):
        problems.append(f"gateway_developer_budget must be a dict of {', '.join(FIELDS)}; got: {_show(default)}")
        default = {}
    if not isinstance(overrides, dict):
        problems.append(f"gateway_developer_budgets must be a dict by developer name; got: {_show(overrides)}")
        overrides = {}
    problems += _unknown("gateway_developer_budget", default)
    base = {"warn_percent": warn_percent, "hard": False, **default}
    if default:
        problems += _field_problems("gateway_developer_budget", base)
    for name, own in overrides.items():
        where = f"gateway_developer_budgets[{_show(name)}]"
        if name not in developers:
            problems.append(f"{where} names no developer of gateway_developers")
        if not isinstance(own, dict):
            problems.append(f"{where} must be a dict of {', '.join(FIELDS)}; got: {_show(own)}")
            continue
        problems += _unknown(where, own)
        problems += [p for p in _field_problems(where, {**base, **own}) if p.split(" ", 1)[0].split(".")[-1] in own]
        missing = [field for field in ("monthly", "unit") if field not in own and field not in default]
        if missing:
            problems.append(
                f"{where} has no {' and no '.join(missing)} (and gateway_developer_budget gives none): "
                f"a budget is an amount and its unit; got: {_show(own)}"
            )
    return problems


def gateway_budgets(
    developers: list[str], default: dict[str, Any], overrides: dict[str, Any], warn_percent: Any
) -> dict:
    budgets = {}
    for name in sorted(developers):
        own = {**default, **(overrides.get(name) or {})}
        if not own:
            continue
        budgets[name] = {
            "monthly": float(str(own["monthly"])),
            "unit": own["unit"],
            "warn_percent": int(own.get("warn_percent", warn_percent)),
            "hard": bool(own.get("hard", False)),
        }
    return budgets


class FilterModule:
    def filters(self) -> dict:
        return {"gateway_budgets": gateway_budgets, "gateway_budget_problems": gateway_budget_problems}
