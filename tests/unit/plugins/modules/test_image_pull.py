"""glm.fleet.image_pull on a host without a docker engine: a clear failure before anything is
contacted, or, for a check-mode run, the pull reported."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.glm.fleet.plugins.module_utils._docker_api import DockerError
from ansible_collections.glm.fleet.plugins.modules.image_pull import no_engine, run

REFERENCE = "lmsysorg/sglang:v0.5.10@sha256:" + "a" * 64
HINT = "run the container toolkit stage (glm.fleet.nvidia_container_toolkit) first"


def module(tmp_path: Path, engine_missing: str, *, check_mode: bool) -> SimpleNamespace:
    params = {"reference": REFERENCE, "docker_socket": str(tmp_path / "docker.sock"), "timeout": 5, "prune": True,
              "keep": 0, "job_file": None, "engine_missing": engine_missing, "engine_hint": HINT}  # fmt: skip
    return SimpleNamespace(params=params, check_mode=check_mode)


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_missing_engine_fails_naming_the_socket_and_what_to_do(tmp_path: Path, check_mode: bool) -> None:
    with pytest.raises(DockerError) as failure:
        run(module(tmp_path, "fail", check_mode=check_mode))
    assert str(failure.value) == f"no docker engine runs here ({tmp_path / 'docker.sock'} is missing); {HINT}"


def test_a_check_mode_run_reports_the_pull_the_engine_would_need(tmp_path: Path) -> None:
    result = run(module(tmp_path, "report", check_mode=True))
    assert (result["changed"], result["pulled"], result["engine"], result["removed"]) == (True, True, False, [])


def test_without_a_hint_the_failure_ends_at_the_socket() -> None:
    with pytest.raises(DockerError, match=r"^no docker engine runs here \(/run/x.sock is missing\)$"):
        no_engine("/run/x.sock", "fail", "")
