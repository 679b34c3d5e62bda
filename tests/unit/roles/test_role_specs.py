"""Every role documents exactly the variables it defaults, with the same defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "defaults" / "main.yml").exists())


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_equal_defaults(role: str) -> None:
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(options) == sorted(defaults), f"{role}: argument_specs and defaults name different variables"
    for name, value in defaults.items():
        assert options[name].get("default") == value, (
            f"{role}: {name} defaults to {value!r}, documented as {options[name].get('default')!r}"
        )
        assert options[name].get("description"), f"{role}: {name} is not described"
        assert name.startswith(role + "_"), f"{role}: {name} lacks the role prefix"


@pytest.mark.parametrize("role", ROLES)
def test_other_entry_points_document_the_same_defaults(role: str) -> None:
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    specs = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]
    for entry, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            if name in defaults:
                documented = option.get("default")
                assert documented == defaults[name], f"{role}/{entry}: {name} documented as {documented!r}"


def test_there_are_roles() -> None:
    assert {"preflight", "nvidia_container_toolkit", "sglang_server"} <= set(ROLES)
