"""The sglang_server unit, rendered from the role's defaults, runs the deployment recipe's line."""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

import jinja2
import pytest
import standin_deps
import yaml
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.filter.mathstuff import FilterModule as MathFilters
from conftest import REPO, load_file, native, role_vars

from ansible_collections.glm.fleet.plugins.filter.server_instances import guard_chain
from ansible_collections.glm.fleet.plugins.filter.systemd import systemd_exec
from ansible_collections.glm.fleet.plugins.filter.unsafe_text import unsafe_text

ROLE = REPO / "roles" / "sglang_server"

# The recipe's command, as published (image by digest; -d replaced by systemd's foreground run).
RECIPE = """
docker run -d --name pareto-glm53-flash --gpus '"device=0,1,2,3"' --ipc=host --shm-size=64g
  -p 127.0.0.1:18080:18080 -v ~/.cache/huggingface:/root/.cache/huggingface --entrypoint python3
  lmsysorg/sglang:glm-5.3-flash@sha256:aa9210e3507fef64ded0c78afc571d9412b53417c6e271721a095fbde754ad40
  -m sglang.launch_server --model-path zai-org/GLM-5.3-Flash
  --revision eb9eb208eb0d988989d07a6a12d0fdeb5f52574a --served-model-name zai-org/GLM-5.3-Flash
  --host 0.0.0.0 --port 18080 --tp-size 4 --ep-size 4 --context-length 16384
  --max-running-requests 256 --dsa-prefill-backend trtllm --dsa-decode-backend trtllm
  --kv-cache-dtype fp8_e4m3 --moe-runner-backend deep_gemm --reasoning-parser glm45
  --tool-call-parser glm47
"""


def environment() -> jinja2.Environment:
    env = jinja2.Environment(  # noqa: S701 - renders a systemd unit, not HTML
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True
    )
    env.filters.update(CoreFilters().filters())
    env.filters.update(MathFilters().filters())
    env.filters["glm.fleet.systemd_exec"] = systemd_exec
    env.filters["glm.fleet.server_guard_chain"] = guard_chain
    return env


def play_vars(instance: int = 0, **overrides: object) -> dict[str, Any]:
    """The role's variables, its private ones (vars/main.yml) included, on a node of 4 B200s whose
    inventory is /srv/fleet/inventory, inside a loop over its servers at the `instance`-th."""
    env = environment()
    vars_ = role_vars("sglang_server", **overrides)
    vars_["__sglang_server_instance"] = vars_["sglang_server_instances"][instance]
    vars_["groups"] = {"gpu_nodes": ["node-1"], "gateway": []}
    vars_["inventory_dir"] = "/srv/fleet/inventory"
    vars_["ansible_check_mode"] = vars_["__sglang_server_planning"] = False
    vars_["sglang_server_jit_share_dir"] = env.from_string(str(vars_["sglang_server_jit_share_dir"])).render(**vars_)
    vars_.setdefault("ansible_facts", {"glm_fleet_gpus": {"names": ["NVIDIA B200"], "min_compute_capability": "10.0"}})
    private = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    for key, value in private.items():  # private vars are templates over the public ones
        if key.startswith("__sglang_server_failed") or key in (
            "__sglang_server_router",
            "__sglang_server_unchanged",
            "__sglang_server_receipt_inputs",
        ):
            continue  # only in a rescue, in a loop over the gateways, after the configuration step, or at the door
        if isinstance(value, str):
            vars_[key] = native(env.from_string(value).render(**vars_).strip())
        elif isinstance(value, dict):
            vars_[key] = {k: env.from_string(str(v)).render(**vars_).strip() for k, v in value.items()}
        else:
            vars_[key] = value
    vars_["ansible_managed"] = "Ansible managed"
    return vars_


def render(instance: int = 0, **overrides: object) -> str:
    """The unit of the node's `instance`-th server (sglang_server_instances), as the role writes it."""
    vars_ = play_vars(instance, **overrides)
    return environment().from_string((ROLE / "templates" / "sglang.service.j2").read_text()).render(**vars_)


