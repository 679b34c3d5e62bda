"""bench/scale.py runs the lab with the roles' probe intervals, not the lab inventory's test-sized ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench"))

import scale  # noqa: E402


def test_default_probes_are_the_role_defaults_that_the_lab_inventory_shortens() -> None:
    flag, values = scale.default_probes()
    assert flag == "-e"
    probes = json.loads(values)
    assert set(probes) == {"monitoring_scrape_interval", "gateway_health_check_interval_secs"}
    lab_vars: dict[str, object] = {}
    for path in (REPO / "inventories" / "lab" / "group_vars").glob("*.yml"):
        lab_vars.update(yaml.safe_load(path.read_text()) or {})
    for role, names in scale.PROBES.items():
        defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
        for name in names:
            assert probes[name] == defaults[name]
            assert lab_vars[name] != defaults[name], f"the lab inventory no longer shortens {name}"


def test_the_mitogen_figures_turn_on_the_strategy_the_mitogen_package_ships() -> None:
    """What docs/architecture.md tells a site to set, with no strategy plugin of ours."""
    env = scale.mitogen()
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    assert (Path(env["ANSIBLE_STRATEGY_PLUGINS"]) / "mitogen_linear.py").is_file()
    assert "site-packages" in env["ANSIBLE_STRATEGY_PLUGINS"]
