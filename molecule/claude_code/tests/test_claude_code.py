"""What a developer checks by hand after onboarding: profiles, launchers, and their own login untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
# The fleet's window is the deployment's context length, which the lab's inventory sets once.
LAB_CONTEXT = yaml.safe_load((REPO / "inventories/lab/group_vars/all/lab.yml").read_text())["deployment_context_length"]
HOME = "/home/dev"
ROOT = f"{HOME}/.config/glm-fleet/claude"


def settings(host, profile: str) -> dict:  # noqa: ANN001 - testinfra host
    return json.loads(host.file(f"{ROOT}/{profile}/settings.json").content_string)


@pytest.mark.parametrize(
    ("profile", "url", "token", "model", "window"),
    [
        ("fleet", "http://127.0.0.1:18080", "molecule-fleet-token", "zai-org/GLM-5.3-Flash", str(LAB_CONTEXT)),
        (
            "lyceum",
            "https://api.lyceum.technology/anthropic",
            "lk_molecule_lyceum_token",
            "z-ai/glm-5.3-flash",
            "1048576",
        ),
    ],
)
def test_profile_settings_point_claude_code_at_the_backend(  # noqa: PLR0917 - one parameter per column
    host,  # noqa: ANN001 - testinfra host
    profile: str,
    url: str,
    token: str,
    model: str,
    window: str,
) -> None:
    f = host.file(f"{ROOT}/{profile}/settings.json")
    assert (f.user, f.mode) == ("dev", 0o600)
    assert host.file(f"{ROOT}/{profile}").mode == 0o700
    env = settings(host, profile)["env"]
    assert env["ANTHROPIC_BASE_URL"] == url
    assert env["ANTHROPIC_AUTH_TOKEN"] == token
    assert "ANTHROPIC_API_KEY" not in env  # AUTH_TOKEN: no approval prompt, works in claude -p
    tiers = (
        "MODEL",
        "DEFAULT_OPUS_MODEL",
        "DEFAULT_SONNET_MODEL",
        "DEFAULT_HAIKU_MODEL",
        "SMALL_FAST_MODEL",
        "FAST_MODEL",
    )
    for tier in tiers:  # every model export of the deployment recipe
        assert env[f"ANTHROPIC_{tier}"] == model
    # The window is the backend's context length; replies fit in the CLI's reserve below it.
    assert env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == window
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == window
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "16384"
    assert env["DISABLE_TELEMETRY"] == "1"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["ENABLE_PROMPT_CACHING_1H"] == "1"


def test_keys_the_developer_added_to_a_profile_are_kept(host) -> None:  # noqa: ANN001
    fleet = settings(host, "fleet")
    assert fleet["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert fleet["env"]["MY_OWN_SETTING"] == "kept"


def test_the_developers_own_login_is_untouched(host) -> None:  # noqa: ANN001
    own = json.loads(host.file(f"{HOME}/.claude/settings.json").content_string)
    assert own == {"env": {"ANTHROPIC_API_KEY": "sk-ant-the-developers-own"}, "theme": "dark"}
    assert sorted(host.file(f"{HOME}/.claude").listdir()) == ["settings.json"]


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("fleet", ["OPENAI_BASE_URL=http://127.0.0.1:18080/v1", "OPENAI_API_KEY=molecule-fleet-token"]),
        (
            "lyceum",
            ["OPENAI_BASE_URL=https://api.lyceum.technology/openai/v1", "LYCEUM_API_KEY=lk_molecule_lyceum_token"],
        ),
    ],
)
def test_env_file_serves_shells_and_openai_sdks(host, profile: str, expected: list[str]) -> None:  # noqa: ANN001
    f = host.file(f"{ROOT}/{profile}.env")
    assert (f.user, f.mode) == ("dev", 0o600)
    out = host.check_output(f"sh -c '. {ROOT}/{profile}.env && env'")
    for line in expected:
        assert line in out.splitlines()


def test_launchers_are_on_the_developers_path(host) -> None:  # noqa: ANN001
    for name, profile in (("claude-glm", "fleet"), ("claude-glm-fleet", "fleet"), ("claude-glm-lyceum", "lyceum")):
        path = host.check_output(f"su - dev -c 'command -v {name}'")
        assert path == f"{HOME}/.local/bin/{name}"
        launcher = host.file(path)
        assert launcher.mode == 0o755
        assert f"CLAUDE_CONFIG_DIR={ROOT}/{profile}\n" in launcher.content_string  # shell-quoted when it needs it
        assert "TOKEN" not in launcher.content_string
