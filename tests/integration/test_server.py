"""The SGLang server stage on the lab: restarts on change, health gating, faults, and the API key (a
whole rollout of a new image, through the gateway and at -vvv, is in test_gateway.py)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import (
    NO_ROLLOUT,
    PRECOMPILE_TASK,
    REPO,
    Runner,
    host_results,
    lab,
    rollout_plan,
    router_workers,
    run_log,
)

PLAYBOOK = REPO / "playbooks" / "sglang_server.yml"
UNIT = "pareto-glm53-flash"
# The lab's 8-GPU node and its second server (inventories/lab/host_vars/gpu-2.yml)
EIGHT_GPU_NODE, SECOND = "gpu-2", "pareto-glm53-flash-b"
SERVED = "zai-org/GLM-5.3-Flash"
# The guard's rule in DOCKER-USER for the lab's first server, behind its TLS front (files/sglang_port_guard.py).
JUMP_28080 = ("-p", "tcp", "-m", "conntrack", "--ctstate", "NEW", "--ctorigdstport", "28080", "-j")


def node_exec(node: str, *cmd: str, check: bool = True) -> str:
    return subprocess.run(
        ["docker", "exec", f"{lab.PREFIX}-{node}", *cmd], check=check, capture_output=True, text=True
    ).stdout.strip()


def container_id(node: str, name: str = UNIT) -> str:
    return node_exec(node, "docker", "inspect", "-f", "{{.Id}}", name, check=False)


def gpu_nodes(state: dict[str, Any]) -> list[str]:
    return [n["name"] for n in state["nodes"] if n["group"] == "gpu_nodes"]


@pytest.fixture(scope="module")
def serving(lab_state: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every GPU node serves (the server stage, as site.yml runs it)."""
    run = Runner(tmp_path_factory.mktemp("serving")).playbook(PLAYBOOK)
    assert run.status == "successful", run_log(run)
    return gpu_nodes(lab_state)


def health(runner: Runner, pattern: str, **args: Any) -> dict[str, dict[str, Any]]:
    # The key comes from the inventory (group_vars/all/services.yml): argv carries only the template.
    # The server's own port behind the TLS front: 18080 + sglang_server_tls_port_offset, on loopback.
    params = {"port": 28080, "api_key": "{{ glm_lab_api_key }}", "served_model_name": SERVED, **args}
    run = runner.module(pattern, "glm.fleet.sglang_health", json.dumps(params), cmdline="--become")
    return host_results(run)


def test_every_node_serves_through_both_apis(runner: Runner, serving: list[str]) -> None:
    results = health(runner, "gpu_nodes", timeout=60)
    assert set(results) == set(serving)
    for node, res in results.items():
        assert res["ready"], f"{node}: {res}"
        # The chat check asks for 8 tokens: GLM-5.3 spends them thinking, and --reasoning-parser
        # glm45 hands that back as reasoning_content.
        assert res["checks"]["chat"]["detail"] == "generated: A greeting; answer in kind."
        assert res["checks"]["messages"]["ok"]
        assert res["checks"]["tool_use"]["detail"].startswith('JSON: glm_fleet_health({"ready": true, "requests": 1})')


FAULT_FILE = "/tmp/glm-standin-fault"  # noqa: S108 - the stand-in's switch, inside its container


@pytest.fixture
def hung_generation(serving: list[str]) -> Iterator[str]:
    node = serving[0]
    node_exec(node, "docker", "exec", UNIT, "sh", "-c", f"echo hang_generation > {FAULT_FILE}")
    yield node
    node_exec(node, "docker", "exec", UNIT, "rm", "-f", FAULT_FILE)


