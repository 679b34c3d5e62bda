# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of glm.fleet.stage_receipt: the digest of each role's inputs for this host
(plugin_utils/_role_inputs.py), then one module run on the host. A role reads its receipt at its door
with state=check and ends there (ansible.builtin.meta: end_role) when `stale` is empty; its last task
records a new one with state=record."""

from __future__ import annotations

import re

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.glm.fleet.plugins.plugin_utils import _role_inputs

MODULE = "glm.fleet.stage_receipt"
RECEIPT_NAME = re.compile(r"[a-z][a-z0-9_]*")

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
    _VALID_ARGS = frozenset(("state", "dir", "roles", "role", "observe", "ignore", "stood"))

    def digest(self, name: str, task_vars: dict) -> str:
        """The inputs' digest of a role's receipt: its secrets among them where the role says so
        (`__<role>_receipt_secrets: true` in its vars/main.yml: a role that writes one into a file)."""
        if not RECEIPT_NAME.fullmatch(name):
            raise AnsibleActionFail(f"glm.fleet.stage_receipt: a receipt is named after its role; got {name!r}")
        root = _role_inputs.collection_root()
        try:
            roles = _role_inputs.closure(root, name)
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

        secrets = _role_inputs.receipt_secrets(root, name)
        values = _role_inputs.settings(root, roles, value, secrets=secrets)
        if _role_inputs.receipt_inputs(root, name):
            computed = f"__{name}_receipt_inputs"
            if computed not in task_vars:
                raise AnsibleActionFail(
                    f"glm.fleet.stage_receipt: the {name} receipt takes inputs its role computes ({computed}):"
                    f" it is read at glm.fleet.{name}'s own door, not from another role"
                )
            values[computed] = value(computed, None)
        return _role_inputs.inputs_digest(_role_inputs.code_digest(root, roles), values)

    def entries(self, args: dict, task_vars: dict) -> list[dict]:
        """The module's receipts entries, each with its digest."""
        state = args.get("state", "check")
        if state == "record":
            if not args.get("role") or "observe" not in args:
                raise AnsibleActionFail("glm.fleet.stage_receipt: state=record takes role and observe")
            role = str(args["role"])
            return [{"name": role, "digest": self.digest(role, task_vars), "observe": args["observe"]}]
        if state != "check":
            raise AnsibleActionFail(f"glm.fleet.stage_receipt: state must be check or record; got {state!r}")
        roles = args.get("roles")
        if not isinstance(roles, list) or not roles:
            raise AnsibleActionFail(
                f"glm.fleet.stage_receipt: state=check takes roles, a list of role names; got {roles!r}"
            )
        return [{"name": str(role), "digest": self.digest(str(role), task_vars)} for role in roles]

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        state = args.get("state", "check")
        try:
            ignore = boolean(args.get("ignore", False), strict=True)
        except TypeError as err:
            raise AnsibleActionFail(
                "glm.fleet.stage_receipt: ignore (glm_fleet_ignore_receipts) must be true or false;"
                f" got {args.get('ignore')!r}"
            ) from err
        stood = args.get("stood") or []
        if not isinstance(stood, list):
            raise AnsibleActionFail(f"glm.fleet.stage_receipt: stood must be a list of role names; got {stood!r}")
        vouched = bool(args.get("roles")) and set(map(str, args["roles"])) <= set(map(str, stood))
        if state == "check" and not ignore and vouched:
            # Read at an earlier door of this run, which found every receipt standing: no role has
            # run on the host since, so they stand still; the host is not contacted again.
            result.update(changed=False, stale={}, msg="every role's receipt stands (read earlier in this run)")
            return result
        entries = self.entries(args, task_vars)
        module_args = {"state": state, "receipts": entries, **({"dir": args["dir"]} if args.get("dir") else {})}
        if state == "check" and ignore:  # every role runs, as if no receipt were there; none is read
            result.update(
                changed=False, stale={e["name"]: "receipts ignored (glm_fleet_ignore_receipts)" for e in entries}
            )
        else:
            out = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
            out.pop("invocation", None)
            result.update(out)
        if state == "check" and not result.get("failed"):
            stale = result.get("stale") or {}
            result["msg"] = "; ".join(f"{role}: {why}" for role, why in stale.items()) or "every role's receipt stands"
        return result
