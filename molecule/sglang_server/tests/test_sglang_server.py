"""What a person checks by hand on a GPU node running the SGLang server unit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
UNIT = "pareto-glm53-flash"
REVISION = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
SERVED = "zai-org/GLM-5.3-Flash"
# The lab's context length, owned by its inventory (group_vars/all), which molecule links.
CONTEXT = yaml.safe_load((REPO / "inventories/lab/group_vars/all/lab.yml").read_text())["deployment_context_length"]


def api_key() -> str:
    return (REPO / ".lab" / "api_key").read_text().strip()


def lab_image() -> str:
    return json.loads((REPO / ".lab" / "services.json").read_text())["sglang_image"]


def health(host, timeout: float = 60) -> dict:  # noqa: ANN001 - testinfra host
    args = {
        "port": 28080,  # the server's own port behind the TLS front, on loopback
        "api_key": "{{ glm_lab_api_key }}",  # from the linked lab group_vars: no key in argv
        "served_model_name": SERVED,
        "expected": {"tp_size": 4, "ep_size": 4, "revision": REVISION, "model_path": SERVED, "context_length": CONTEXT},
        "timeout": timeout,
    }
    return host.ansible("glm.fleet.sglang_health", json.dumps(args), check=False)


def journal(host) -> str:  # noqa: ANN001 - testinfra host
    """The unit's recent journal, printed with a failed assertion."""
    return host.run(f"journalctl -u {UNIT} --no-pager -n 60").stdout


def test_unit_renders_the_recipes_launch_line(host) -> None:  # noqa: ANN001
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    for part in [
        "ExecStartPre=-/usr/bin/docker rm --force pareto-glm53-flash",
        "ExecStart=/usr/bin/python3 /usr/local/libexec/glm-fleet/sglang-log-redact "
        f"/etc/glm-fleet/sglang/{UNIT}.yaml --",
        "/usr/bin/docker run --rm",
        """--gpus '"device=0,1,2,3"'""",
        "--ipc=host",
        "--shm-size=64g",
        "-p 127.0.0.1:28080:18080",  # behind the TLS front: the node's own, at the port + 10000
        "-v /var/lib/glm-fleet/huggingface/hub:/root/.cache/huggingface/hub:ro",
        f"-v /var/lib/glm-fleet/sglang-cache/{lab_image().split('@sha256:')[1][:16]}:/root/.cache/sglang",
        "-e HF_HUB_OFFLINE=1",
        "-e SGLANG_DG_CACHE_DIR=/root/.cache/sglang/deep_gemm",
        "-e TRITON_CACHE_DIR=/root/.cache/sglang/triton",
        "--entrypoint python3",
        lab_image(),
        "-m sglang.launch_server",
        f"--model-path {SERVED}",
        f"--revision {REVISION}",
        f"--served-model-name {SERVED}",
        "--host 0.0.0.0",
        "--port 18080",
        "--tp-size 4",
        "--ep-size 4",
        f"--context-length {CONTEXT}",
        "--max-running-requests 256",
        "--dsa-prefill-backend trtllm",
        "--dsa-decode-backend trtllm",
        "--kv-cache-dtype fp8_e4m3",
        "--moe-runner-backend deep_gemm",
        "--reasoning-parser glm45",
        "--tool-call-parser glm47",
        "ExecStop=/usr/bin/docker stop --time 60 pareto-glm53-flash",
        "Restart=on-failure",
    ]:
        assert part in unit, part
    assert "--restart" not in unit  # systemd restarts it, docker keeps no policy


def test_container_environment_comes_from_a_root_only_env_file(host) -> None:  # noqa: ANN001
    env_file = host.file(f"/etc/glm-fleet/sglang/{UNIT}.env")
    assert (env_file.user, env_file.group, env_file.mode) == ("root", "root", 0o600)
    # the lab's sglang_server_env, sorted by name
    assert env_file.content_string == "GLM_STANDIN_JIT_SECONDS=4\nGLM_STANDIN_LOAD_SECONDS=3\n"
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert f"--env-file /etc/glm-fleet/sglang/{UNIT}.env" in unit
    assert "GLM_STANDIN_LOAD_SECONDS" not in unit


def test_service_is_active_and_enabled(host) -> None:  # noqa: ANN001
    service = host.service(UNIT)
    assert service.is_running, journal(host)
    assert service.is_enabled


