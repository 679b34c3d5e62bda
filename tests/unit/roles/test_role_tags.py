"""`--tags <role>` runs that role's tasks: each role's tag lists exactly the tasks its tasks/main.yml
brings in (imported files in full, a looped include as itself), and nothing of other roles but the
checks tagged `always` (and, for the role named preflight, the other roles' own checks, which share
that concern's tag). `--list-tasks` leaves out a block's rescue and always sections; so does this.
Every role of the directory is in tests/unit/fixtures/all_roles.yml."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, REPO

# bench_serving runs on its own (playbooks/bench_serving.yml), never within site.yml, and tags nothing.
UNTAGGED = {"bench_serving"}
ALL_ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks" / "main.yml").is_file())
ROLES = [role for role in ALL_ROLES if role not in UNTAGGED]
LISTED = re.compile(r"^\s+glm\.fleet\.(\w+) : (.+?)\tTAGS: \[(.*)\]$")


def static_task_names(role: str, tasks_file: str = "main.yml") -> set[str]:
    names: set[str] = set()

    def walk(tasks: list[dict]) -> None:
        for task in tasks or []:
            imported = task.get("ansible.builtin.import_tasks")
            if imported:
                names.update(static_task_names(role, imported))
            elif "ansible.builtin.include_role" in task:
                continue  # --list-tasks names an include_role task without its role
            elif "block" in task:
                walk(task["block"])
            else:
                names.add(task["name"])

    walk(yaml.safe_load((REPO / "roles" / role / "tasks" / tasks_file).read_text()))
    return names


def listed(tag: str) -> list[tuple[str, str, list[str]]]:
    out = subprocess.run(
        [Path(sys.executable).parent / "ansible-playbook", "-i", "localhost,", "--list-tasks", "--tags", tag,
         str(FIXTURES / "all_roles.yml")],
        capture_output=True, text=True, check=True, cwd=REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
    )  # fmt: skip
    rows = [LISTED.match(line) for line in out.stdout.splitlines()]
    return [(m.group(1), m.group(2), m.group(3).split(", ")) for m in rows if m]


def test_the_fixture_holds_every_role() -> None:
    play = yaml.safe_load((FIXTURES / "all_roles.yml").read_text())[0]
    assert sorted(role.removeprefix("glm.fleet.") for role in play["roles"]) == ALL_ROLES


@pytest.mark.parametrize("role", ROLES)
def test_a_roles_tag_lists_its_tasks(role: str) -> None:
    rows = listed(role)
    mine = {name for owner, name, _tags in rows if owner == role and not name.startswith("Validating arguments")}
    assert mine == static_task_names(role)
    shared = {"always", "preflight"} if role == "preflight" else {"always"}
    others = [(owner, name) for owner, name, tags in rows if owner != role and not shared & set(tags)]
    assert others == []