def exec_start(unit: str) -> list[str]:
    lines = unit.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ExecStart="))
    command = []
    for line in lines[start:]:
        command.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return shlex.split(" ".join(command).removeprefix("ExecStart="))


def test_the_recipe_line_is_one_variable_away() -> None:
    """The defaults differ from the recipe only in the context length (200000 for Claude Code), the
    metrics the fleet's Prometheus scrapes (--enable-metrics), counted by developer (the gateway's
    label header) with the cached input reported."""
    assert "--context-length 200000" in render()
    argv = exec_start(render(sglang_server_context_length=16384))
    recipe = shlex.split(RECIPE)
    # The redactor runs docker: it keeps the keys SGLang logs at start out of the journal.
    assert argv[:4] == [
        "/usr/bin/python3", "/usr/local/libexec/glm-fleet/sglang-log-redact",
        "/etc/glm-fleet/sglang/pareto-glm53-flash.yaml", "--",
    ]  # fmt: skip
    argv = argv[4:]
    # systemd runs docker in the foreground and removes the container on exit, instead of -d.
    assert argv[:3] == ["/usr/bin/docker", "run", "--rm"]
    assert recipe[:3] == ["docker", "run", "-d"]
    ours, theirs = argv[3:], recipe[3:]
    # The recipe mounts the invoking user's ~/.cache/huggingface; the unit mounts the fleet's cache's
    # hub (the weights), read-only: the server cannot change a weight.
    theirs[theirs.index("-v") + 1] = "/var/lib/glm-fleet/huggingface/hub:/root/.cache/huggingface/hub:ro"
    # Behind the TLS front (sglang_server_tls), the server's port is on loopback at port + 10000.
    theirs[theirs.index("-p") + 1] = "127.0.0.1:28080:18080"
    # What the unit adds: the persistent JIT caches (one directory per image), no downloads at start,
    # and every JIT cache pointed into that directory by name.
    jit = "/var/lib/glm-fleet/sglang-cache/aa9210e3507fef64:/root/.cache/sglang"
    added = ["-v", jit, "-e", "HF_HUB_OFFLINE=1"]
    position = ours.index("-e")
    assert ours[position - 2 : position + 2] == added
    end = ours.index("--entrypoint")
    assert all(flag == "-e" for flag in ours[position:end:2])
    del ours[position - 2 : end]
    ours.remove("--enable-metrics")
    usage = ["--tokenizer-metrics-custom-labels-header", "x-request-id-glm-fleet-labels",
             "--tokenizer-metrics-allowed-custom-labels", "developer", "--enable-cache-report"]  # fmt: skip
    position = ours.index(usage[0])
    assert ours[position : position + len(usage)] == usage
    del ours[position : position + len(usage)]
    assert ours == theirs


def test_gpu_flag_keeps_the_recipes_quoting() -> None:
    assert """--gpus '"device=0,1,2,3"'""" in render()
    assert """--gpus '"device=4,5,6,7"'""" in render(sglang_server_gpus=[4, 5, 6, 7])


def test_an_8_gpu_node_runs_two_servers_each_with_its_own_gpus_port_name_and_files() -> None:
    instances = [
        {"name": "glm-a", "gpus": [0, 1, 2, 3], "port": 18080},
        {"name": "glm-b", "gpus": [4, 5, 6, 7], "port": 18081},
    ]
    first, second = (
        render(i, sglang_server_instances=instances, sglang_server_api_key="k", sglang_server_env={"A": "1"})
        for i in (0, 1)
    )
    argv = exec_start(second)
    assert argv[argv.index("--name") + 1] == "glm-b"
    assert argv[argv.index("--gpus") + 1] == '"device=4,5,6,7"'
    assert argv[argv.index("-p") + 1] == "127.0.0.1:28081:18081"
    assert argv[argv.index("--port") + 1] == "18081"
    assert "/etc/glm-fleet/sglang/glm-b.yaml:/etc/sglang/config.yaml:ro" in argv
    assert argv[argv.index("--env-file") + 1] == "/etc/glm-fleet/sglang/glm-b.env"
    assert "GLM-glm-b 28081" in second
    assert "ExecStop=/usr/bin/docker stop --time 60 glm-b" in second
    # everything else is the same line: one deployment, two replicas
    differ = {"glm-a": "glm-b", "0,1,2,3": "4,5,6,7", "18080": "18081", "28080": "28081"}
    for old, new in differ.items():
        first = first.replace(old, new)
    assert first == second