def test_container_runs_with_the_expected_arguments(host) -> None:  # noqa: ANN001
    inspect = json.loads(host.check_output(f"docker inspect {UNIT}"))[0]
    args = inspect["Args"]
    assert inspect["Path"] == "python3"
    assert args[:2] == ["-m", "sglang.launch_server"]
    assert args[args.index("--tp-size") + 1] == "4"
    assert args[args.index("--ep-size") + 1] == "4"
    assert "HF_HUB_OFFLINE=1" in inspect["Config"]["Env"]
    assert inspect["HostConfig"]["IpcMode"] == "host"
    assert inspect["HostConfig"]["RestartPolicy"]["Name"] in ("", "no")
    published = [{"HostIp": "127.0.0.1", "HostPort": "28080"}]  # the TLS front takes 18080
    assert inspect["HostConfig"]["PortBindings"]["18080/tcp"] == published
    assert inspect["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == ["0", "1", "2", "3"]


def test_the_tls_front_takes_the_port_and_requires_a_client_certificate(host) -> None:  # noqa: ANN001
    """stunnel, as its own user, holds 18080 with the node's certificate of the site CA; without a
    client certificate of that CA (the gateway's), no request reaches the server."""
    front = host.service("glm-sglang-tls.service")
    assert front.is_running
    assert front.is_enabled
    assert host.process.get(comm="stunnel4").user == "stunnel4"
    key = host.file("/etc/stunnel/glm-fleet/server.key")
    assert (key.mode, key.user) == (0o600, "stunnel4")
    served = host.run("openssl s_client -connect 127.0.0.1:18080 -CAfile /etc/stunnel/glm-fleet/ca.pem </dev/null")
    assert "Verify return code: 0 (ok)" in served.stdout, served.stdout  # the node's certificate, of the site CA
    assert "Acceptable client certificate CA names" in served.stdout  # and it asks for the client's
    plain = host.run("curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://127.0.0.1:18080/health")
    assert plain.rc in (52, 56), plain
    assert plain.stdout == "000", plain
    anonymous = host.run("curl -sk -o /dev/null --max-time 3 https://127.0.0.1:18080/health")
    # the front ends the handshake (35), or in TLS 1.3 the request's send (55) or the read after it (56)
    assert anonymous.rc in (35, 55, 56), anonymous


def test_health_module_passes(host) -> None:  # noqa: ANN001
    result = health(host)
    assert result.get("ready") is True, f"{result}\n{journal(host)}"
    assert result["checks"]["messages"]["ok"]
    assert result["ttft_ms"] is not None


def test_api_key_is_required_and_kept_out_of_sight(host) -> None:  # noqa: ANN001
    key = api_key()
    assert host.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:28080/v1/models").stdout == "401"
    assert host.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:28080/health").stdout == "200"
    config = host.file(f"/etc/glm-fleet/sglang/{UNIT}.yaml")
    assert (config.mode, config.user, config.group) == (0o600, "root", "root")
    assert key in config.content_string
    assert host.file("/etc/glm-fleet/sglang").mode == 0o700
    assert key not in host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert key not in host.check_output("ps -eo args")
    journal = host.check_output(f"journalctl -u {UNIT} --no-pager")
    assert key not in journal
    # The server logged its arguments with the keys (as SGLang does); the journal has them redacted.
    assert "'api_key': '<redacted>'" in journal, journal[-2000:]
    admin = host.file(f"/etc/glm-fleet/sglang/{UNIT}.yaml").content_string
    assert "admin-api-key" in admin
    inspect = host.check_output(f"docker inspect {UNIT}")
    assert key not in inspect


def test_a_killed_container_is_restarted_by_systemd(host) -> None:  # noqa: ANN001
    before = host.check_output(f"docker inspect -f '{{{{.Id}}}}' {UNIT}")
    host.check_output(f"docker kill --signal KILL {UNIT}")
    deadline = time.monotonic() + 90
    after = ""
    while time.monotonic() < deadline:
        out = host.run(f"docker inspect -f '{{{{.Id}}}}' {UNIT}")
        if out.rc == 0 and out.stdout.strip() not in ("", before):
            after = out.stdout.strip()
            break
        time.sleep(1)
    assert after, f"systemd did not start a new container\n{journal(host)}"
    assert health(host, timeout=90).get("ready") is True, journal(host)
    # The new container loaded the kernels the first one compiled, from the image's own cache directory.
    log = journal(host)
    assert "DeepGEMM: compiled glm-standin-kernels-" in host.check_output(f"journalctl -u {UNIT} --no-pager -o cat")
    assert log.rstrip().count("from the JIT cache at /root/.cache/sglang/deep_gemm") >= 1, log
    cache = f"/var/lib/glm-fleet/sglang-cache/{lab_image().split('@sha256:')[1][:16]}/deep_gemm"
    assert host.run(f"ls {cache}/glm-standin-kernels-*.cubin").rc == 0


def test_the_version_that_passed_the_gate_is_kept_to_roll_back_to(host) -> None:  # noqa: ANN001
    last_good = host.file(f"/etc/glm-fleet/sglang/last-good/{UNIT}")
    assert last_good.is_directory
    assert last_good.mode == 0o700
    unit = f"/etc/systemd/system/{UNIT}.service"
    manifest = json.loads(host.file(f"{last_good.path}/manifest.json").content_string)
    assert manifest[unit] == {"present": True, "mode": 0o644}
    copy = host.file(f"{last_good.path}/{unit.replace('/', '%2F')}")
    assert copy.mode == 0o600
    assert copy.content_string == host.file(unit).content_string
    # Not the keys: a rollback keeps the current ones, and no copy of them is kept.
    config = f"/etc/glm-fleet/sglang/{UNIT}.yaml"
    assert sorted(manifest) == sorted([unit, f"/etc/glm-fleet/sglang/{UNIT}.env"])
    assert not host.file(f"{last_good.path}/{config.replace('/', '%2F')}").exists
