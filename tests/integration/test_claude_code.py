"""End to end: on the lab's laptop, the real Claude Code CLI, started by the role's launcher, gets
its answer from the SGLang stand-ins on the GPU nodes, through the fleet's gateway over HTTPS with
the developer's own key."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, Runner, lab, lab_secrets, leaks, run_log

SERVED = "zai-org/GLM-5.3-Flash"
UNIT = "pareto-glm53-flash"
# The lab's context length (its inventory owns it) and the profiles' output budget (role default).
CONTEXT = yaml.safe_load((REPO / "inventories/lab/group_vars/all/lab.yml").read_text())["deployment_context_length"]
OUTPUT_BUDGET = yaml.safe_load((REPO / "roles/claude_code/defaults/main.yml").read_text())[
    "claude_code_max_output_tokens"
]


def in_node(container: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", container, *cmd], check=check, capture_output=True, text=True)


@pytest.fixture(scope="module")
def onboarded(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    runner = Runner(tmp_path_factory.mktemp("onboard"))
    for playbook in ("sglang_server.yml", "gateway.yml", "developer_laptops.yml"):
        run = runner.playbook(REPO / "playbooks" / playbook)
        assert run.status == "successful", run_log(run)
    nodes = {n["name"]: n for n in lab_state["nodes"]}
    servers = [n["container"] for n in lab_state["nodes"] if n["group"] == "gpu_nodes"]
    return {"laptop": nodes["laptop-1"]["container"], "servers": servers}


def as_developer(laptop: str, script: str) -> subprocess.CompletedProcess[str]:
    """A shell script run by the developer `dev` on the laptop, in a login shell (the script is its
    standard input: a command in it that reads stdin must be given its own)."""
    return subprocess.run(
        ["docker", "exec", "-i", laptop, "su", "-", "dev", "-c", "bash -euo pipefail -s"],
        input=script, capture_output=True, text=True, check=False,
    )  # fmt: skip


def all_requests(servers: list[str], since: str) -> list[dict[str, Any]]:
    """Every request the fleet's stand-ins (every server of every GPU node) logged since `since`."""
    requests = []
    for server in servers:
        journal = in_node(server, "journalctl", "-u", f"{UNIT}*", "-o", "cat", "--no-pager", f"--since={since}")
        requests += [json.loads(line) for line in journal.stdout.splitlines() if line.startswith("{")]
    return requests


def server_requests(servers: list[str], since: str) -> list[dict[str, Any]]:
    """The /v1/messages requests the fleet's stand-ins logged since `since` (one JSON line per request)."""
    return [
        r
        for r in all_requests(servers, since)
        if r["path"].startswith("/v1/messages") and "count_tokens" not in r["path"]
    ]


def test_claude_code_answers_from_the_fleet(onboarded: dict[str, str]) -> None:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 1))
    answer = in_node(
        onboarded["laptop"], "su", "-", "dev", "-c", "claude-glm -p 'Say hello to the fleet.'", check=False
    )
    assert answer.returncode == 0, f"rc={answer.returncode}\nstdout: {answer.stdout}\nstderr: {answer.stderr}"
    assert "Hello from GLM-5.3-Flash" in answer.stdout

    # The request reached a GPU node, with the servers' key: the gateway swapped the developer's own
    # key (from the profile, over HTTPS) for it, so no laptop holds the servers' key.
    messages = [r for r in server_requests(onboarded["servers"], since) if r["status"] == 200]
    assert messages, "no server saw a /v1/messages request"
    key = (lab.STATE_DIR / "api_key").read_text().strip()
    settings = in_node(onboarded["laptop"], "cat", "/home/dev/.config/glm-fleet/claude/fleet/settings.json").stdout
    env = json.loads(settings)["env"]
    assert env["ANTHROPIC_BASE_URL"].startswith("https://")
    assert env["ANTHROPIC_AUTH_TOKEN"] != key
    assert key not in settings
    for request in messages:
        assert request["authorization"] == "bearer"
        assert request["token_sha256"] == hashlib.sha256(key.encode()).hexdigest()
        assert request["x_api_key"] is False  # ANTHROPIC_AUTH_TOKEN, not ANTHROPIC_API_KEY
        assert request["model"] == SERVED


