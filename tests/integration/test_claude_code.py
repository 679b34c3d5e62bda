"""End to end: on the lab's laptop, the real Claude Code CLI, started by the role's launcher, gets
its answer from the SGLang stand-in on a GPU node, across the lab network."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from typing import Any

import pytest
from conftest import REPO, Runner, lab, run_log

SERVED = "zai-org/GLM-5.3-Flash"
UNIT = "pareto-glm53-flash"


def in_node(container: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", container, *cmd], check=check, capture_output=True, text=True)


@pytest.fixture(scope="module")
def onboarded(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    runner = Runner(tmp_path_factory.mktemp("onboard"))
    for playbook in ("sglang_server.yml", "developer_laptops.yml"):
        run = runner.playbook(REPO / "playbooks" / playbook)
        assert run.status == "successful", run_log(run)
    nodes = {n["name"]: n for n in lab_state["nodes"]}
    return {"laptop": nodes["laptop-1"]["container"], "server": nodes["gpu-1"]["container"]}


def test_claude_code_answers_from_the_fleet(onboarded: dict[str, str]) -> None:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 1))
    answer = in_node(
        onboarded["laptop"], "su", "-", "dev", "-c", "claude-glm -p 'Say hello to the fleet.'", check=False
    )
    assert answer.returncode == 0, f"rc={answer.returncode}\nstdout: {answer.stdout}\nstderr: {answer.stderr}"
    assert "Hello from GLM-5.3-Flash" in answer.stdout

    journal = in_node(onboarded["server"], "journalctl", "-u", UNIT, "-o", "cat", "--no-pager", f"--since={since}")
    requests = [json.loads(line) for line in journal.stdout.splitlines() if line.startswith("{")]
    messages = [r for r in requests if r["path"].startswith("/v1/messages") and r["status"] == 200]
    assert messages, f"the server saw no /v1/messages request:\n{journal.stdout[-2000:]}"
    key = (lab.STATE_DIR / "api_key").read_text().strip()
    for request in messages:
        assert request["authorization"] == "bearer"
        assert request["token_sha256"] == hashlib.sha256(key.encode()).hexdigest()
        assert request["x_api_key"] is False  # ANTHROPIC_AUTH_TOKEN, not ANTHROPIC_API_KEY
        assert request["model"] == SERVED


def test_the_developers_default_claude_stays_logged_out_of_the_fleet(onboarded: dict[str, str]) -> None:
    # The profile lives in its own config directory: the default ~/.claude was not created.
    assert in_node(onboarded["laptop"], "test", "-e", "/home/dev/.claude", check=False).returncode == 1
    profile = in_node(onboarded["laptop"], "ls", "-A", "/home/dev/.config/glm-fleet/claude/fleet").stdout.split()
    assert "settings.json" in profile


def test_state_absent_removes_what_the_role_wrote_and_nothing_else(
    onboarded: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    laptop = onboarded["laptop"]
    in_node(laptop, "su", "-", "dev", "-c", "mkdir -p ~/.claude && echo '{}' > ~/.claude/settings.json")
    playbook = REPO / "playbooks" / "developer_laptops.yml"
    runner = Runner(tmp_path_factory.mktemp("absent"))
    removed = runner.playbook(playbook, extravars={"claude_code_state": "absent"})
    try:
        assert removed.status == "successful", run_log(removed)
        home = "/home/dev"
        for path in (
            ".local/bin/claude-glm",
            ".local/bin/claude-glm-fleet",
            ".local/bin/claude-glm-lyceum",
            ".config/glm-fleet/claude/fleet.env",
            ".config/glm-fleet/claude/lyceum/settings.json",
        ):
            assert in_node(laptop, "test", "-e", f"{home}/{path}", check=False).returncode == 1, path
        # Claude Code's own state in the fleet profile stays, and so do the CLI and ~/.claude.
        assert in_node(laptop, "test", "-d", f"{home}/.config/glm-fleet/claude/fleet", check=False).returncode == 0
        assert in_node(laptop, "test", "-e", f"{home}/.config/glm-fleet/claude/lyceum", check=False).returncode == 1
        assert in_node(laptop, "cat", f"{home}/.claude/settings.json").stdout.strip() == "{}"
        assert in_node(laptop, "test", "-x", f"{home}/.local/bin/claude", check=False).returncode == 0
    finally:
        in_node(laptop, "rm", "-rf", "/home/dev/.claude")
        again = runner.playbook(playbook)
        assert again.status == "successful", run_log(again)
