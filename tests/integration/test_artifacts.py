"""The artifact stage under faults (Hub stand-in and registry on the lab): a dropped connection, a
flipped byte and a stall are survived and verified; a wrong token, an unknown revision, a gated
repository without a token and a registry mirror that is down fail with a clear message."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO, Runner, lab, run_log

PLAYBOOK = REPO / "tests" / "integration" / "playbooks" / "apply_role.yml"
TARGET = "gpu-2"
REVISION = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"


def node_exec(node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", f"{lab.PREFIX}-{node}", *cmd], check=check, capture_output=True, text=True)


@pytest.fixture
def scratch(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """model_weights into a scratch HF_HOME on the target, straight from the Hub stand-in."""
    base = f"/var/tmp/glm-fault-{request.node.name.split('[')[0][-40:]}"  # noqa: S108 - on the lab node
    node_exec(TARGET, "rm", "-rf", base)
    lab.hub_call("/_lab/reset", {})
    yield {
        "target": TARGET,
        "role": "glm.fleet.model_weights",
        "model_weights_hf_home": f"{base}/hf",
        "model_weights_state_dir": f"{base}/state",
        "model_weights_mirror_url": "",
        "model_weights_stall_timeout": 3,
    }
    node_exec(TARGET, "rm", "-rf", base)
    lab.hub_call("/_lab/reset", {})


def snapshot_result(run: Any) -> dict[str, Any]:
    for event in run.events:
        res = event.get("event_data", {}).get("res", {})
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and ("fetched" in res or "manifest" in res):
            return res
    raise AssertionError("no glm.fleet.hf_snapshot result in the run:\n" + run_log(run))


def failure_message(run: Any) -> str:
    messages = [
        e["event_data"]["res"].get("msg", "")
        for e in run.events
        if e.get("event") == "runner_on_failed" and e["event_data"].get("host") == TARGET
    ]
    assert messages, run_log(run)
    return messages[-1]


def assert_snapshot_verifies(scratch: dict[str, Any]) -> None:
    """Every file on the node has the content the Hub stand-in publishes (sha256 of the bytes)."""
    tree = lab.hub_tree()
    snapshot = f"{scratch['model_weights_hf_home']}/hub/models--zai-org--GLM-5.3-Flash/snapshots/{REVISION}"
    out = node_exec(TARGET, "sh", "-c", f"cd {snapshot} && sha256sum -- *").stdout
    on_node = {line.split()[1]: line.split()[0] for line in out.splitlines()}
    assert on_node == {entry["path"]: entry["sha256"] for entry in tree}


@pytest.mark.parametrize(
    ("kind", "shard", "seen"),
    [
        ("drop", "model-00001-of-00004.safetensors", None),  # the client resumes with a Range request
        ("flip", "model-00002-of-00004.safetensors", "corrupt"),
        ("stall", "model-00003-of-00004.safetensors", "stalls"),
    ],
)
def test_a_faulty_download_is_survived_and_verified(
    runner: Runner, scratch: dict[str, Any], kind: str, shard: str, seen: str | None
) -> None:
    lab.hub_call("/_lab/fault", {"kind": kind, "path": shard, "stall_seconds": 20})
    run = runner.playbook(PLAYBOOK, extravars=scratch)
    assert run.status == "successful", run_log(run)
    assert lab.hub_call("/_lab/stats")["faults_fired"] == [f"{kind}:{shard}"]
    result = snapshot_result(run)
    report = next(r for r in result["fetched"] if r["path"] == shard)
    if seen is not None:
        assert report[seen] >= 1, report
    assert report["attempts"] >= (2 if seen else 1), report
    assert_snapshot_verifies(scratch)

    again = runner.playbook(PLAYBOOK, extravars=scratch)
    assert again.status == "successful", run_log(again)
    assert again.stats["changed"] == {}, "the second run fetched again"


def test_an_interrupted_run_resumes_without_fetching_finished_files(runner: Runner, scratch: dict[str, Any]) -> None:
    """Kill a run half way (its download child and the task); the next run fetches only what is missing."""
    lab.hub_call("/_lab/fault", {"kind": "stall", "path": "model-00003-of-00004.safetensors", "stall_seconds": 60})
    slow = {**scratch, "model_weights_stall_timeout": 30, "model_weights_retries": 1}
    first = runner.playbook(PLAYBOOK, extravars=slow, timeout=25)
    assert first.status in ("failed", "timeout"), run_log(first)
    node_exec(TARGET, "pkill", "-f", "hf_hub_download", check=False)
    done = lab.hub_call("/_lab/stats")["per_file"]
    lab.hub_call("/_lab/reset", {})
    second = runner.playbook(PLAYBOOK, extravars=scratch)
    assert second.status == "successful", run_log(second)
    refetched = lab.hub_call("/_lab/stats")["per_file"]
    finished = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors"}
    assert finished <= set(done), done
    assert not finished & set(refetched), f"finished files were fetched again: {refetched}"
    assert_snapshot_verifies(scratch)


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        ({"model_weights_hf_token": "hf_wrong_token"}, ["refused the token", "model_weights_hf_token"]),
        ({"model_weights_hf_token": ""}, ["is gated", "model_weights_hf_token"]),
        ({"model_weights_revision": "0" * 40}, ["does not exist", "model_weights_revision"]),
        ({"model_weights_revision": "main"}, ["model_weights_revision must be a full 40-hex commit", "got: main"]),
        (
            {"model_weights_revision": "eb9eb20"},
            ["model_weights_revision must be a full 40-hex commit", "got: eb9eb20"],
        ),
    ],
    ids=["wrong-token", "gated-without-token", "unknown-revision", "branch-name", "short-sha"],
)
def test_weights_refusals_are_clear(
    runner: Runner, scratch: dict[str, Any], extravars: dict, expected: list[str]
) -> None:
    run = runner.playbook(PLAYBOOK, extravars={**scratch, **extravars})
    assert run.status == "failed", run_log(run)
    message = failure_message(run)
    for part in expected:
        assert part in message, message
    assert (lab.STATE_DIR / "hf_token").read_text().strip() not in run_log(run)
    assert lab.hub_call("/_lab/stats")["bytes_served"] == 0 or "does not exist" in message


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("lmsysorg/sglang:glm-5.3-flash", "sglang_image_reference must be pinned by digest"),
        ("lmsysorg/sglang@sha256:abc", "got: lmsysorg/sglang@sha256:abc"),
    ],
    ids=["tag-only", "short-digest"],
)
def test_image_references_must_be_pinned(runner: Runner, reference: str, expected: str) -> None:
    run = runner.playbook(PLAYBOOK, extravars={"target": TARGET, "role": "glm.fleet.sglang_image",
                                               "sglang_image_reference": reference})  # fmt: skip
    assert run.status == "failed", run_log(run)
    assert expected in failure_message(run)
    assert run.stats["changed"] == {}


@pytest.fixture
def mirror_down() -> Iterator[None]:
    node_exec("cache-1", "systemctl", "stop", "docker-registry")
    yield
    node_exec("cache-1", "systemctl", "start", "docker-registry")


@pytest.mark.usefixtures("mirror_down")
def test_a_registry_mirror_that_is_down_fails_clearly_after_retries(runner: Runner) -> None:
    missing = "lmsysorg/sglang:not-there@sha256:" + "0" * 64  # not on the node: the engine must pull it
    run = runner.playbook(PLAYBOOK, extravars={"target": TARGET, "role": "glm.fleet.sglang_image",
                                               "sglang_image_reference": missing})  # fmt: skip
    assert run.status == "failed", run_log(run)
    message = failure_message(run)
    assert f"pulling {missing} failed after 3 attempts" in message, message


FORGER = r"""
import hashlib, json, os, sys
real_manifest, snapshot, root, mode = sys.argv[1:5]
data = json.load(open(real_manifest))
weights = os.path.join(root, "weights", "zai-org", "GLM-5.3-Flash")
os.makedirs(os.path.join(weights, data["revision"]), exist_ok=True)
forged = b'{"forged": "by a host answering for the site cache"}\n'
for f in data["files"]:
    dest = os.path.join(weights, data["revision"], f["path"])
    if f["path"] == "config.json":
        open(dest, "wb").write(forged)
        f["size"] = len(forged)
        f["git_oid"] = hashlib.sha1(b"blob %d\0" % len(forged) + forged).hexdigest()
    elif not os.path.exists(dest):
        os.symlink(os.path.join(snapshot, f["path"]), dest)