def test_a_long_session_compacts_before_the_server_would_refuse(onboarded: dict[str, str]) -> None:
    """Five turns of about 32,000 tokens each (four times the lab's context in all) in one session:
    Claude Code compacts at the window the profile derived from the fleet's context length, every
    request fits the server's context, and none is refused."""
    rng = random.Random(5)  # noqa: S311 - filler text, not a secret
    words = ("time", "year", "people", "way", "day", "man", "thing", "world", "school", "state", "family", "group")
    notes = "Please keep these notes: " + " ".join(
        rng.choice(words) + str(rng.randrange(100)) for _word in range(16000)
    )
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 1))
    session = as_developer(
        onboarded["laptop"],
        f"""mkdir -p ~/long-session && cd ~/long-session
        cat > notes.txt <<'NOTES'\n{notes}\nNOTES
        claude-glm -p 'Start of a long session.' < /dev/null
        for turn in 1 2 3 4 5; do claude-glm -p --continue < notes.txt; done""",
    )
    assert session.returncode == 0, f"stdout: {session.stdout[-2000:]}\nstderr: {session.stderr[-2000:]}"
    assert session.stdout.count("Hello from GLM-5.3-Flash") == 6

    requests = server_requests(onboarded["servers"], since)
    assert [r["status"] for r in requests] == [200] * len(requests), requests
    assert not [r for r in requests if "error" in r], "a request was refused for its length"
    for r in requests:
        assert r["max_tokens"] == OUTPUT_BUDGET  # the profile's budget reached the CLI
        assert r["input_tokens"] + r["max_tokens"] <= CONTEXT, r
    sent = 5 * 32000  # what the developer typed in the session, far beyond the context
    assert sent > CONTEXT
    assert len(requests) > 6, "no compaction request: the CLI did not compact"
    assert max(r["input_tokens"] for r in requests) < CONTEXT - OUTPUT_BUDGET


def test_claude_code_runs_a_tool_the_model_asks_for(onboarded: dict[str, str]) -> None:
    """The stand-in answers with a streamed tool_use block (SGLang's events); Claude Code runs the
    tool, the file is there, and the next request carries the tool_result."""
    call = {"file_path": "/home/dev/tool-work/hello.txt", "content": "written by Claude Code through the fleet"}
    time.sleep(1.1)  # the journal's --since counts whole seconds: leave the previous test's behind
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    ran = as_developer(
        onboarded["laptop"],
        f"""mkdir -p ~/tool-work && cd ~/tool-work && rm -f hello.txt
        claude-glm -p --allowedTools Write -- 'Write the file [glm-lab tool Write {json.dumps(call)}]' < /dev/null""",
    )
    assert ran.returncode == 0, f"stdout: {ran.stdout[-2000:]}\nstderr: {ran.stderr[-2000:]}"
    assert "the tool ran and its result came back" in ran.stdout
    written = in_node(onboarded["laptop"], "cat", call["file_path"], check=False)
    assert written.stdout == call["content"]
    assert in_node(onboarded["laptop"], "stat", "-c", "%U", call["file_path"]).stdout.strip() == "dev"
    requests = server_requests(onboarded["servers"], since)
    assert [r["tool_results"] for r in requests] == [0, 1], requests
    assert all(r["status"] == 200 for r in requests)


def glm_call(name: str, arguments: dict[str, str]) -> str:
    """A tool call as GLM-5.3 writes it (values raw: a string as it is, anything else as JSON)."""
    pairs = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in arguments.items())
    return f"<tool_call>{name}{pairs}</tool_call>"