def test_api_key_goes_to_a_mounted_config_file_not_the_command_line() -> None:
    argv = exec_start(render(sglang_server_api_key="sk-secret-value"))
    assert "sk-secret-value" not in " ".join(argv)
    assert "/etc/glm-fleet/sglang/pareto-glm53-flash.yaml:/etc/sglang/config.yaml:ro" in argv
    assert argv[argv.index("--config") + 1] == "/etc/sglang/config.yaml"


@pytest.mark.parametrize(
    ("bind", "tls", "published"),
    [
        ("0.0.0.0", False, "0.0.0.0:18080:18080"),  # noqa: S104 - rendering, not binding
        ("::1", False, "[::1]:18080:18080"),
        # Behind the TLS front, the server is the node's own whatever the bind address (the front's).
        ("0.0.0.0", True, "127.0.0.1:28080:18080"),  # noqa: S104
        ("10.0.0.5", True, "127.0.0.1:28080:18080"),
    ],
)
def test_bind_address_is_published(bind: str, tls: bool, published: str) -> None:
    argv = exec_start(render(sglang_server_bind_address=bind, sglang_server_tls=tls))
    assert argv[argv.index("-p") + 1] == published


def test_extras_env_and_metrics_are_rendered() -> None:
    argv = exec_start(
        render(
            sglang_server_extra_args=["--mem-fraction-static", "0.9"],
            sglang_server_env={"NCCL_DEBUG": "WARN"},
            sglang_server_enable_metrics=True,
        )
    )
    # The environment goes through a root-only env file: its values are not in the 0644 unit.
    assert argv[argv.index("--env-file") + 1] == "/etc/glm-fleet/sglang/pareto-glm53-flash.env"
    assert "WARN" not in " ".join(argv)
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.9"
    assert "--enable-metrics" in argv
    assert argv[-2:] == ["--tool-call-parser", "glm47"]


def test_unit_restarts_on_failure_with_a_start_limit() -> None:
    unit = render()
    assert "Restart=on-failure" in unit
    assert "StartLimitBurst=5" in unit
    assert "ExecStartPre=-/usr/bin/docker rm --force pareto-glm53-flash" in unit
    assert "ExecStop=/usr/bin/docker stop --time 60 pareto-glm53-flash" in unit


def test_every_value_stays_one_argument_whatever_it_holds() -> None:
    """A value cannot add a docker flag, a systemd specifier or a variable: it stays one word."""
    argv = exec_start(
        render(
            sglang_server_shm_size="64g --privileged",
            sglang_server_served_model_name="team's %Z model $HOME",
            sglang_server_extra_args=["--chat-template", 'a "quoted" \\path'],
        )
    )
    assert "--shm-size=64g --privileged" in argv
    assert "--privileged" not in argv
    assert argv[argv.index("--served-model-name") + 1] == "team's %%Z model $$HOME"  # systemd reads %Z, $HOME
    assert argv[argv.index("--chat-template") + 1] == 'a "quoted" \\path'


def test_a_line_break_cannot_end_the_exec_line() -> None:
    with pytest.raises(AnsibleFilterError, match="control character"):
        render(sglang_server_served_model_name="glm\nExecStartPost=/bin/sh -c id")
    with pytest.raises(AnsibleFilterError, match="control character"):
        render(sglang_server_extra_args=["--x", "y\n"])


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("plain-word_1.2:3,4@5+6=7/8", "plain-word_1.2:3,4@5+6=7/8"),
        ("50%", "'50%%'"),
        ("$HOME", "'$$HOME'"),
        ("a b", "'a b'"),
        ("it's", '"it\'s"'),
        ('back\\slash"quote', '"back\\\\slash\\"quote"'),
        (4, "4"),
    ],
)
def test_systemd_words(word: object, expected: str) -> None:
    assert systemd_exec([word]) == expected


