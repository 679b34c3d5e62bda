# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of glm.fleet.stage_receipt: the digest of each role's inputs for this host
(plugin_utils/_role_inputs.py), then one module run on the host. With state=check and a group, the
host joins that group when a role is stale (or `<group>_current` when none is), as group_by would:
a stage's play then runs only on the hosts of the group. With stages (a list of {group, roles}) in
place of roles, one read covers several stages: the host joins a group under `group` (read): that of
each stage due, or `<group>_current` (plugin_utils/_stages.py), and `stages` in the result says why
each is due."""

from __future__ import annotations

import re

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.glm.fleet.plugins.plugin_utils import _role_inputs, _stages

MODULE = "glm.fleet.stage_receipt"
RECEIPT_NAME = re.compile(r"[a-z][a-z0-9_]*(-[a-z0-9_]+)?")

try:  # ansible-core 2.19+ templates only strings it trusts; a default read from argument_specs is one
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core templates every string

    def trust_as_template(value: str) -> str:  # type: ignore[misc]
        return value


def trusted(value: object) -> object:
    """A default read from argument_specs, its strings trusted as templates at every depth (a list of
    dicts, say), as they are where Ansible loads the role's defaults file."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "dir", "roles", "role", "observe", "group", "ignore", "secrets", "stages"))

    def digest(self, name: str, task_vars: dict, secrets: bool = False) -> str:
        """The inputs' digest of a receipt's role (NAME or NAME-PART: a part of the role NAME)."""
        if not RECEIPT_NAME.fullmatch(name):
            raise AnsibleActionFail(f"glm.fleet.stage_receipt: a receipt is named ROLE or ROLE-PART; got {name!r}")
        root = _role_inputs.collection_root()
        try:
            roles = _role_inputs.closure(root, name.partition("-")[0])
        except ValueError as err:
            raise AnsibleActionFail(f"glm.fleet.stage_receipt: {err}") from err
        # The roles' defaults (defaults/main.yml, their owner) under what the host's variables set, as
        # if the roles were loaded: a default may name another role's option.
        defaults = {
            name: trusted(default)
            for role_name in roles
            for name, default in _role_inputs.defaults(root, role_name).items()
        }
        variables = {**defaults, **task_vars}
        templar = self._templar.copy_with_new_env(available_variables=variables)

        def value(name: str, default: object) -> object:
            # An option the role would not use may not template here (a default naming a group the
            # inventory lacks): its error stands in for its value, and the role, if it uses it, says why.
            try:
                return templar.template(variables.get(name, default))
            except AnsibleError as err:
                return f"<{type(err).__name__}: {err.message}>"

        values = _role_inputs.settings(root, roles, value, secrets=secrets)
        return _role_inputs.inputs_digest(_role_inputs.code_digest(root, roles), values)

    def entries(self, args: dict, task_vars: dict, secrets: bool) -> tuple[list[dict], list[_stages.Stage] | None]:
        """The module's receipts entries (each with its digest), and the stages when given."""
        state = args.get("state", "check")
        if state == "record":
            if not args.get("role") or "observe" not in args:
                raise AnsibleActionFail("glm.fleet.stage_receipt: state=record takes role and observe")
            role = str(args["role"])
            return [{"name": role, "digest": self.digest(role, task_vars, secrets), "observe": args["observe"]}], None
        if state != "check":
            raise AnsibleActionFail(f"glm.fleet.stage_receipt: state must be check or record; got {state!r}")
        stages = None
        if "stages" in args:
            if "roles" in args or not args.get("group"):
                raise AnsibleActionFail("glm.fleet.stage_receipt: stages takes a group (the hosts read) and no roles")
            try:
                stages = _stages.parse(args["stages"])
            except ValueError as err:
                raise AnsibleActionFail(f"glm.fleet.stage_receipt: {err}") from err
        if stages:  # each stage's receipts with its own secrets, as its role records them
            return [
                {"name": role, "digest": self.digest(role, task_vars, secrets or stage.secrets)}
                for stage in stages
                for role in stage.roles
            ], stages
        roles = args.get("roles")
        if not isinstance(roles, list) or not roles:
            raise AnsibleActionFail(
                f"glm.fleet.stage_receipt: state=check takes roles, a list of role names; got {roles!r}"
            )
        return [{"name": str(role), "digest": self.digest(str(role), task_vars, secrets)} for role in roles], stages

    @staticmethod
    def grouping(result: dict, group: str, stages: list[_stages.Stage] | None) -> None:
        """A check's groups, for ansible.builtin.group_by to join (join_group under join_parents): the
        stages due (with stages), or the group. The task's next one joins them: an action's result
        does not add a group on every ansible-core (2.21 reads only group_by's own)."""
        stale = result.get("stale") or {}
        if stages:
            reasons = _stages.due(stages, stale)
            result["join_group"], result["join_parents"] = _stages.dynamic_group(group, stages, reasons)
            result["stages"] = reasons
            result["msg"] = "; ".join(f"{name}: {why}" for name, why in reasons.items()) or "every receipt stands"
            return
        result["join_group"] = group if stale else f"{group}_current"
        result["join_parents"] = ["all"]
        result["msg"] = "; ".join(f"{role}: {why}" for role, why in stale.items()) or "every role's receipt stands"

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        state = args.get("state", "check")
        try:
            secrets = boolean(args.get("secrets", False), strict=True)
            ignore = boolean(args.get("ignore", False), strict=True)
        except TypeError as err:
            raise AnsibleActionFail(
                "glm.fleet.stage_receipt: secrets and ignore (glm_fleet_ignore_receipts) must be true or false;"
                f" got {args.get('secrets')!r} and {args.get('ignore')!r}"
            ) from err
        entries, stages = self.entries(args, task_vars, secrets)
        module_args = {"state": state, "receipts": entries, **({"dir": args["dir"]} if args.get("dir") else {})}
        if state == "check" and ignore:  # every role runs, as if no receipt were there; none is read
            result.update(
                changed=False, stale={e["name"]: "receipts ignored (glm_fleet_ignore_receipts)" for e in entries}
            )
        else:
            out = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
            out.pop("invocation", None)
            result.update(out)
        if state == "check" and not result.get("failed") and args.get("group"):
            self.grouping(result, str(args["group"]), stages)
        return result