def test_claude_code_runs_a_thinking_loop_of_parallel_and_typed_calls(onboarded: dict[str, str]) -> None:
    """A session as GLM-5.3 writes it, raw, through SGLang's template, reasoning parser, glm47
    detector and Anthropic adapter on every server: it thinks, calls Read and Grep in one turn, then
    Edit (a boolean argument) and Bash (an integer one) in one turn, then finishes. Each tool really
    runs on the laptop (Claude Code checks each input against its schema: a number sent as a string
    would fail the call), and each turn's tool_results reach the next request. The turns are
    scripted in the prompt (`[glm-lab turns ...]`), so whichever server gets a turn answers it."""
    work = "/home/dev/loop"
    edit = {"file_path": f"{work}/app.py", "old_string": "TODO", "new_string": "DONE", "replace_all": "false"}
    bash = {"command": f"echo typed > {work}/bash.out", "timeout": "60000", "description": "Leave a marker"}
    turns = [
        "The user wants the TODO fixed; first read the file and search for it.</think>"
        + glm_call("Read", {"file_path": f"{work}/app.py"})
        + glm_call("Grep", {"pattern": "TODO", "path": work, "output_mode": "content"}),
        "Found it on one line; fix it and leave a marker.</think>" + glm_call("Edit", edit) + glm_call("Bash", bash),
        "Both ran.</think>The TODO is fixed and the marker is written.",
    ]
    time.sleep(1.1)  # the journal's --since counts whole seconds: leave the previous test's behind
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    ran = as_developer(
        onboarded["laptop"],
        f"""rm -rf {work} && mkdir -p {work} && cd {work}
        printf 'print("TODO: greet")\n' > app.py
        cat > prompt.txt <<'PROMPT'\nFix the TODO in app.py [glm-lab turns {json.dumps(turns)}]\nPROMPT
        claude-glm -p --allowedTools Read,Grep,Edit,Bash < prompt.txt""",
    )
    assert ran.returncode == 0, f"stdout: {ran.stdout[-2000:]}\nstderr: {ran.stderr[-2000:]}"
    assert "The TODO is fixed and the marker is written." in ran.stdout
    assert in_node(onboarded["laptop"], "cat", f"{work}/app.py").stdout == 'print("DONE: greet")\n'
    assert in_node(onboarded["laptop"], "cat", f"{work}/bash.out").stdout == "typed\n"
    requests = [r for r in server_requests(onboarded["servers"], since) if r["status"] == 200]
    assert [r["tool_results"] for r in requests] == [0, 2, 4], requests


def test_claude_code_with_thinking_on_gets_the_models_thinking(onboarded: dict[str, str]) -> None:
    """MAX_THINKING_TOKENS turns Anthropic `thinking` on; SGLang accepts it for GLM-5.3 (whose
    reasoning is always on) and the answer comes after the thinking."""
    time.sleep(1.1)
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    ran = as_developer(
        onboarded["laptop"], "MAX_THINKING_TOKENS=4096 claude-glm -p 'Think, then greet the fleet.' < /dev/null"
    )
    assert ran.returncode == 0, f"stdout: {ran.stdout[-2000:]}\nstderr: {ran.stderr[-2000:]}"
    assert "Hello from GLM-5.3-Flash" in ran.stdout
    requests = server_requests(onboarded["servers"], since)
    assert requests
    # The pinned CLI asks for "adaptive" thinking (SGLang's Anthropic protocol takes it as enabled).
    assert {(r["thinking"], r["status"]) for r in requests} <= {("enabled", 200), ("adaptive", 200)}, requests


