"""No run of ours prints a deprecation warning, on the ansible-core that runs these tests (each of
the support matrix's: `make unit` on the newest, tools/core_matrix.py on the others): what a run uses
today must still be there in the next release. The lab's integration tests check every run of theirs
the same way (tests/integration/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

BIN = Path(sys.executable).parent
DEPRECATION = re.compile(r"\[DEPRECATION WARNING\].*")
PLAYBOOKS = sorted(p.name for p in (REPO / "playbooks").glob("*.yml"))


def ansible(*argv: str) -> str:
    """An Ansible command of this interpreter's venv, from the checkout (its ansible.cfg), output
    and errors together."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_DEPRECATION_WARNINGS": "true"}
    env.pop("ANSIBLE_STRATEGY", None)
    done = subprocess.run([BIN / argv[0], *argv[1:]], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_the_deprecation_pattern_finds_a_warning() -> None:
    text = "ok\n[DEPRECATION WARNING]: Use of strategy plugins not included in ansible.builtin are deprecated.\n"
    assert DEPRECATION.findall(text) == [
        "[DEPRECATION WARNING]: Use of strategy plugins not included in ansible.builtin are deprecated."
    ]


@pytest.mark.parametrize("playbook", ["site.yml", *(f"playbooks/{name}" for name in PLAYBOOKS)])
def test_a_playbook_parses_without_deprecation_warnings(playbook: str) -> None:
    output = ansible("ansible-playbook", "--syntax-check", "-i", "inventories/example", playbook)
    assert not DEPRECATION.findall(output), output


def test_a_run_through_the_deployment_checks_prints_no_deprecation_warning() -> None:
    output = ansible(
        "ansible-playbook", "-i", "localhost,", str(REPO / "tests" / "unit" / "fixtures" / "deprecations.yml")
    )
    assert "ok=" in output, output
    assert "failed=0" in output, output
    assert not DEPRECATION.findall(output), output


def test_the_strategy_is_ansibles_own() -> None:
    """ansible.cfg runs Ansible's linear strategy: no strategy plugin of ours, nor Mitogen by default."""
    output = ansible("ansible-config", "dump", "--only-changed", "-t", "base")
    strategy = re.search(r"^DEFAULT_STRATEGY\(.*\) = (\S+)$", output, re.MULTILINE)
    assert strategy, output
    assert strategy.group(1) == "linear", output
    assert "DEFAULT_STRATEGY_PLUGIN_PATH" not in output, output
    assert not (REPO / "strategy_plugins").exists()