def test_unsafe_text_names_entries_without_their_values() -> None:
    assert unsafe_text({"OK": "x", "BAD": "sk-secret\n", "NUM": 5}) == ["BAD"]
    assert unsafe_text(["--a", "b\tc", "d"]) == [1]
    assert unsafe_text("clean") == []


def test_the_port_guard_runs_before_every_start_with_the_allowed_sources() -> None:
    sources = ["172.30.253.100", "10.20.0.0/16"]
    unit = render(sglang_server_allowed_sources=sources, sglang_server_tls=False)
    line = next(x for x in unit.splitlines() if "sglang-port-guard" in x)
    assert shlex.split(line.removeprefix("ExecStartPre=")) == [
        "/usr/bin/python3", "/usr/local/libexec/glm-fleet/sglang-port-guard", "GLM-pareto-glm53-flash", "18080",
        "172.30.253.100", "10.20.0.0/16",
    ]  # fmt: skip
    # Behind the TLS front, the plain port (on loopback) is closed to every other host.
    line = next(x for x in render(sglang_server_allowed_sources=sources).splitlines() if "sglang-port-guard" in x)
    assert shlex.split(line.removeprefix("ExecStartPre="))[2:] == ["GLM-pareto-glm53-flash", "28080"]


def test_between_runs_a_timer_puts_back_each_servers_guard_as_its_unit_sets_it() -> None:
    """N5: every 15 s, each server's guard with the arguments its own unit starts it with, in the
    mode that changes nothing while the rules stand."""
    instances = [
        {"name": "glm-a", "gpus": [0, 1, 2, 3], "port": 18080},
        {"name": "glm-b", "gpus": [4, 5, 6, 7], "port": 18081},
    ]
    for tls in (True, False):
        overrides = {"sglang_server_instances": instances, "sglang_server_tls": tls,
                     "sglang_server_allowed_sources": ["10.0.0.9"]}  # fmt: skip
        vars_ = play_vars(**overrides)
        service = environment().from_string((ROLE / "templates" / "glm-sglang-port-guard.service.j2").read_text())
        lines = [x for x in service.render(**vars_).splitlines() if x.startswith("ExecStart=")]
        for number, line in enumerate(lines):
            unit = render(number, **overrides)
            pre = next(x for x in unit.splitlines() if "sglang-port-guard" in x)
            assert shlex.split(line.removeprefix("ExecStart=")) == [
                *shlex.split(pre.removeprefix("ExecStartPre="))[:2], "--repair",
                *shlex.split(pre.removeprefix("ExecStartPre="))[2:],
            ]  # fmt: skip
        assert len(lines) == 2
        assert [shlex.split(x)[4] for x in lines] == (["28080", "28081"] if tls else ["18080", "18081"])
    timer = environment().from_string((ROLE / "templates" / "glm-sglang-port-guard.timer.j2").read_text())
    text = timer.render(**play_vars())
    assert "OnUnitActiveSec=15s" in text.splitlines()
    assert "WantedBy=timers.target" in text.splitlines()