def test_onboarding_prints_no_token_at_any_verbosity(
    onboarded: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """At -vvv: the Runner scans the output for the fleet key, plain, escaped and inside base64
    (settings.json is read back with slurp, which Ansible prints base64-encoded)."""
    runner = Runner(tmp_path_factory.mktemp("verbose"))
    run = runner.playbook(REPO / "playbooks" / "developer_laptops.yml", verbosity=3)
    assert run.status == "successful", run_log(run)


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
    # The developer's own additions: a permission and a variable in the fleet profile, a script of
    # theirs that happens to be named like the launchers.
    own = as_developer(
        laptop,
        "cd ~/.config/glm-fleet/claude/fleet\n"
        'python3 -c \'import json; s = json.load(open("settings.json")); '
        's["permissions"] = {"allow": ["Bash(ls:*)"]}; s["env"]["MY_OWN"] = "kept"; '
        'json.dump(s, open("settings.json", "w"))\'\n'
        "printf '#!/bin/sh\\necho mine\\n' > ~/.local/bin/claude-glm-mine && chmod +x ~/.local/bin/claude-glm-mine\n",
    )
    assert own.returncode == 0, own.stderr
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
        # The developer's own keys stay, without any of the role's; so does their own script.
        left = json.loads(in_node(laptop, "cat", f"{home}/.config/glm-fleet/claude/fleet/settings.json").stdout)
        assert left == {"permissions": {"allow": ["Bash(ls:*)"]}, "env": {"MY_OWN": "kept"}}
        assert in_node(laptop, "cat", f"{home}/.local/bin/claude-glm-mine").stdout == "#!/bin/sh\necho mine\n"
        # Claude Code's own state in the fleet profile stays, and so do the CLI and ~/.claude.
        assert in_node(laptop, "test", "-d", f"{home}/.config/glm-fleet/claude/fleet", check=False).returncode == 0
        assert in_node(laptop, "test", "-e", f"{home}/.config/glm-fleet/claude/lyceum", check=False).returncode == 1
        assert in_node(laptop, "cat", f"{home}/.claude/settings.json").stdout.strip() == "{}"
        assert in_node(laptop, "test", "-x", f"{home}/.local/bin/claude", check=False).returncode == 0
    finally:
        in_node(laptop, "rm", "-rf", "/home/dev/.claude", "/home/dev/.local/bin/claude-glm-mine")
        again = runner.playbook(playbook)
        assert again.status == "successful", run_log(again)


def test_a_developer_onboards_from_their_bundle_alone(
    onboarded: dict[str, str], runner: Runner, tmp_path: Path
) -> None:
    """The gateway's run wrote laptop-1's bundle (0600: their key, their own Lyceum key, the endpoint,
    the CA's certificate, no other secret). With that file alone - no vault, no fleet inventory, no
    secrets directory, no ansible.cfg of ours, the collection as installed - `ansible-playbook
    glm.fleet.onboard -e @FILE` writes the same fleet and Lyceum profiles the site's run wrote,
    prints no key at -vvv, and Claude Code answers through the fleet's."""
    secrets = lab.INVENTORY.parent / ".secrets"
    bundle_file = secrets / "bundles" / "laptop-1.yml"
    assert oct(bundle_file.stat().st_mode & 0o777) == "0o600"
    text = bundle_file.read_text()
    bundle = yaml.safe_load(text)["claude_code_bundle"]
    others = {n: v for n, v in lab_secrets().items() if n not in ("developer key laptop-1", "Lyceum key laptop-1")}
    assert bundle["auth_token"] == (secrets / "developer-keys" / "laptop-1.key").read_text().strip()
    assert bundle["lyceum_auth_token"] == lab_secrets()["Lyceum key laptop-1"]
    assert leaks(text, others) == [], "the bundle holds a secret that is not laptop-1's"
    assert bundle["ca_cert"] == (secrets / "ca" / "ca.pem").read_text().strip()
    assert (bundle["developer"], bundle["model"], bundle["context_length"]) == ("laptop-1", SERVED, CONTEXT)

    laptop = onboarded["laptop"]
    profiles = ".config/glm-fleet/claude"
    fleet_files = [f"{profiles}/fleet/settings.json", f"{profiles}/fleet.env", f"{profiles}/fleet/ca.pem",
                   ".local/bin/claude-glm-fleet", ".local/bin/claude-glm", f"{profiles}/lyceum/settings.json",
                   f"{profiles}/lyceum.env", ".local/bin/claude-glm-lyceum"]  # fmt: skip
    # The profiles as the site's run writes them on a machine without them, then removed again.
    in_node(laptop, "rm", "-f", *(f"/home/dev/{f}" for f in fleet_files))
    site = runner.playbook(REPO / "playbooks" / "developer_laptops.yml")
    assert site.status == "successful", run_log(site)
    before = {f: in_node(laptop, "cat", f"/home/dev/{f}").stdout for f in fleet_files}
    in_node(laptop, "rm", "-f", *(f"/home/dev/{f}" for f in fleet_files))
    # The developer's machine: the bundle in their own directory, the collection installed; the lab
    # reaches "localhost" over SSH, as the developer.
    own = tmp_path / "home"
    own.mkdir()
    (own / "laptop-1.yml").write_text(text)
    inventory = yaml.safe_load(lab.INVENTORY.read_text())["all"]
    laptop_vars = {**inventory["vars"], **inventory["children"]["developer_laptops"]["hosts"]["laptop-1"],
                   "ansible_user": "dev", "ansible_connection": "ssh",
                   "ansible_python_interpreter": "/usr/bin/python3"}  # fmt: skip
    (own / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": laptop_vars}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {"ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(own / ".ansible-tmp"), "HOME": str(own)}  # fmt: skip
    onboard = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-vvv", "-i", "hosts.yml", "glm.fleet.onboard",
         "-e", "@laptop-1.yml", "-e", "{\"claude_code_install_cli\": true}"],  # as the lab's laptop has it
        cwd=own, env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    output = onboard.stdout + onboard.stderr
    assert onboard.returncode == 0, output[-6000:]
    assert leaks(output, lab_secrets()) == [], "a secret in the onboarding's output"
    assert "[DEPRECATION WARNING]" not in output
    after = {f: in_node(laptop, "cat", f"/home/dev/{f}").stdout for f in fleet_files}
    assert after == before
    answer = in_node(laptop, "su", "-", "dev", "-c", "claude-glm-fleet -p 'Say hello to the fleet.'", check=False)
    assert answer.returncode == 0, f"rc={answer.returncode}\nstdout: {answer.stdout}\nstderr: {answer.stderr}"
    assert "Hello from GLM-5.3-Flash" in answer.stdout