if mode == "traversal":
    data["files"][0]["git_oid"] = "../../../../../../etc/glm-fleet-traversal-victim"
text = json.dumps(data, indent=1, sort_keys=True) + "\n"
open(os.path.join(weights, data["revision"] + ".manifest.json"), "w").write(text)
print(hashlib.sha256(text.encode()).hexdigest())
"""
STATE = "/var/lib/glm-fleet/weights"
HF_HUB = "/var/lib/glm-fleet/huggingface/hub/models--zai-org--GLM-5.3-Flash"


@pytest.fixture(params=["forged-file", "traversal"])
def impostor(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A server on the LAN answering as the site cache's weights server, with a self-consistent
    manifest: a forged config.json, or (with a wrongly pinned anchor) an id that walks out of the
    cache towards a file the nodes' root owns."""
    root = "/var/tmp/glm-impostor"  # noqa: S108 - on the lab node
    manifest = f"{STATE}/models--zai-org--GLM-5.3-Flash--{REVISION}.manifest.json"
    node_exec("cache-1", "rm", "-rf", root)
    forged = subprocess.run(
        ["docker", "exec", "-i", f"{lab.PREFIX}-cache-1", "python3", "-", manifest, f"{HF_HUB}/snapshots/{REVISION}",
         root, request.param],
        input=FORGER, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    node_exec("cache-1", "sh", "-c", f"cd {root} && setsid python3 -m http.server 8099 >/dev/null 2>&1 &")
    for node in ("gpu-1", "gpu-2"):
        node_exec(node, "sh", "-c", "echo victim > /etc/glm-fleet-traversal-victim")
    yield {"mode": request.param, "forged_sha256": forged, "url": f"http://{lab.SITE_CACHE_ADDRESS}:8099/weights"}
    node_exec("cache-1", "sh", "-c", f"pkill -f 'http.server 8099'; rm -rf {root}", check=False)
    for node in ("gpu-1", "gpu-2"):
        node_exec(node, "rm", "-f", "/etc/glm-fleet-traversal-victim", check=False)


def test_every_node_refuses_a_forged_mirror(runner: Runner, impostor: dict[str, str]) -> None:
    before = {
        n: node_exec(n, "sha256sum", f"{HF_HUB}/snapshots/{REVISION}/config.json").stdout for n in ("gpu-1", "gpu-2")
    }
    extravars: dict[str, Any] = {"model_weights_mirror_url": impostor["url"]}
    if impostor["mode"] == "traversal":  # the anchor pinned to the forgery: the entry check still holds
        extravars["model_weights_mirror_manifest_sha256"] = impostor["forged_sha256"]
    run = runner.playbook(REPO / "playbooks" / "artifacts.yml", extravars=extravars, limit="gpu-1,gpu-2,cache-1")
    assert run.status == "failed", run_log(run)
    failures = {
        e["event_data"]["host"]: e["event_data"]["res"].get("msg", "")
        for e in run.events
        if e.get("event") == "runner_on_failed"
    }
    assert set(failures) == {"gpu-1", "gpu-2"}, failures
    expected = "not the trusted" if impostor["mode"] == "forged-file" else "git blob id that is not 40 hex"
    for host, message in failures.items():
        assert expected in message, (host, message)
        assert node_exec(host, "sha256sum", f"{HF_HUB}/snapshots/{REVISION}/config.json").stdout == before[host]
        assert node_exec(host, "cat", "/etc/glm-fleet-traversal-victim").stdout == "victim\n"


def test_a_signing_key_other_than_the_pinned_one_is_refused_before_apt_trusts_it(runner: Runner) -> None:
    """The lab's repository is signed with the lab's own key: pinned to NVIDIA's real fingerprint,
    the role must stop before it writes the key where apt would trust it."""
    keyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    before = node_exec(TARGET, "sha256sum", keyring, "/etc/apt/keyrings/nvidia-container-toolkit.asc").stdout
    nvidia = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
    run = runner.playbook(PLAYBOOK, extravars={"target": TARGET, "role": "glm.fleet.nvidia_container_toolkit",
                                               "nvidia_container_toolkit_gpg_key_fingerprint": nvidia})  # fmt: skip
    assert run.status == "failed", run_log(run)
    message = failure_message(run)
    assert f"not the pinned nvidia_container_toolkit_gpg_key_fingerprint={nvidia}" in message, message
    assert run.stats["changed"] == {}
    assert node_exec(TARGET, "sha256sum", keyring, "/etc/apt/keyrings/nvidia-container-toolkit.asc").stdout == before
