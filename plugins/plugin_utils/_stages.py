# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a run's stages a host goes through, from one read of their receipts: glm.fleet.stage_receipt
with `stages` (playbooks/stage_receipts.yml). Stages are in the order the run takes them; a stage is due
where one of its receipts does not stand, and so is every stage after it, since those run on what the
earlier stage may have changed (the toolkit's stage may restart the docker engine the image and the
exporters live in) after the one read was taken. A host with no stage due joins `<read>_current`: the
preflight's play leaves it out (nothing in the run's stages changes it). A stage's receipts are
compared with the secrets among their settings where it says `secrets: true` (a role that writes a
secret into a file: the servers' API keys), as the role records them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

GROUP = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RECEIPT = re.compile(r"[a-z][a-z0-9_]*(-[a-z0-9_]+)?")


@dataclass(frozen=True)
class Stage:
    group: str
    roles: tuple[str, ...]
    secrets: bool = False


def parse(stages: object) -> list[Stage]:
    """The `stages` argument, a list of {group, roles[, secrets]}; ValueError naming what is wrong."""
    if not isinstance(stages, list) or not stages:
        raise ValueError(f"stages must be a non-empty list of {{group, roles}}; got {stages!r}")
    parsed: list[Stage] = []
    for index, stage in enumerate(stages):
        if not isinstance(stage, Mapping) or not {"group", "roles"} <= set(stage) <= {"group", "roles", "secrets"}:
            raise ValueError(f"stages[{index}] must have the keys group and roles, and may have secrets; got {stage!r}")
        group, roles, secrets = stage["group"], stage["roles"], stage.get("secrets", False)
        if not isinstance(group, str) or not GROUP.fullmatch(group):
            raise ValueError(f"stages[{index}].group must be an inventory group name; got {group!r}")
        if (
            not isinstance(roles, list)
            or not roles
            or not all(isinstance(r, str) and RECEIPT.fullmatch(r) for r in roles)
        ):
            raise ValueError(
                f"stages[{index}].roles must be a non-empty list of ROLE or ROLE-PART names; got {roles!r}"
            )
        if not isinstance(secrets, bool):
            raise ValueError(f"stages[{index}].secrets must be true or false; got {secrets!r}")
        parsed.append(Stage(group, tuple(roles), secrets))
    groups = [stage.group for stage in parsed]
    if len(set(groups)) != len(groups):
        raise ValueError(f"stages name a group more than once: {groups}")
    roles = [role for stage in parsed for role in stage.roles]
    if len(set(roles)) != len(roles):
        raise ValueError(f"stages name a receipt more than once: {roles}")
    return parsed


def due(stages: Sequence[Stage], stale: Mapping[str, str]) -> dict[str, str]:
    """{group: why} for each stage the host goes through, in order; {} when every receipt stands."""
    reasons: dict[str, str] = {}
    earlier = ""
    for stage in stages:
        own = [f"{role}: {stale[role]}" for role in stage.roles if role in stale]
        if own:
            reasons[stage.group] = "; ".join(own)
            earlier = earlier or stage.group
        elif earlier:
            reasons[stage.group] = f"it runs after the stage of {earlier}, which this node goes through"
    return reasons


def dynamic_group(read: str, stages: Sequence[Stage], reasons: Mapping[str, str]) -> tuple[str, list[str]]:
    """(group, parents) for ansible.builtin.group_by: every host read joins a group under `read`:
    `<read>_current` when no stage is due, else one under each due stage's group as well
    (`groups[<group>]` counts the hosts of its child groups)."""
    indices = [str(i) for i, stage in enumerate(stages) if stage.group in reasons]
    if not indices:
        return f"{read}_current", [read]
    return f"{read}_{'_'.join(indices)}", [read, *(stage.group for stage in stages if stage.group in reasons)]