def test_a_cli_download_that_differs_from_its_pin_is_not_installed(onboarded: dict[str, str], tmp_path: Any) -> None:
    """The CLI's native package as the npm registry serves it, against a wrong pin: the role stops
    with both values named and installs nothing (a fresh prefix stays empty)."""
    defaults = yaml.safe_load((REPO / "roles/claude_code/defaults/main.yml").read_text())
    pins = dict(defaults["claude_code_cli_integrity"])
    native = "claude-code-linux-x64"
    real, pins[native] = pins[native], "sha512-" + "A" * 86 + "=="
    run = Runner(tmp_path).playbook(
        REPO / "tests/integration/playbooks/apply_role.yml",
        extravars={"target": "laptop-1", "role": "glm.fleet.claude_code", "become_role": False,
                   "claude_code_npm_prefix": ".local-pin-test", "claude_code_cli_integrity": pins},
    )  # fmt: skip
    assert run.status == "failed", run_log(run)
    failed = [e["event_data"]["res"]["msg"] for e in run.events if e.get("event") == "runner_on_failed"]
    assert failed == [
        f"{native}: the download's integrity is {real}, claude_code_cli_integrity pins {pins[native]}; "
        "nothing was installed"
    ]
    left = as_developer(
        onboarded["laptop"],
        "ls -A .local-pin-test 2>/dev/null | grep -v '^$' || true; ls /tmp | grep glm-fleet-claude- || true",
    )
    assert left.stdout.strip() == "", left.stdout


