"""One place defines the deployment: change it there, and every role's use of it follows (the
unit's line, the pull, the fetch, the health gate's and the report's expectations, the site
cache's warm-up, preflight's GPU count, the laptops' model and window)."""

from __future__ import annotations

from typing import Any

import jinja2
import pytest
import yaml
from conftest import REPO, role_vars
from test_sglang_unit_template import exec_start, render

NEW_REVISION = "0123456789abcdef0123456789abcdef01234567"
NEW_IMAGE = "registry.example.internal/team/sglang:next@sha256:" + "b" * 64
INVENTORY = {
    "deployment_model_revision": NEW_REVISION,
    "deployment_image": NEW_IMAGE,
    "deployment_served_model_name": "team/glm-next",
    "deployment_model_repo_id": "team/GLM-Next",
    "deployment_tp_size": 8,
    "deployment_ep_size": 8,
    "deployment_context_length": 131072,
    "deployment_sglang_version": "0.5.24",
}
ROLES = ("sglang_image", "model_weights", "site_cache", "preflight", "sglang_server", "claude_code")


def task_args(role: str, tasks_file: str, module: str, variables: dict[str, Any]) -> dict[str, Any]:
    """The arguments a role's task passes to a module, rendered with the role's variables."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)  # noqa: S701 - not HTML

    def walk(tasks: list[dict]) -> dict[str, Any]:
        for task in tasks:
            if module in task:
                return task[module]
            inner = walk(task.get("block", []) + task.get("rescue", []))
            if inner:
                return inner
        return {}

    args = walk(yaml.safe_load((REPO / "roles" / role / "tasks" / tasks_file).read_text()))
    assert args, f"{role}/{tasks_file} has no {module} task"

    def render_value(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: render_value(v) for k, v in value.items()}
        return env.from_string(value).render(**variables) if isinstance(value, str) else value

    return render_value(
        {k: v for k, v in args.items() if k in ("served_model_name", "expected", "reference", "revision", "repo_id")}
    )


@pytest.mark.parametrize("role", ROLES)
def test_every_role_that_reads_the_deployment_depends_on_it(role: str) -> None:
    meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text())
    chain = [d["role"] for d in meta["dependencies"]]
    if role == "site_cache":  # through model_weights, whose weights it serves
        assert chain == ["glm.fleet.model_weights"]
    else:
        assert chain == ["glm.fleet.deployment"]


def test_a_new_deployment_in_one_place_reaches_every_role() -> None:
    server = role_vars("sglang_server", **INVENTORY)
    argv = exec_start(render(**INVENTORY))
    assert NEW_IMAGE in argv
    for flag, value in [("--revision", NEW_REVISION), ("--model-path", "team/GLM-Next"),
                        ("--served-model-name", "team/glm-next"), ("--tp-size", "8"), ("--ep-size", "8"),
                        ("--context-length", "131072")]:  # fmt: skip
        assert argv[argv.index(flag) + 1] == value, flag
    private = yaml.safe_load((REPO / "roles" / "sglang_server" / "vars" / "main.yml").read_text())
    snapshot = jinja2.Environment().from_string(private["__sglang_server_snapshot"]).render(**server)  # noqa: S701
    assert snapshot.strip().endswith(f"/hub/models--team--GLM-Next/snapshots/{NEW_REVISION}")

    expected = {"version": "0.5.24", "model_path": "team/GLM-Next", "revision": NEW_REVISION,
                "served_model_name": "team/glm-next", "tp_size": "8", "ep_size": "8",
                "context_length": "131072"}  # fmt: skip
    env = jinja2.Environment()  # noqa: S701 - not HTML
    rendered = {k: env.from_string(v).render(**server) for k, v in private["__sglang_server_expected"].items()}
    assert rendered == expected
    for tasks_file in ("health.yml", "report.yml"):
        variables = server | {"__sglang_server_expected": "E"}
        args = task_args("sglang_server", tasks_file, "glm.fleet.sglang_health", variables)
        assert args["expected"] == "E", tasks_file  # every server of the node is held to the same expectations
        assert args["served_model_name"] == "team/glm-next"

    image = role_vars("sglang_image", **INVENTORY)
    assert task_args("sglang_image", "pull.yml", "glm.fleet.image_pull", image)["reference"] == NEW_IMAGE
    weights = role_vars("model_weights", **INVENTORY)
    fetch = task_args("model_weights", "snapshot.yml", "glm.fleet.hf_snapshot", weights)
    assert (fetch["repo_id"], fetch["revision"]) == ("team/GLM-Next", NEW_REVISION)
    assert role_vars("site_cache", **INVENTORY)["site_cache_images"] == [NEW_IMAGE]
    assert role_vars("preflight", **INVENTORY)["preflight_required_gpus"] == 8
    laptop = role_vars("claude_code", **INVENTORY)
    assert (laptop["claude_code_fleet_model"], laptop["claude_code_fleet_context_length"]) == ("team/glm-next", 131072)


def test_the_pinned_values_are_written_once_in_the_roles() -> None:
    """The revision, the image digest and the served name appear in one role's defaults only."""
    pins = yaml.safe_load((REPO / "roles" / "deployment" / "defaults" / "main.yml").read_text())
    for name in ("deployment_model_revision", "deployment_image", "deployment_served_model_name"):
        owners = [
            p.parent.parent.name for p in (REPO / "roles").glob("*/defaults/main.yml") if pins[name] in p.read_text()
        ]
        assert owners == ["deployment"], f"{name} is written in {owners}"