def test_the_tls_front_takes_each_port_and_requires_a_client_certificate() -> None:
    """stunnel's configuration: one section per server, the server's port on the bind address to
    its loopback port, the node's certificate, and a client certificate of the site CA required."""
    instances = [
        {"name": "glm-a", "gpus": [0, 1, 2, 3], "port": 18080},
        {"name": "glm-b", "gpus": [4, 5, 6, 7], "port": 18081},
    ]
    vars_ = play_vars(
        sglang_server_instances=instances,
        sglang_server_bind_address="10.0.0.5",
        sglang_server_advertise_address="gpu-1",
    )
    conf = environment().from_string((ROLE / "templates" / "stunnel.conf.j2").read_text()).render(**vars_)
    lines = [line for line in conf.splitlines() if line and not line.startswith(";")]
    assert lines == [
        "foreground = yes", "pid =", "syslog = no", "debug = warning",
        "cert = /etc/stunnel/glm-fleet/server.pem", "key = /etc/stunnel/glm-fleet/server.key",
        "CAfile = /etc/stunnel/glm-fleet/ca.pem", "verifyChain = yes", "requireCert = yes", "sslVersionMin = TLSv1.2",
        "[glm-a]", "accept = 10.0.0.5:18080", "connect = 127.0.0.1:28080",
        "[glm-b]", "accept = 10.0.0.5:18081", "connect = 127.0.0.1:28081",
    ]  # fmt: skip
    # The gateway and Prometheus reach them as https:// (http:// without the front).
    assert vars_["__sglang_server_endpoints"] == ["https://gpu-1:18080", "https://gpu-1:18081"]
    plain = play_vars(
        sglang_server_instances=instances, sglang_server_advertise_address="gpu-1", sglang_server_tls=False
    )
    assert plain["__sglang_server_endpoints"] == ["http://gpu-1:18080", "http://gpu-1:18081"]


def test_the_port_guard_drops_all_but_the_allowed_sources() -> None:
    guard = load_file(ROLE / "files" / "sglang_port_guard.py")
    assert guard.rules("GLM-x", ["172.30.253.100", "10.20.0.7/16"]) == [
        ["-A", "GLM-x", "-s", "172.30.253.100/32", "-j", "RETURN"],
        ["-A", "GLM-x", "-s", "10.20.0.0/16", "-j", "RETURN"],
        ["-A", "GLM-x", "-j", "DROP"],
    ]
    assert guard.rules("GLM-x", []) == [["-A", "GLM-x", "-j", "DROP"]]
    assert guard.jump("GLM-x", 18080) == [
        "DOCKER-USER", "-p", "tcp", "-m", "conntrack", "--ctstate", "NEW", "--ctorigdstport", "18080", "-j", "GLM-x",
    ]  # fmt: skip


class FakeTables:
    """iptables' filter table as the guard uses it: -N, -F, -A, -I, -C, -S and -L on chains of rules."""

    def __init__(self) -> None:
        self.chains: dict[str, list[list[str]]] = {"FORWARD": [["-j", "DOCKER-USER"]], "DOCKER-USER": []}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        op, chain, rule = args[0], args[1], list(args[2:])
        ok, out = True, ""
        if op in ("-N", "-F"):
            self.chains[chain] = []
        elif op in ("-A", "-I"):
            self.chains[chain].insert(0 if op == "-I" else len(self.chains[chain]), rule)
        elif op == "-C":
            ok = rule in self.chains.get(chain, [])
        elif op in ("-S", "-n"):
            chain = args[-1]
            ok = chain in self.chains
            out = "".join(f"-A {chain} {' '.join(r)}\n" for r in self.chains.get(chain, []))
        if check and not ok:
            raise subprocess.CalledProcessError(1, ["iptables", *args], "", "No chain/target/match by that name.")
        return subprocess.CompletedProcess(["iptables", *args], 0 if ok else 1, out, "")