def test_a_key_helper_gives_the_key_and_runs_again_on_a_401(onboarded: dict[str, str], tmp_path: Path) -> None:
    """A site whose own identity system hands out the gateway keys: the fleet profile names a command
    (claude_code_fleet_api_key_helper, Claude Code's apiKeyHelper) and holds no key. The command's
    first answer is a key the gateway refuses (one rotated away); Claude Code runs it again on the
    401 and answers. The env file for SDKs runs it too. The developer's Lyceum key withdrawn, the next
    run withdraws the Lyceum profile and leaves the fleet's. Absent removes the helper with the rest."""
    laptop = onboarded["laptop"]
    key = (lab.INVENTORY.parent / ".secrets" / "developer-keys" / "laptop-1.key").read_text().strip()
    helper = "/home/dev/.fleet-helper"
    script = (
        f"umask 077; mkdir -p {helper}; rm -f {helper}/calls\n"
        f"printf '%s\\n' '{key}' > {helper}/key\n"
        f"cat > {helper}/print-key.sh <<'END'\n"
        f"echo call >> {helper}/calls\n"
        f'if [ "$(wc -l < {helper}/calls)" -le 1 ]; then echo rotatedawayrotatedawayrotatedaway0123; '
        f"else cat {helper}/key; fi\n"
        "END\n"
    )
    written = as_developer(laptop, script)
    assert written.returncode == 0, written.stderr
    root, bin_dir = ".config/glm-fleet-helper", ".local/bin-helper"
    settings = {"target": "laptop-1", "role": "glm.fleet.claude_code", "become_role": False,
                "claude_code_config_root": root, "claude_code_bin_dir": bin_dir, "claude_code_install_cli": False,
                "claude_code_fleet_api_key_helper": f"sh {helper}/print-key.sh"}  # fmt: skip
    runner = Runner(tmp_path)
    try:
        run = runner.playbook(REPO / "tests/integration/playbooks/apply_role.yml", extravars=settings)
        assert run.status == "successful", run_log(run)
        profile = json.loads(in_node(laptop, "cat", f"/home/dev/{root}/fleet/settings.json").stdout)
        assert profile["apiKeyHelper"] == f"sh {helper}/print-key.sh"
        assert "ANTHROPIC_AUTH_TOKEN" not in profile["env"]
        assert profile["env"]["CLAUDE_CODE_API_KEY_HELPER_TTL_MS"] == "300000"
        files = in_node(laptop, "sh", "-c", f"cat /home/dev/{root}/fleet/settings.json /home/dev/{root}/fleet.env")
        assert key not in files.stdout
        answer = as_developer(laptop, f"~/{bin_dir}/claude-glm-fleet -p 'Say hello to the fleet.'")
        assert answer.returncode == 0, f"stdout: {answer.stdout}\nstderr: {answer.stderr}"
        assert "Hello from GLM-5.3-Flash" in answer.stdout
        calls = in_node(laptop, "wc", "-l", f"{helper}/calls").stdout.split()[0]
        assert int(calls) >= 2, "the helper's refused key was not asked for again"
        sdk = as_developer(laptop, f'. ~/{root}/fleet.env && test "$OPENAI_API_KEY" = "$(cat {helper}/key)"')
        assert sdk.returncode == 0, sdk.stderr

        lyceum = [
            f"/home/dev/{root}/lyceum/settings.json",
            f"/home/dev/{root}/lyceum.env",
            f"/home/dev/{bin_dir}/claude-glm-lyceum",
        ]
        assert in_node(laptop, "ls", *lyceum, check=False).returncode == 0  # laptop-1 has a Lyceum key of their own
        without = runner.playbook(REPO / "tests/integration/playbooks/apply_role.yml",
                                  extravars=settings | {"deployment_developer_lyceum_keys": {}})  # fmt: skip
        assert without.status == "successful", run_log(without)
        assert [in_node(laptop, "test", "-e", path, check=False).returncode for path in lyceum] == [1, 1, 1]
        assert in_node(laptop, "test", "-e", f"/home/dev/{bin_dir}/claude-glm-fleet", check=False).returncode == 0
    finally:
        removed = runner.playbook(REPO / "tests/integration/playbooks/apply_role.yml",
                                  extravars=settings | {"claude_code_state": "absent"})  # fmt: skip
        in_node(laptop, "rm", "-rf", helper)
    assert removed.status == "successful", run_log(removed)
    assert in_node(laptop, "test", "-e", f"/home/dev/{root}/fleet/settings.json", check=False).returncode == 1


