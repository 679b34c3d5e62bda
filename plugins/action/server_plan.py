# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of glm.fleet.server_plan: the live half of the server stage's plan in one task.
For the servers that would not change, one read of systemd's view of their units and one round of
glm.fleet.sglang_health on each (two module runs on the node, no fork of its own); then the reasons
for the rolling restart (glm.fleet.rollout_reasons) and the group the node joins, as group_by would.
The result has the looped shape of a health round (`results`, one per server probed, each with its
`__sglang_server_instance`), so the fleet report reads it as it reads its own round."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.glm.fleet.plugins.filter.rollout import rollout_reasons
from ansible_collections.glm.fleet.plugins.plugin_utils import _server_plan

HEALTH = "glm.fleet.sglang_health"
SHOW = "--property=Id,LoadState,ActiveState,UnitFileState,NeedDaemonReload"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("servers", "changed", "host", "snapshot", "probe", "rollout_group", "steady_group"))

    def module(self, name: str, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """One module run on the node, read-only: also in check mode (a read changes nothing)."""
        check_mode, self._task.check_mode = self._task.check_mode, False
        try:
            out = self._execute_module(module_name=name, module_args=args, task_vars=task_vars)
        finally:
            self._task.check_mode = check_mode
        out.pop("invocation", None)
        return out

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        try:
            plan = _server_plan.parse(self._task.args)
        except ValueError as err:
            raise AnsibleActionFail(f"glm.fleet.server_plan: {err}") from err
        units = _server_plan.units(plan)
        systemd = ""
        if units:
            show = self.module("ansible.legacy.command", {"argv": ["systemctl", "show", SHOW, *units]}, task_vars)
            if show.get("rc") != 0:
                raise AnsibleActionFail(f"glm.fleet.server_plan: systemctl show failed: {show.get('stderr') or show}")
            systemd = show.get("stdout", "")
        results = []  # the probed servers only: a list of skipped items would mark the task skipped
        for server in plan.unchanged:
            health = self.module(HEALTH, {**plan.probe, "port": server["port"], "timeout": 0}, task_vars)
            health.pop("_ansible_no_log", None)
            results.append({**health, "failed": False, "__sglang_server_instance": server})
        report = {"results": results}
        reasons = rollout_reasons(
            list(plan.changed), [s["name"] for s in plan.servers],
            host=plan.host, systemd=systemd, health=report, snapshot=plan.snapshot,
        )  # fmt: skip
        result.update(
            changed=False,
            results=results,
            systemd=systemd,
            reasons=reasons,
            join_group=plan.rollout_group if reasons else plan.steady_group,
            msg="; ".join(reasons) or "every server runs as configured and serves",
        )
        return result