def test_a_guard_that_is_not_in_place_is_named_and_one_that_would_guard_nothing_does_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guard = load_file(ROLE / "files" / "sglang_port_guard.py")
    tables = FakeTables()
    monkeypatch.setattr(guard, "iptables", tables)
    assert guard.main(["GLM-x", "28080"]) == 0
    assert guard.check("GLM-x", 28080, []) == []
    assert guard.main(["--check", "GLM-x", "28080"]) == 0
    # A firewall reload or `iptables -F` while the server runs: the plan's check names it.
    tables.chains["GLM-x"] = []
    tables.chains["DOCKER-USER"] = []
    assert guard.check("GLM-x", 28080, []) == [
        "DOCKER-USER does not send port 28080 to GLM-x",
        "the chain GLM-x holds other rules than accept none, drop the rest",
    ]
    assert guard.main(["--check", "GLM-x", "28080"]) == 3
    assert guard.check("GLM-x", 28080, ["10.0.0.5"])[-1].endswith("accept 10.0.0.5, drop the rest")
    assert guard.main(["GLM-x", "28080"]) == 0  # put back
    assert guard.check("GLM-x", 28080, []) == []
    # Between runs (the timer): --repair changes nothing while the guard stands, puts back what went away.
    calls = len(tables.calls)
    assert guard.main(["--repair", "GLM-x", "28080"]) == 0
    assert not [c for c in tables.calls[calls:] if c[0] in ("-F", "-A", "-I", "-N")]
    tables.chains["DOCKER-USER"] = []
    assert guard.main(["--repair", "GLM-x", "28080"]) == 0
    assert guard.check("GLM-x", 28080, []) == []
    # Where FORWARD does not pass through DOCKER-USER, the rules guard nothing: the server does not start,
    # and the timer's unit fails (the next run's plan names it).
    tables.chains["FORWARD"] = []
    assert guard.check("GLM-x", 28080, []) == ["the FORWARD chain does not jump to DOCKER-USER"]
    assert guard.main(["GLM-x", "28080"]) == 1
    assert guard.main(["--repair", "GLM-x", "28080"]) == 1


def test_every_jit_cache_is_named_into_the_images_own_directory() -> None:
    """SGLang 0.5.23's caches (sglang/srt/environ.py: SGLANG_CACHE_DIR and the third-party caches
    it redirects; DeepGEMM's own DG_JIT_CACHE_DIR) by explicit variables; a new image, a new directory."""
    argv = exec_start(render())
    env = dict(argv[i + 1].split("=", 1) for i, flag in enumerate(argv) if flag == "-e")
    base = "/root/.cache/sglang"
    assert env == {
        "HF_HUB_OFFLINE": "1", "SGLANG_CACHE_DIR": base, "SGLANG_DG_CACHE_DIR": f"{base}/deep_gemm",
        "DG_JIT_CACHE_DIR": f"{base}/deep_gemm", "SGLANG_JIT_CACHE_DIR": f"{base}/jit",
        "SGLANG_CUTE_AOT_CACHE_DIR": f"{base}/cute_aot", "TRITON_CACHE_DIR": f"{base}/triton",
        "TORCHINDUCTOR_CACHE_DIR": f"{base}/inductor", "CUDA_CACHE_PATH": f"{base}/nv",
        "TILELANG_CACHE_DIR": f"{base}/tilelang", "FLASHINFER_WORKSPACE_BASE": base,
    }  # fmt: skip
    mounts = [argv[i + 1] for i, flag in enumerate(argv) if flag == "-v"]
    assert "/var/lib/glm-fleet/sglang-cache/aa9210e3507fef64:/root/.cache/sglang" in mounts
    other = exec_start(render(sglang_server_image="lmsysorg/sglang:next@sha256:" + "b" * 64))
    assert "/var/lib/glm-fleet/sglang-cache/bbbbbbbbbbbbbbbb:/root/.cache/sglang" in other


def test_the_sglang_source_names_the_caches_the_unit_sets() -> None:
    """The unit's list is SGLang's: every third-party cache environ.py redirects is set."""
    source = standin_deps.sglang_source(REPO / ".lab" / "cache" / "standin", "sglang/srt/environ.py").read_text()
    block = source[source.index("def third_party_cache_defaults") : source.index("def redirect_third_party_caches")]
    names = set(re.findall(r'"([A-Z_]+)": os\.path\.join|"([A-Z_]+)": base', block))
    wanted = {a or b for a, b in names}
    argv = exec_start(render())
    env = {argv[i + 1].split("=", 1)[0] for i, flag in enumerate(argv) if flag == "-e"}
    assert wanted, "environ.py's third_party_cache_defaults moved"
    assert wanted <= env, wanted - env