GATEWAYS = ("cache-1", "gateway-2")  # the lab's gateway hosts, in the inventory's order
KEYS_UNIT = "glm-fleet-gateway-keys.service"


def holders() -> list[str]:
    """The gateway hosts that hold the front door's floating address now."""
    held = []
    for name in GATEWAYS:
        addresses = in_node(f"{lab.PREFIX}-{name}", "ip", "-4", "-o", "addr", "show", check=False).stdout
        if f"inet {lab.FRONT_DOOR_ADDRESS}/32 " in addresses:
            held.append(name)
    return held


def month_of(gateway: str, developer: str) -> dict[str, float]:
    """The developer's month on that gateway's ledger, once its keys program has read the servers."""
    container = f"{lab.PREFIX}-{gateway}"
    # twice: a start while the timer's run is under way waits for that run, which may have read the
    # servers before the last request ended; the second is a run of its own
    for _run in range(2):
        in_node(container, "systemctl", "start", KEYS_UNIT)
    ledger = json.loads(in_node(container, "cat", "/var/lib/glm-fleet/gateway/ledger.json").stdout)
    return ledger["developers"].get(developer, {})


def wait_until(check: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.5)


# On the laptop, as the developer: a request to the front door every 0.1 s for SECONDS, each line
# the moment it was sent and its status (000: none); the key's header comes on stdin, never argv.
WATCH = r"""read -r header
end=$(( $(date +%s) + SECONDS_ ))
while [ "$(date +%s)" -lt "$end" ]; do
  sent=$(date +%s.%N)
  code=$(curl -s -o /dev/null -w '%{http_code}' --connect-timeout 0.5 --max-time 0.5 \
         --cacert ~/.config/glm-fleet/claude/fleet/ca.pem -H @<(printf '%s\n' "$header") URL_/v1/models)
  echo "$sent $code"
  sleep 0.1
done
"""


