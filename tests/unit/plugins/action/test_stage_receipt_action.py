"""glm.fleet.stage_receipt's action plugin: the digest of a role's computed inputs, and a door that
takes an earlier door's word for receipts it found standing in the same run."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.glm.fleet.plugins.action.stage_receipt import ActionModule

HOST = {"inventory_hostname": "cache-1", "groups": {"all": ["cache-1"]}, "hostvars": {}, "group_names": []}


def action(args: dict[str, Any]) -> tuple[ActionModule, MagicMock]:
    task = MagicMock(args=args, async_val=0, check_mode=False, diff=False)
    plugin = ActionModule(task, MagicMock(), MagicMock(), DataLoader(), Templar(loader=DataLoader()), MagicMock())
    execute = MagicMock(return_value={"changed": False, "stale": {"gateway": "no receipt"}})
    plugin._execute_module = execute  # type: ignore[method-assign]
    return plugin, execute


def test_receipts_an_earlier_door_found_standing_are_not_read_again() -> None:
    plugin, execute = action({"roles": ["sglang_image"], "stood": ["nvidia_container_toolkit", "sglang_image"]})
    result = plugin.run(task_vars=dict(HOST))
    assert result["stale"] == {}
    assert "earlier in this run" in result["msg"]
    execute.assert_not_called()


def test_a_receipt_the_earlier_door_did_not_vouch_for_is_read() -> None:
    plugin, execute = action({"roles": ["sglang_image"], "stood": ["nvidia_container_toolkit"]})
    plugin.run(task_vars=dict(HOST))
    assert execute.call_count == 1
    assert [e["name"] for e in execute.call_args.kwargs["module_args"]["receipts"]] == ["sglang_image"]


def test_ignoring_receipts_wins_over_an_earlier_door() -> None:
    plugin, execute = action({"roles": ["sglang_image"], "stood": ["sglang_image"], "ignore": True})
    result = plugin.run(task_vars=dict(HOST))
    assert result["stale"] == {"sglang_image": "receipts ignored (glm_fleet_ignore_receipts)"}
    execute.assert_not_called()


def test_stood_must_be_a_list() -> None:
    plugin = action({"roles": ["sglang_image"], "stood": "sglang_image"})[0]
    with pytest.raises(AnsibleActionFail, match="stood must be a list of role names; got 'sglang_image'"):
        plugin.run(task_vars=dict(HOST))


def test_the_inputs_a_role_computes_enter_its_digest() -> None:
    plugin = action({"roles": ["gateway"]})[0]
    one = plugin.digest("gateway", {**HOST, "__gateway_receipt_inputs": {"keys": {"dev-1": "a" * 48}}})
    same = plugin.digest("gateway", {**HOST, "__gateway_receipt_inputs": {"keys": {"dev-1": "a" * 48}}})
    other = plugin.digest("gateway", {**HOST, "__gateway_receipt_inputs": {"keys": {"dev-1": "b" * 48}}})
    assert one == same != other


def test_a_receipt_with_computed_inputs_is_read_only_at_its_roles_door() -> None:
    plugin = action({"roles": ["gateway"]})[0]
    with pytest.raises(AnsibleActionFail, match=r"__gateway_receipt_inputs.*glm.fleet.gateway's own door"):
        plugin.digest("gateway", dict(HOST))
