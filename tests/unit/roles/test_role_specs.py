"""Every role documents exactly the variables it defaults, with the same defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO

ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "defaults" / "main.yml").exists())


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def derived(value: object, option: dict) -> bool:
    """A default that is a template for a number, a boolean or a dict: the spec describes it in words,
    since a typed default cannot be a template (antsibull-docs refuses it, and Ansible takes a role's
    defaults from defaults/main.yml, not from the spec)."""
    return isinstance(value, str) and "{{" in value and option.get("type", "str") in ("int", "float", "bool", "dict")


def description(option: dict) -> list[str]:
    text = option.get("description", "")
    return text if isinstance(text, list) else [text]


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_equal_defaults(role: str) -> None:
    defaults = load(REPO / "roles" / role / "defaults" / "main.yml")
    options = load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(options) == sorted(defaults), f"{role}: argument_specs and defaults name different variables"
    for name, value in defaults.items():
        if derived(value, options[name]):
            assert "default" not in options[name], f"{role}: {name}'s spec default must be described, not typed"
            assert "Default: " in " ".join(description(options[name])), f"{role}: {name} does not say its default"
            continue
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
            if name in defaults and not derived(defaults[name], option):
                documented = option.get("default")
                assert documented == defaults[name], f"{role}/{entry}: {name} documented as {documented!r}"


def test_there_are_roles() -> None:
    assert {"preflight", "nvidia_container_toolkit", "sglang_server"} <= set(ROLES)
