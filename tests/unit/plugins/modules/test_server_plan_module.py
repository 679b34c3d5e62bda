"""glm.fleet.server_plan's node half: systemd's view of the unchanged servers' units and one round of
health checks on each, all servers at once, in one module run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ansible.module_utils import basic

from ansible_collections.glm.fleet.plugins.modules import server_plan

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)
KEY = "sk-server-key-0123456789"
SERVERS = [{"name": "glm-a", "port": 18080}, {"name": "glm-b", "port": 18081}, {"name": "glm-c", "port": 18082}]
ARGS = {
    "servers": SERVERS,
    "probe": {"host": "10.0.0.5", "api_key": KEY, "served_model_name": "zai-org/GLM-5.3-Flash"},
    "rollout_group": "glm_fleet_sglang_rollout",
    "steady_group": "glm_fleet_sglang_steady",
}
SHOWN = "Id=glm-a.service\nLoadState=loaded\n\nId=glm-c.service\nLoadState=loaded\n"


def systemctl(mocker: Any, rc: int = 0) -> list[list[str]]:
    calls: list[list[str]] = []

    def run_command(_self: Any, argv: list[str], **_kw: Any) -> tuple[int, str, str]:
        calls.append(list(argv))
        return (rc, SHOWN, "") if rc == 0 else (rc, "", "Failed to connect to bus")

    mocker.patch.object(basic.AnsibleModule, "run_command", run_command)
    return calls


def test_reads_the_unchanged_servers_at_once_in_one_run(mocker: Any, run_main: RunMain) -> None:
    calls = systemctl(mocker)
    # Both unchanged servers must be inside their checks together: one by one, the first waits
    # at the barrier alone and breaks it.
    together = threading.Barrier(2, timeout=5)
    probed: list[tuple[dict[str, Any], int]] = []

    def probe(params: dict[str, Any], port: int) -> dict[str, Any]:
        probed.append((params, port))
        together.wait()
        return {"ready": port == 18080, "port_seen": port}

    mocker.patch.object(server_plan, "probe", probe)
    out = run_main(server_plan.main, {**ARGS, "changed": ["glm-b"]}, check_mode=True)
    assert out["failed"] is False, out
    assert out["changed"] is False
    assert calls == [["systemctl", "show", server_plan.SHOW, "glm-a.service", "glm-c.service"]]
    assert out["systemd"] == SHOWN
    assert [h["port_seen"] for h in out["health"]] == [18080, 18082]  # in the servers' order
    assert sorted(port for _params, port in probed) == [18080, 18082]
    assert {params["timeout"] for params, _port in probed} == {0}  # one round, no wait
    assert {params["api_key"] for params, _port in probed} == {KEY}


def test_every_server_changing_reads_nothing(mocker: Any, run_main: RunMain) -> None:
    calls = systemctl(mocker)
    mocker.patch.object(server_plan, "probe", side_effect=AssertionError("no server may be probed"))
    out = run_main(server_plan.main, {**ARGS, "changed": ["glm-a", "glm-b", "glm-c"]})
    assert (out["failed"], out["systemd"], out["health"], calls) == (False, "", [], [])


def test_a_failed_systemctl_fails_naming_it(mocker: Any, run_main: RunMain) -> None:
    systemctl(mocker, rc=1)
    out = run_main(server_plan.main, ARGS)
    assert out["failed"] is True
    assert out["msg"] == "systemctl show failed: Failed to connect to bus"


def test_the_servers_key_is_a_secret_of_the_run(mocker: Any, run_main: RunMain) -> None:
    systemctl(mocker)
    mocker.patch.object(server_plan, "probe", lambda _params, port: {"ready": True, "port": port})
    leave, secrets = basic.AnsibleModule.exit_json, set()

    def exit_json(self: Any, **result: Any) -> None:
        secrets.update(self.no_log_values)  # what Ansible masks wherever a result repeats it
        leave(self, **result)

    mocker.patch.object(basic.AnsibleModule, "exit_json", exit_json)
    assert run_main(server_plan.main, ARGS)["failed"] is False
    assert KEY in secrets


IMAGE = "registry.example:5000/lmsysorg/sglang@sha256:" + "a" * 64


def docker_at(mocker: Any) -> None:
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", lambda _self, name, **_kw: f"/usr/bin/{name}")


def test_reads_the_images_sglang_release_beside_the_checks(mocker: Any, run_main: RunMain) -> None:
    docker_at(mocker)
    calls: list[list[str]] = []

    def run_command(_self: Any, argv: list[str], **_kw: Any) -> tuple[int, str, str]:
        calls.append(list(argv))
        return (0, "0.5.23\n", "") if argv[0].endswith("/docker") else (0, SHOWN, "")

    mocker.patch.object(basic.AnsibleModule, "run_command", run_command)
    mocker.patch.object(server_plan, "probe", lambda _params, port: {"ready": True, "port": port})
    out = run_main(server_plan.main, {**ARGS, "image": IMAGE}, check_mode=True)
    assert (out["failed"], out["image_sglang_version"], out["image_error"]) == (False, "0.5.23", "")
    docker = next(argv for argv in calls if argv[0] == "/usr/bin/docker")
    # No pull, no network, no GPU runtime: a read of the image as the node has it.
    assert docker == [
        "/usr/bin/docker", "run", "--rm", "--pull", "never", "--network", "none", "--runtime", "runc",
        "--entrypoint", "python3", IMAGE, "-c", server_plan.RELEASE,
    ]  # fmt: skip


def test_an_image_the_node_lacks_gives_no_release_and_the_engines_words(mocker: Any, run_main: RunMain) -> None:
    docker_at(mocker)

    def run_command(_self: Any, argv: list[str], **_kw: Any) -> tuple[int, str, str]:
        if argv[0].endswith("/docker"):
            return 125, "", "docker: Error response from daemon: No such image: " + IMAGE + ".\n"
        return 0, SHOWN, ""

    mocker.patch.object(basic.AnsibleModule, "run_command", run_command)
    mocker.patch.object(server_plan, "probe", lambda _params, port: {"ready": True, "port": port})
    out = run_main(server_plan.main, {**ARGS, "image": IMAGE})
    assert out["failed"] is False
    assert out["image_sglang_version"] is None
    assert out["image_error"] == "docker: Error response from daemon: No such image: " + IMAGE + "."


def test_without_an_image_nothing_is_run_in_docker(mocker: Any, run_main: RunMain) -> None:
    calls = systemctl(mocker)
    mocker.patch.object(server_plan, "probe", lambda _params, port: {"ready": True, "port": port})
    out = run_main(server_plan.main, ARGS)
    assert (out["image_sglang_version"], out["image_error"]) == (None, "")
    assert [argv[0] for argv in calls] == ["systemctl"]


def test_a_node_without_docker_gives_no_release_and_says_so(mocker: Any, run_main: RunMain) -> None:
    systemctl(mocker)
    mocker.patch.object(basic.AnsibleModule, "get_bin_path", return_value=None)
    mocker.patch.object(server_plan, "probe", lambda _params, port: {"ready": True, "port": port})
    out = run_main(server_plan.main, {**ARGS, "image": IMAGE}, check_mode=True)
    assert (out["failed"], out["image_sglang_version"]) == (False, None)
    assert out["image_error"] == "the docker CLI is not installed"