def watch_front_door(laptop: str, url: str, key: str, seconds: int) -> subprocess.Popen[str]:
    in_node(
        laptop,
        "sh",
        "-c",
        f"cat > /tmp/glm-watch.sh <<'EOF'\n{WATCH.replace('SECONDS_', str(seconds)).replace('URL_', url)}EOF",
    )
    watch = subprocess.Popen(["docker", "exec", "-i", laptop, "su", "-", "dev", "-c", "bash /tmp/glm-watch.sh"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert watch.stdin is not None
    watch.stdin.write(f"Authorization: Bearer {key}\n")
    watch.stdin.close()
    return watch


def watched(watch: subprocess.Popen[str]) -> list[list[str]]:
    """The watch's lines, [sent, status], once it ended."""
    assert watch.stdout is not None
    lines = watch.stdout.read().splitlines()
    watch.wait(timeout=60)
    return [line.split() for line in lines]


def test_the_front_door_moves_to_the_other_gateway_when_its_host_stops(onboarded: dict[str, str]) -> None:
    """Two gateway hosts share the floating address (keepalived): the laptop's profile names the
    address, one gateway holds it. That host stops dead (docker kill: no goodbye to the other);
    requests from the laptop succeed on the other gateway within 5 s, with the same key, and the
    Claude Code session goes on with nothing changed on the laptop. Both gateways count the same
    tokens for the developer (each reads the servers' counters), so limits and budgets agree; the
    stopped host, back, leaves the address where it is (no second move) until it is handed back."""
    laptop = onboarded["laptop"]
    profile = json.loads(in_node(laptop, "cat", "/home/dev/.config/glm-fleet/claude/fleet/settings.json").stdout)
    front_door = f"https://{lab.FRONT_DOOR_ADDRESS}:443"
    assert profile["env"]["ANTHROPIC_BASE_URL"] == front_door
    held = holders()
    assert len(held) == 1, held
    victim, other = held[0], next(name for name in GATEWAYS if name not in held)
    keys = {name: in_node(f"{lab.PREFIX}-{name}", "sha256sum", "/etc/glm-fleet/gateway/keys.json").stdout.split()[0]
            for name in GATEWAYS}  # fmt: skip
    assert keys["cache-1"] == keys["gateway-2"]

    started = as_developer(laptop, "claude-glm -p --output-format json 'Say hello to the fleet.' < /dev/null")
    assert started.returncode == 0, f"stdout: {started.stdout[-2000:]}\nstderr: {started.stderr[-2000:]}"
    session = json.loads(started.stdout)["session_id"]
    before = {name: month_of(name, "laptop-1") for name in GATEWAYS}
    key = (lab.INVENTORY.parent / ".secrets" / "developer-keys" / "laptop-1.key").read_text().strip()
    watch = watch_front_door(laptop, front_door, key, seconds=12)
    stopped_host = f"{lab.PREFIX}-{victim}"
    try:
        time.sleep(2)  # answers before
        subprocess.run(["docker", "kill", stopped_host], check=True, capture_output=True)
        killed = time.time()  # the containers share this machine's clock
        seen = watched(watch)
        answered = [float(sent) for sent, code in seen if code == "200"]
        assert [sent for sent in answered if sent < killed], seen  # the front door answered before
        took = min(sent for sent in answered if sent > killed) - killed
        assert took < 5, f"no request sent within 5 s of the stop succeeded: {seen}"
        assert holders() == [other], took
        print(f"the front door answered from {other}: a request sent {took:.1f} s after {victim} stopped")

        access_log = [f"{lab.PREFIX}-{other}", "cat", "/var/log/nginx/glm-fleet-gateway.log"]
        logged = len(in_node(*access_log).stdout.splitlines())
        resumed = as_developer(laptop, f"claude-glm -p --resume {session} 'Say hello again.' < /dev/null")
        assert resumed.returncode == 0, f"stdout: {resumed.stdout[-2000:]}\nstderr: {resumed.stderr[-2000:]}"
        assert "Hello from GLM-5.3-Flash" in resumed.stdout
        served = in_node(*access_log).stdout.splitlines()[logged:]
        assert any('developer=laptop-1 "POST /v1/messages"' in line and '" 200 ' in line for line in served), served
    finally:
        subprocess.run(["docker", "start", stopped_host], check=True, capture_output=True)
        address = next(n["address"] for n in lab.status()["nodes"] if n["name"] == victim)
        wait_until(lambda: subprocess.run(["ssh-keyscan", "-T", "2", address], capture_output=True,
                                          check=False).returncode == 0, f"{victim} back", 120)  # fmt: skip
        wait_until(lambda: in_node(stopped_host, "systemctl", "is-active", "keepalived", "nginx", "glm-gateway",
                                   check=False).returncode == 0, f"{victim}'s gateway running", 120)  # fmt: skip
    time.sleep(3)  # three of the other's advertisements: the host that is back stays a backup
    assert holders() == [other]
    after = {name: month_of(name, "laptop-1") for name in GATEWAYS}
    grown = {name: {kind: after[name][kind] - before[name].get(kind, 0.0) for kind in after[name]} for name in GATEWAYS}
    assert grown[other]["output"] > 0, grown
    assert grown[victim] == grown[other], grown  # the host that was down read what the servers counted meanwhile

    # Handing the address back: keepalived on the other host restarts, the first takes the address.
    in_node(f"{lab.PREFIX}-{other}", "systemctl", "restart", "keepalived")
    wait_until(lambda: holders() == [victim], f"the address back on {victim}", 10)
    wait_until(lambda: in_node(laptop, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
                               "-k", f"{front_door}/health", check=False).stdout == "200",
               f"the front door on {victim}", 120)  # fmt: skip
