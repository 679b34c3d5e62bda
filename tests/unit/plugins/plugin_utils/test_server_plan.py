"""glm.fleet.server_plan's arguments: which servers the plan looks at live, and bad input named by value."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.plugin_utils import _server_plan

SERVERS = [{"name": "pareto-glm53-flash", "port": 18080, "gpus": [0, 1, 2, 3]}, {"name": "second", "port": 18081}]
ARGS: dict[str, Any] = {
    "servers": SERVERS,
    "probe": {"host": "127.0.0.1", "api_key": "", "served_model_name": "zai-org/GLM-5.3-Flash", "expected": {}},
    "rollout_group": "glm_fleet_sglang_rollout",
    "steady_group": "glm_fleet_sglang_steady",
}


def test_every_server_is_looked_at_live_when_none_would_change() -> None:
    plan = _server_plan.parse(ARGS)
    assert plan.unchanged == SERVERS
    # An empty key is left out of the probe (the server has none), as `default(omit, true)` would.
    assert plan.probe == {"host": "127.0.0.1", "served_model_name": "zai-org/GLM-5.3-Flash", "expected": {}}
    assert plan.snapshot is None


def test_a_server_that_would_change_is_not_probed() -> None:
    plan = _server_plan.parse({**ARGS, "changed": ["second"]})
    assert plan.unchanged == SERVERS[:1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"servers": []}, r"servers must be a non-empty list .* got \[\]"),
        ({"servers": [{"name": "a b", "port": 1}]}, r"servers\[0\] must have a name .* 'a b'"),
        ({"servers": [{"name": "a", "port": "18080"}]}, r"servers\[0\]\.port must be an integer; got '18080'"),
        ({"changed": "a"}, r"changed must be a list of server names; got 'a'"),
        ({"host": []}, "host must be a dict"),
        ({"probe": {"api_key": "x"}}, r"probe must have served_model_name .* got \['api_key'\]"),
        ({"probe": {"served_model_name": "m", "timeout": 9}}, r"got \['served_model_name', 'timeout'\]"),
        ({"rollout_group": "bad-group"}, r"rollout_group must be an inventory group name; got 'bad-group'"),
        ({"steady_group": "g\n"}, r"steady_group must be an inventory group name"),
        ({"when": True}, r"unknown arguments: \['when'\]"),
    ],
)
def test_bad_arguments_are_refused_naming_the_value(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _server_plan.parse({**ARGS, **change})