def test_the_fleets_copy_of_the_jit_caches_is_named_by_image_and_gpu_model() -> None:
    share = play_vars()["__sglang_server_jit_archive"]
    assert share == "/srv/fleet/inventory/.jit-cache/aa9210e3507fef64-NVIDIA-B200-cc10.0.tar.gz"
    other_gpu = {"glm_fleet_gpus": {"names": ["NVIDIA H200", "NVIDIA H100 80GB HBM3"], "min_compute_capability": "9.0"}}
    assert play_vars(ansible_facts=other_gpu)["__sglang_server_jit_archive"].endswith(
        "/aa9210e3507fef64-NVIDIA-H200+NVIDIA-H100-80GB-HBM3-cc9.0.tar.gz"
    )
    image = "registry.example.internal/sglang:next@sha256:" + "c" * 64
    assert play_vars(sglang_server_image=image)["__sglang_server_jit_archive"].startswith(
        "/srv/fleet/inventory/.jit-cache/cccccccccccccccc-"
    )


def docker_options(words: list[str]) -> list[tuple[str, str]]:
    """`docker run`'s options as (flag, value) pairs, `--flag=value` and `-e NAME=value` alike."""
    pairs, i = [], 0
    while i < len(words):
        word = words[i]
        if word.startswith("--env="):
            pairs.append(("-e", word.removeprefix("--env=")))
            i += 1
        elif "=" in word:
            pairs.append(tuple(word.split("=", 1)))  # type: ignore[arg-type]
            i += 1
        elif word == "--rm":
            pairs.append((word, ""))
            i += 1
        else:
            pairs.append((word, words[i + 1]))
            i += 2
    return sorted(pairs)


def test_the_precompile_runs_the_servers_container_and_arguments_but_the_keys() -> None:
    """`python3 -m sglang.compile_deep_gemm` gets what the unit's `docker run` gives the server (GPUs,
    shared memory, mounts, environment, image) and the server's arguments, except: its own container
    name, no network and no published port (the script talks to its server over loopback), no keys
    (the script polls its server without one), and its own --host and --timeout."""
    settings = {
        "sglang_server_api_key": "sk-server", "sglang_server_env": {"NCCL_DEBUG": "WARN"},
        "sglang_server_extra_args": ["--mem-fraction-static", "0.9"], "sglang_server_precompile_timeout": 1800,
    }  # fmt: skip
    unit = exec_start(render(**settings))[4:]
    pre = [str(word) for word in play_vars(**settings)["__sglang_server_precompile_argv"]]
    assert pre[:3] == unit[:3] == ["/usr/bin/docker", "run", "--rm"]
    unit_options = docker_options(unit[3 : unit.index("--entrypoint")])
    pre_options = docker_options(pre[3 : pre.index("--entrypoint")])
    config = ("-v", "/etc/glm-fleet/sglang/pareto-glm53-flash.yaml:/etc/sglang/config.yaml:ro")
    assert config in unit_options
    assert sorted(
        set(unit_options) - {("--name", "pareto-glm53-flash"), ("-p", "127.0.0.1:28080:18080"), config}
    ) == sorted(set(pre_options) - {("--name", "pareto-glm53-flash-precompile"), ("--network", "none")})
    assert ("--network", "none") in pre_options
    image = unit[unit.index("--entrypoint") + 2]
    assert pre[pre.index("--entrypoint") : pre.index("--entrypoint") + 5] == [
        "--entrypoint", "python3", image, "-m", "sglang.compile_deep_gemm",
    ]  # fmt: skip
    server_args = unit[unit.index("sglang.launch_server") + 1 :]
    assert server_args[server_args.index("--config") : server_args.index("--config") + 2] == [
        "--config", "/etc/sglang/config.yaml",
    ]  # fmt: skip
    expected = [w for i, w in enumerate(server_args) if "--config" not in server_args[max(i - 1, 0) : i + 1]]
    expected = [w for i, w in enumerate(expected) if "--host" not in expected[max(i - 1, 0) : i + 1]]
    assert pre[pre.index("sglang.compile_deep_gemm") + 1 :] == [*expected, "--host", "127.0.0.1", "--timeout", "1800"]
    assert "sk-server" not in " ".join(pre)
