"""tools/molecule_lanes.py fails a scenario whose output holds a deprecation warning."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools"))

import molecule_lanes  # noqa: E402


def test_a_deprecation_warning_is_found_once_and_other_warnings_are_not() -> None:
    output = (
        "TASK [Converge] ***\n"
        "[WARNING]: Platform linux on host glm-molecule-gateway is using the discovered Python\n"
        "[DEPRECATION WARNING]: INJECT_FACTS_AS_VARS default to `True` is deprecated.\n"
        "ok: [glm-molecule-gateway]\n"
        "[DEPRECATION WARNING]: INJECT_FACTS_AS_VARS default to `True` is deprecated.\n"
    )
    assert molecule_lanes.deprecations(output) == [
        "[DEPRECATION WARNING]: INJECT_FACTS_AS_VARS default to `True` is deprecated."
    ]
    assert molecule_lanes.deprecations("PLAY RECAP\nok=3 changed=0\n") == []


def test_a_scenario_that_warns_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "molecule"
    script.write_text("#!/bin/sh\necho '[DEPRECATION WARNING]: something goes away.'\nexit 0\n")
    script.chmod(0o755)
    monkeypatch.setattr(molecule_lanes, "LOGS", tmp_path)
    runner = molecule_lanes.Runner(str(script))
    assert runner.scenario("gateway") is False
    assert runner.failed == ["gateway"]
