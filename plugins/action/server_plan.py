# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of glm.fleet.server_plan: the live half of the server stage's plan in one task.
The arguments checked here; for the servers that would not change, systemd's view of their units and
one round of glm.fleet.sglang_health's checks on each, all in one run of the module of the same name
on the node; then the reasons for the rolling restart (glm.fleet.rollout_reasons) and the group the
node joins, as group_by would; with `image`, the SGLang release that image holds, read on the node
in the same run.
The result has the looped shape of a health round (`results`, one per server probed, each with its
`__sglang_server_instance`), so the fleet report reads it as it reads its own round."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.glm.fleet.plugins.filter.rollout import rollout_reasons
from ansible_collections.glm.fleet.plugins.plugin_utils import _server_plan


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        ("servers", "changed", "host", "snapshot", "probe", "rollout_group", "steady_group", "image", "guards", "files")
    )

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        try:
            plan = _server_plan.parse(self._task.args)
        except ValueError as err:
            raise AnsibleActionFail(f"glm.fleet.server_plan: {err}") from err
        args = {  # the node half needs neither the stat results nor the snapshot
            "servers": list(plan.servers), "changed": list(plan.changed), "probe": plan.probe,
            "rollout_group": plan.rollout_group, "steady_group": plan.steady_group, "image": plan.image,
            "guards": plan.guards, "files": plan.files,
        }  # fmt: skip
        read = self._execute_module(module_name="glm.fleet.server_plan", module_args=args, task_vars=task_vars)
        if read.get("failed"):
            raise AnsibleActionFail(f"glm.fleet.server_plan: {read.get('msg') or read}")
        systemd = read.get("systemd", "")
        # The probed servers only: a list of skipped items would mark the task skipped.
        results = [
            {**health, "changed": False, "failed": False, "__sglang_server_instance": server}
            for server, health in zip(plan.unchanged, read.get("health", []), strict=True)
        ]
        report = {"results": results}
        guards_missing = read.get("guards_missing") or {}
        # A node file that differs from what the controller holds (a renewed certificate) would change.
        host = {**plan.host, **{label: {"changed": True} for label in read.get("files_differ") or []}}
        reasons = rollout_reasons(
            list(plan.changed), [s["name"] for s in plan.servers],
            host=host, systemd=systemd, health=report, snapshot=plan.snapshot, guards=guards_missing,
        )  # fmt: skip
        result.update(
            changed=False,
            results=results,
            systemd=systemd,
            reasons=reasons,
            join_group=plan.rollout_group if reasons else plan.steady_group,
            image_sglang_version=read.get("image_sglang_version"),
            image_error=read.get("image_error", ""),
            guards_missing=guards_missing,
            msg="; ".join(reasons) or "every server runs as configured and serves",
        )
        return result