def test_the_8_gpu_node_runs_two_servers_on_their_own_gpus_and_ports(runner: Runner, serving: list[str]) -> None:
    assert EIGHT_GPU_NODE in serving
    for name, gpus, port in ((UNIT, "0,1,2,3", 18080), (SECOND, "4,5,6,7", 18081)):
        assert node_exec(EIGHT_GPU_NODE, "systemctl", "is-active", f"{name}.service") == "active"
        # docker's --gpus puts the devices into the server's environment (and the node's hook checked them)
        env = node_exec(EIGHT_GPU_NODE, "docker", "exec", name, "cat", "/proc/1/environ").split("\0")
        assert f"NVIDIA_VISIBLE_DEVICES={gpus}" in env, env
        res = health(runner, EIGHT_GPU_NODE, port=port + 10000, timeout=30)[EIGHT_GPU_NODE]  # behind the TLS front
        assert res["ready"], res


def test_a_server_cannot_change_its_weights(serving: list[str]) -> None:
    """N14: the weights reach each server read-only; what the server writes elsewhere in its Hugging
    Face home stays in its own container."""
    snapshot = "/root/.cache/huggingface/hub/models--zai-org--GLM-5.3-Flash/snapshots"
    for node in serving:
        shard = node_exec(node, "docker", "exec", UNIT, "sh", "-c", f"ls -d {snapshot}/*/*.safetensors | head -n 1")
        assert shard.endswith(".safetensors"), (node, shard)
        for attempt in (f"echo x >> {shard}", f"touch {snapshot}/new-file", f"rm -f {shard}"):
            wrote = subprocess.run(
                ["docker", "exec", f"{lab.PREFIX}-{node}", "docker", "exec", UNIT, "sh", "-c", attempt],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert wrote.returncode != 0, (node, attempt)
            assert "Read-only file system" in wrote.stderr, (node, attempt, wrote.stderr)
        node_exec(node, "docker", "exec", UNIT, "touch", "/root/.cache/huggingface/modules-of-the-container")


def test_a_change_to_one_server_restarts_that_server_only(runner: Runner, serving: list[str]) -> None:
    assert EIGHT_GPU_NODE in serving
    first, second = container_id(EIGHT_GPU_NODE), container_id(EIGHT_GPU_NODE, SECOND)
    moved = [
        {"name": UNIT, "gpus": [0, 1, 2, 3], "port": 18080},
        {"name": SECOND, "gpus": [4, 5, 6, 7], "port": 18082},
    ]
    run = runner.playbook(PLAYBOOK, limit=EIGHT_GPU_NODE, extravars={"sglang_server_instances": moved})
    try:
        assert run.status == "successful", run_log(run)
        assert container_id(EIGHT_GPU_NODE) == first, "the unchanged server was restarted"
        assert container_id(EIGHT_GPU_NODE, SECOND) != second
        assert health(runner, EIGHT_GPU_NODE, port=28082, timeout=30)[EIGHT_GPU_NODE]["ready"]  # behind its front
        assert set(host_results(run, "Restart " + SECOND)) == {EIGHT_GPU_NODE}
        assert host_results(run, "Restart " + UNIT) == {}
    finally:
        restore = runner.playbook(PLAYBOOK, limit=EIGHT_GPU_NODE)
        assert restore.status == "successful", run_log(restore)
    assert container_id(EIGHT_GPU_NODE) == first


def test_a_run_restarts_only_the_node_whose_server_stopped_and_says_why(runner: Runner, serving: list[str]) -> None:
    node, other = serving[0], serving[-1]
    untouched = container_id(other)
    node_exec(node, "systemctl", "stop", f"{UNIT}.service")
    run = runner.playbook(PLAYBOOK)
    assert run.status == "successful", run_log(run)
    # the plan names it alone, and the serial play ran on it alone
    assert rollout_plan(run) == {node: f"{UNIT}: not running or not enabled (inactive, enabled)"}
    assert node_exec(node, "systemctl", "is-active", f"{UNIT}.service") == "active"
    assert health(runner, node, timeout=60)[node]["ready"]
    assert container_id(other) == untouched


def test_a_port_guard_that_went_away_is_put_back_without_a_restart(runner: Runner, serving: list[str]) -> None:
    """A firewall reload or `iptables -F` takes the port guard's rules away while the server runs:
    between runs, the node's timer puts them back within its 15 s; with the timer stopped as well, the
    next run's plan names it, puts the rules back and the timer in its place, and restarts nothing;
    the run after is steady."""
    node, chain = serving[0], f"GLM-{UNIT}"[:28]
    untouched = container_id(node)
    rules = node_exec(node, "iptables", "-S", chain)
    node_exec(node, "iptables", "-F", chain)
    node_exec(node, "iptables", "-D", "DOCKER-USER", *JUMP_28080, chain)
    deadline = time.monotonic() + 25

    def jumped() -> bool:
        check = ["docker", "exec", f"{lab.PREFIX}-{node}", "iptables", "-C", "DOCKER-USER", *JUMP_28080, chain]
        return subprocess.run(check, capture_output=True, check=False).returncode == 0

    while node_exec(node, "iptables", "-S", chain) != rules or not jumped():
        assert time.monotonic() < deadline, "the timer did not put the guard back within 25 s"
        time.sleep(1)
    journal = node_exec(node, "journalctl", "-u", "glm-sglang-port-guard.service", "--no-pager", "-o", "cat")
    assert f"(put back: DOCKER-USER does not send port 28080 to {chain}" in journal, journal[-800:]
    assert container_id(node) == untouched
    # Without the timer, the next run puts back both.
    node_exec(node, "systemctl", "stop", "glm-sglang-port-guard.timer")
    node_exec(node, "iptables", "-F", chain)
    run = runner.playbook(PLAYBOOK)
    assert run.status == "successful", run_log(run)
    assert rollout_plan(run) == {
        node: f"{UNIT}: its port guard is not in place (the chain {chain} holds other rules than accept none,"
        " drop the rest)"
    }
    assert node_exec(node, "iptables", "-S", chain) == rules
    assert container_id(node) == untouched
    assert node_exec(node, "systemctl", "is-active", "glm-sglang-port-guard.timer") == "active"
    again = runner.playbook(PLAYBOOK)
    assert again.status == "successful", run_log(again)
    assert rollout_plan(again) == NO_ROLLOUT


def test_a_certificate_issued_anew_reaches_the_nodes_front_without_restarting_a_server(
    runner: Runner, serving: list[str]
) -> None:
    """The controller issues a node's certificate anew (here: its file removed, as a renewal 30 days
    before expiry replaces it): the next run's live look finds the node's copy differs, brings the new
    one to the node and restarts the TLS front, not the servers; the run after is steady."""
    node = serving[0]
    issued = lab.INVENTORY.parent / ".secrets" / "ca" / f"{node}.pem"
    old = issued.read_bytes()
    untouched = container_id(node)
    front_pid = node_exec(node, "systemctl", "show", "--property=MainPID", "--value", "glm-sglang-tls.service")
    issued.unlink()
    run = runner.playbook(PLAYBOOK)
    assert run.status == "successful", run_log(run)
    assert rollout_plan(run) == {node: "the node's TLS front certificate would change"}
    new = issued.read_bytes()
    assert new != old
    assert node_exec(node, "cat", "/etc/stunnel/glm-fleet/server.pem") == new.decode().strip()
    assert node_exec(node, "systemctl", "show", "--property=MainPID", "--value", "glm-sglang-tls.service") != front_pid
    assert container_id(node) == untouched
    again = runner.playbook(PLAYBOOK)
    assert again.status == "successful", run_log(again)
    assert rollout_plan(again) == NO_ROLLOUT


def test_hung_generation_fails_health_although_health_endpoint_says_200(runner: Runner, hung_generation: str) -> None:
    res = health(runner, hung_generation, timeout=4, interval=1, request_timeout=2)[hung_generation]
    assert res["event"] == "runner_on_failed"
    assert res["checks"]["health"] == {**res["checks"]["health"], "ok": True, "detail": "HTTP 200"}
    assert res["failed_check"] == "health_generate"
    assert "check health_generate failed: GET /health_generate: no answer in 2 s" in res["msg"]
    assert res["attempts"] >= 2


def test_argument_drift_fails_at_once(runner: Runner, serving: list[str]) -> None:
    expected = {"tp_size": 8, "revision": "0" * 40, "version": "0.5.24"}
    res = health(runner, serving[0], timeout=60, expected=expected)[serving[0]]
    assert res["event"] == "runner_on_failed"
    assert res["attempts"] == 1
    assert "tp_size: server has 4, inventory expects 8" in res["drift"]
    assert "version: server has '0.5.23', inventory expects '0.5.24'" in res["drift"]
    assert (
        f"revision: server has 'eb9eb208eb0d988989d07a6a12d0fdeb5f52574a', inventory expects '{'0' * 40}'"
        in res["drift"]
    )


def test_an_image_holding_another_sglang_release_is_refused_before_any_restart(
    runner: Runner, serving: list[str]
) -> None:
    """The deployment records 0.5.24 for an image that holds 0.5.23: the plan reads the release from
    the image on each node and stops there, every server left running as it was."""
    before = {node: container_id(node) for node in serving}
    image = json.loads((lab.STATE_DIR / "services.json").read_text())["sglang_image"]
    run = runner.playbook(PLAYBOOK, extravars={"deployment_sglang_version": "0.5.24"})
    assert run.status == "failed", run_log(run)
    log = run_log(run)
    assert (
        'sglang_server_sglang_version (deployment_sglang_version) is "0.5.24", but the image '
        f'{image} on this node holds SGLang "0.5.23"' in log.replace('\\"', '"')
    ), log[-3000:]
    failed = {event["event_data"]["host"] for event in run.events if event["event"] == "runner_on_failed"}
    assert failed == set(serving)
    assert host_results(run, "Restart " + UNIT) == {}
    assert {node: container_id(node) for node in serving} == before


def test_a_restarted_server_loads_its_kernels_from_the_images_jit_cache(runner: Runner, serving: list[str]) -> None:
    """The first start compiled the kernels into the host directory of this image; a restart loads
    them from there (the stand-in's JIT takes 4 s in the lab), and reaches ready sooner."""
    node = serving[0]
    image = node_exec(node, "docker", "inspect", "-f", "{{.Config.Image}}", UNIT)
    cache = f"/var/lib/glm-fleet/sglang-cache/{image.split('@sha256:')[1][:16]}/deep_gemm"
    assert node_exec(node, "sh", "-c", f"ls {cache}/glm-standin-kernels-*.cubin"), f"no kernels in {cache}"
    log = node_exec(node, "journalctl", "-u", UNIT, "-o", "cat", "--no-pager")
    compiled = [line for line in log.splitlines() if line.startswith("DeepGEMM: compiled")]
    assert compiled, log[-2000:]
    since = node_exec(node, "date", "+%Y-%m-%d %H:%M:%S")
    started = time.monotonic()
    node_exec(node, "systemctl", "restart", f"{UNIT}.service")
    assert health(runner, node, timeout=90)[node]["ready"]
    ready = time.monotonic() - started
    after = node_exec(node, "journalctl", "-u", UNIT, "-o", "cat", "--no-pager", f"--since={since}")
    assert "DeepGEMM: glm-standin-kernels-" in after
    assert "from the JIT cache at /root/.cache/sglang/deep_gemm" in after
    assert "DeepGEMM: compiled" not in after
    print(f"cold start: {compiled[0]}; a restart with the cache was ready {ready:.1f} s after systemctl restart")


def rest_untouched_and_canary_back_in_rotation(runner: Runner, serving: list[str], before: dict[str, str]) -> None:
    """After a canary's rollback: the other nodes' servers were not restarted, every server serves,
    and the canary (drained before its restart) is back in the gateway's rotation."""
    canary, rest = serving[0], serving[1:]
    for node in rest:
        assert container_id(node) == before[node], f"{node} was restarted after the canary failed"
    fleet = health(runner, ",".join(serving), timeout=30)
    assert all(res["ready"] for res in fleet.values()), fleet
    address = next(n["address"] for n in lab.status()["nodes"] if n["name"] == canary)
    assert router_workers().get(f"https://{address}:18080") is True, router_workers()


def test_a_canary_that_never_becomes_healthy_is_rolled_back_and_stops_the_rollout(
    runner: Runner, serving: list[str]
) -> None:
    canary, rest = serving[0], serving[1:]
    env_file = f"/etc/glm-fleet/sglang/{UNIT}.env"
    before = {node: container_id(node) for node in serving}
    unit_before = {node: node_exec(node, "cat", f"/etc/systemd/system/{UNIT}.service") for node in serving}
    env_before = node_exec(canary, "cat", env_file)  # the lab's environment (its stand-in's settings)
    assert "GLM_STANDIN_FAULT" not in env_before
    broken = {"GLM_STANDIN_LOAD_SECONDS": "1", "GLM_STANDIN_FAULT": "never_ready"}
    run = runner.playbook(PLAYBOOK, extravars={"sglang_server_env": broken, "sglang_server_ready_timeout": 8})
    try:
        assert run.status == "failed", run_log(run)
        assert set(run.stats["failures"]) == {canary}
        log = run_log(run)
        # The message names the check that failed, and the rollback's outcome.
        assert f"{UNIT} (port 18080): SGLang at 127.0.0.1:28080 is not ready after" in log
        assert "check health failed" in log
        assert "Rolled back to its last good version (unit, environment; the current keys), which serves again." in log
        # The canary runs its last good version again: its unit and env file, a new container, healthy.
        assert container_id(canary) not in ("", before[canary])
        assert node_exec(canary, "cat", f"/etc/systemd/system/{UNIT}.service") == unit_before[canary]
        assert node_exec(canary, "cat", env_file) == env_before
        assert "GLM_STANDIN_FAULT" not in node_exec(canary, "docker", "inspect", "-f", "{{.Config.Env}}", UNIT)
        for node in rest:
            assert node_exec(node, "cat", f"/etc/systemd/system/{UNIT}.service") == unit_before[node]
        rest_untouched_and_canary_back_in_rotation(runner, serving, before)
    finally:
        restore = runner.playbook(PLAYBOOK)
        assert restore.status == "successful", run_log(restore)
    # Rolled back completely: the inventory's version changes nothing on the canary.
    assert restore.stats["changed"].get(canary, 0) == 0, run_log(restore)


def test_a_canary_whose_kernels_do_not_compile_in_time_is_rolled_back(runner: Runner, serving: list[str]) -> None:
    """With sglang_server_precompile, a canary without kernels for its image runs the stand-in's
    compile_deep_gemm, which (as the real script) polls every 10 s and never exits on its own timeout:
    the run stops its container at sglang_server_precompile_timeout, does not restart the server on
    the new version, rolls it back (healthy, back in rotation), and stops with a message naming the
    compile; the other nodes are untouched."""
    canary = serving[0]
    before = {node: container_id(node) for node in serving}
    unit_before = node_exec(canary, "cat", f"/etc/systemd/system/{UNIT}.service")
    node_exec(canary, "sh", "-c", "rm -rf /var/lib/glm-fleet/sglang-cache/*")  # no kernels for any image
    changed = {"GLM_STANDIN_LOAD_SECONDS": "1", "GLM_STANDIN_JIT_SECONDS": "4"}
    settings = {
        "sglang_server_env": changed, "sglang_server_precompile": True, "sglang_server_precompile_timeout": 5,
        "sglang_server_jit_share": False,  # the fleet's copy would seed the canary: nothing to compile
    }  # fmt: skip
    run = runner.playbook(PLAYBOOK, extravars=settings)
    try:
        assert run.status == "failed", run_log(run)
        assert set(run.stats["failures"]) == {canary}
        log = run_log(run)
        assert (
            f"{UNIT} (port 18080): its kernels did not compile (python3 -m sglang.compile_deep_gemm): "
            "it did not finish within sglang_server_precompile_timeout (5 s)"
        ) in log
        assert "Rolled back to its last good version (unit, environment; the current keys), which serves again." in log
        compiles = [
            e["event_data"]["host"] for e in run.events if e.get("event") == "runner_on_ok"
            and e["event_data"].get("task", "").startswith(PRECOMPILE_TASK)
        ]  # fmt: skip
        assert compiles == [canary]
        # Stopped at the deadline, its container removed; the server never ran the new version.
        assert node_exec(canary, "docker", "ps", "--all", "--quiet", "--filter", f"name={UNIT}-precompile") == ""
        assert node_exec(canary, "cat", f"/etc/systemd/system/{UNIT}.service") == unit_before
        assert container_id(canary) not in ("", before[canary])
        environment = node_exec(canary, "docker", "inspect", "-f", "{{.Config.Env}}", UNIT)
        assert "GLM_STANDIN_LOAD_SECONDS=1" not in environment
        rest_untouched_and_canary_back_in_rotation(runner, serving, before)
    except BaseException:  # rolled back, the canary runs the inventory's version: only a failure needs this
        restore = runner.playbook(PLAYBOOK)
        assert restore.status == "successful", run_log(restore)
        raise


def test_the_serving_key_is_not_an_admin_key(serving: list[str]) -> None:
    """With an admin key set, SGLang's admin routes refuse the key the laptops hold. The keys are
    read on the node from its root-only config file, so they pass through no Ansible output."""
    results = {}
    for name, field in (("serving", "api-key"), ("admin", "admin-api-key")):
        script = (
            f"key=$(sed -n 's/^{field}: \"\\(.*\\)\"$/\\1/p' /etc/glm-fleet/sglang/{UNIT}.yaml) && "
            'curl -s -o /dev/null -w "%{http_code}" -X POST -H "Authorization: Bearer $key" '
            "http://127.0.0.1:28080/flush_cache"
        )
        results[name] = node_exec(serving[0], "sh", "-c", script)
    assert results == {"serving": "401", "admin": "200"}


def test_the_port_speaks_mutual_tls_and_lets_in_only_the_gateways_certificate(serving: list[str]) -> None:
    """gpu-1's port 18080 is its TLS front (sglang_server_tls): the gateway, with its client
    certificate of the site CA, gets an answer, verifying the node's certificate for its address. A
    plain HTTP request, a TLS client without a certificate (the laptop), and another GPU node with
    its own certificate of the same CA (a server's, not a client's) are refused; the server's own
    port (28080) is the node's alone."""
    target = lab.status()["nodes"]
    address = next(n["address"] for n in target if n["name"] == serving[0])
    other = next(n["name"] for n in target if n["group"] == "gpu_nodes" and n["name"] != serving[0])

    def curl(node: str, url: str, *tls: str) -> tuple[int, str]:
        probe = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3", *tls, url]
        done = subprocess.run(
            ["docker", "exec", f"{lab.PREFIX}-{node}", *probe], capture_output=True, text=True, check=False
        )
        return done.returncode, done.stdout

    front = f"https://{address}:18080/health"
    gateway = "/etc/glm-fleet/gateway/servers-tls"
    assert curl("cache-1", front, "--cacert", f"{gateway}/ca.pem", "--cert", f"{gateway}/client.pem",
                "--key", f"{gateway}/client.key") == (0, "200")  # fmt: skip
    # curl 56: the front ends the connection (no HTTP answer at all).
    for node in ("cache-1", "laptop-1", other):
        assert curl(node, f"http://{address}:18080/health")[0] in (52, 56), node
    # The front's alert ends the handshake (curl 35) or, in TLS 1.3, the request's send (55) or the
    # first read after it (56), whichever the alert reaches first.
    node_ca = "/etc/stunnel/glm-fleet/ca.pem"
    assert curl(other, front, "--cacert", node_ca)[0] in (35, 55, 56)  # no client certificate
    assert curl(other, front, "--cacert", node_ca, "--cert", "/etc/stunnel/glm-fleet/server.pem",
                "--key", "/etc/stunnel/glm-fleet/server.key")[0] in (35, 55, 56)  # a server's certificate  # fmt: skip
    for node in ("cache-1", other):
        assert curl(node, f"http://{address}:28080/health")[0] in (7, 28), node  # refused or dropped
    assert node_exec(serving[0], "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                     "http://127.0.0.1:28080/health") == "200"  # fmt: skip
