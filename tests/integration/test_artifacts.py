"""The artifact stage under faults (Hub stand-in and registry on the lab): a dropped connection, a
flipped byte and a stall are survived and verified; a wrong token, an unknown revision, a gated
repository without a token and a registry mirror that is down fail with a clear message. A pull
from a registry that needs a login, killed mid-way, leaves the password on no file of the node. A
second fetch on a host is told that one runs; a full disk is named with the bytes needed."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import REPO, Runner, host_results, lab, run_log

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


def failure_message(run: Any, host: str = TARGET) -> str:
    messages = [
        e["event_data"]["res"].get("msg", "")
        for e in run.events
        if e.get("event") == "runner_on_failed" and e["event_data"].get("host") == host
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


def test_a_second_fetch_on_the_host_is_told_that_one_runs(runner: Runner, scratch: dict[str, Any]) -> None:
    """Two runs at once on one host: the second stops at once, saying which process holds the lock,
    and changes nothing; the first finishes and verifies."""
    lab.hub_call("/_lab/fault", {"kind": "stall", "path": "model-00002-of-00004.safetensors", "stall_seconds": 8})
    slow = {**scratch, "model_weights_stall_timeout": 30}
    lock = f"{scratch['model_weights_state_dir']}/fetch.lock"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(runner.playbook, PLAYBOOK, extravars=slow)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not first.done():
            if lab.hub_call("/_lab/stats")["faults_fired"]:  # the first run is in its fetch, stalled
                break
            time.sleep(0.3)
        holder = node_exec(TARGET, "cat", lock).stdout.strip()
        second = runner.playbook(PLAYBOOK, extravars=scratch)
        done = first.result(timeout=300)
    assert second.status == "failed", run_log(second)
    message = failure_message(second)
    assert f"another weights fetch is running on this host (pid {holder}, lock {lock})" in message, message
    assert second.stats["changed"] == {}
    assert done.status == "successful", run_log(done)
    assert_snapshot_verifies(scratch)


@pytest.fixture
def small_disk(scratch: dict[str, Any]) -> Iterator[str]:
    """The target's weights cache on a file system of its own (a tmpfs), 6 MiB to start with."""
    mount = scratch["model_weights_hf_home"]
    node_exec(TARGET, "mkdir", "-p", mount)
    node_exec(TARGET, "mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mount)
    yield mount
    node_exec(TARGET, "umount", mount, check=False)


def test_a_full_disk_names_the_path_and_the_bytes_and_records_nothing_unverified(
    runner: Runner, scratch: dict[str, Any], small_disk: str
) -> None:
    """Too small from the start: refused before any download. Filled by another writer during the
    fetch: stopped at once (no retries) naming the file system, the file and the bytes it needs,
    with that file not recorded. With room again, the next run completes and verifies."""
    snapshot = f"{small_disk}/hub/models--zai-org--GLM-5.3-Flash/snapshots/{REVISION}"
    tree = lab.hub_tree()
    total = sum(entry["size"] for entry in tree)
    run = runner.playbook(PLAYBOOK, extravars=scratch)
    assert run.status == "failed", run_log(run)
    message = failure_message(run)
    assert message.startswith(f"{snapshot}: {len(tree)} files ("), message
    assert "need 1.0 GiB free, the file system has 6.0 MiB; free space or point model_weights_hf_home" in message
    assert lab.hub_call("/_lab/stats")["bytes_served"] == 0

    node_exec(TARGET, "mount", "-o", "remount,size=1100m", small_disk)  # room for the files and the 1 GiB margin
    shard = "model-00002-of-00004.safetensors"
    lab.hub_call("/_lab/fault", {"kind": "stall", "path": shard, "stall_seconds": 8})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        filled = pool.submit(runner.playbook, PLAYBOOK, extravars={**scratch, "model_weights_stall_timeout": 30})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not lab.hub_call("/_lab/stats")["faults_fired"]:
            time.sleep(0.2)
        free = int(node_exec(TARGET, "df", "--output=avail", "-B1", small_disk).stdout.split()[-1])
        node_exec(TARGET, "fallocate", "-l", str(free - 512 * 1024), f"{small_disk}/another-writer")
        run = filled.result(timeout=300)
    assert run.status == "failed", run_log(run)
    message = failure_message(run)
    sizes = {entry["path"]: entry["size"] for entry in tree}
    blobs = f"{small_disk}/hub/models--zai-org--GLM-5.3-Flash/blobs"
    assert f"no space left on the file system of {blobs} while fetching {shard}: it needs {sizes[shard]} bytes" in (
        message
    ), message
    assert "attempt 2" not in message
    records = node_exec(TARGET, "sh", "-c", f"cat {scratch['model_weights_state_dir']}/*.verified.json")
    assert shard not in json.loads(records.stdout), records.stdout
    assert total > sizes[shard]

    node_exec(TARGET, "rm", f"{small_disk}/another-writer")
    again = runner.playbook(PLAYBOOK, extravars=scratch)
    assert again.status == "successful", run_log(again)
    assert_snapshot_verifies(scratch)


@pytest.mark.parametrize(
    ("extravars", "expected"),
    [
        ({"model_weights_hf_token": "hf_wrong_token"}, ["refused the token", "model_weights_hf_token"]),
        ({"model_weights_hf_token": ""}, ["is gated", "model_weights_hf_token"]),
        ({"model_weights_revision": "0" * 40}, ["does not exist", "model_weights_revision"]),
        ({"model_weights_revision": "main"}, ["model_weights_revision must be a full 40-hex commit", 'got: "main"']),
        (
            {"model_weights_revision": "eb9eb20"},
            ["model_weights_revision must be a full 40-hex commit", 'got: "eb9eb20"'],
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
        ("lmsysorg/sglang@sha256:abc", 'got: "lmsysorg/sglang@sha256:abc"'),
        ("lmsysorg/sglang@sha256:" + "a" * 64 + "\n", 'got: "lmsysorg/sglang@sha256:' + "a" * 64 + '\\n"'),
        (
            {"sglang_image_registry_username": "bot\n", "sglang_image_registry_password": "x"},
            'sglang_image_registry_username must be printable, without spaces; got: "bot\\n"',
        ),
        (
            {"sglang_image_registry_username": "bot", "sglang_image_registry_password": "pass word"},
            "sglang_image_registry_password holds a space, a line break or another non-printable character",
        ),
    ],
    ids=["tag-only", "short-digest", "digest-newline", "user-newline", "password-space"],
)
def test_image_settings_are_refused_before_any_change(runner: Runner, reference: str | dict, expected: str) -> None:
    settings = reference if isinstance(reference, dict) else {"sglang_image_reference": reference}
    run = runner.playbook(PLAYBOOK, extravars={"target": TARGET, "role": "glm.fleet.sglang_image", **settings})
    assert run.status == "failed", run_log(run)
    assert expected in failure_message(run)
    assert "pass word" not in run_log(run)
    assert run.stats["changed"] == {}


@contextlib.contextmanager
def stopped(node: str, unit: str) -> Iterator[None]:
    node_exec(node, "systemctl", "stop", unit)
    try:
        yield
    finally:
        node_exec(node, "systemctl", "start", unit)


@pytest.fixture
def mirror_down() -> Iterator[None]:
    with stopped("cache-1", "docker-registry"):
        yield


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


MANIFEST = f"{STATE}/models--zai-org--GLM-5.3-Flash--{REVISION}.manifest.json"


@pytest.fixture
def manifests_set_aside() -> Iterator[None]:
    """The GPU nodes' own verified manifests moved away: listing the snapshot needs the mirror."""
    for node in ("gpu-1", "gpu-2"):
        node_exec(node, "mv", MANIFEST, MANIFEST + ".aside")
    yield
    for node in ("gpu-1", "gpu-2"):
        node_exec(node, "mv", MANIFEST + ".aside", MANIFEST)


@pytest.mark.usefixtures("manifests_set_aside")
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


@pytest.fixture
def cache_weights_server_stopped() -> Iterator[None]:
    with stopped("cache-1", "nginx"):
        yield


@pytest.mark.usefixtures("cache_weights_server_stopped")
def test_nodes_that_hold_their_weights_pass_without_the_site_cache(runner: Runner) -> None:
    """The cache's weights server is down: nodes with the complete, verified snapshot pass (their
    own copy of the manifest the cache verified lists it); a node without that copy fails naming
    the cache's URL and what to do."""
    # Every node through the stage (not only those whose receipt does not stand): the fetch itself
    # passes without the cache, fetching nothing; at most a node's receipts are written again (the
    # role tests before this one ran sglang_image with other settings on a node).
    everyone = {"glm_fleet_ignore_receipts": True}
    run = runner.playbook(REPO / "playbooks" / "artifacts.yml", limit="gpu-1,gpu-2,cache-1", extravars=everyone)
    assert run.status == "successful", run_log(run)
    fetched = {e["event_data"]["host"]: e["event_data"]["res"]["fetched"] for e in run.events
               if e.get("event") == "runner_on_ok" and "to_fetch" in e["event_data"].get("res", {})}  # fmt: skip
    assert {node: files for node, files in fetched.items() if node != "cache-1"} == {"gpu-1": [], "gpu-2": []}, fetched
    changed = {(e["event_data"]["host"], e["event_data"]["task"]) for e in run.events
               if e.get("event") == "runner_on_ok" and e["event_data"]["res"].get("changed")}  # fmt: skip
    assert {task for host, task in changed if host != "cache-1"} <= {"Record what the role left on the node"}, changed
    node_exec("gpu-1", "mv", MANIFEST, MANIFEST + ".aside")
    try:
        run = runner.playbook(REPO / "playbooks" / "artifacts.yml", limit="gpu-1,gpu-2,cache-1")
    finally:
        node_exec("gpu-1", "mv", MANIFEST + ".aside", MANIFEST)
    assert run.status == "failed", run_log(run)
    failures = {
        e["event_data"]["host"]: e["event_data"]["res"].get("msg", "")
        for e in run.events
        if e.get("event") == "runner_on_failed"
    }
    assert set(failures) == {"gpu-1"}, failures
    url = f"http://{lab.SITE_CACHE_ADDRESS}:8081/weights/zai-org/GLM-5.3-Flash/{REVISION}.manifest.json"
    assert f"cannot read {url}" in failures["gpu-1"], failures["gpu-1"]
    assert "start the site cache (site.yml --tags site_cache)" in failures["gpu-1"]
    assert "allow it (model_weights_upstream_fallback)" in failures["gpu-1"]
    # Allowed to, a node that needs a file fetches it from upstream (the Hub's stand-in) instead.
    weights = f"{HF_HUB}/snapshots/{REVISION}/model-00004-of-00004.safetensors"
    node_exec("gpu-1", "mv", MANIFEST, MANIFEST + ".aside")
    node_exec("gpu-1", "sh", "-c", f'rm -f "$(readlink -f {weights})" {weights}')
    try:
        fallback = {"model_weights_upstream_fallback": True}
        run = runner.playbook(REPO / "playbooks" / "artifacts.yml", limit="gpu-1,cache-1", extravars=fallback)
    finally:
        node_exec("gpu-1", "sh", "-c", f"test -e {MANIFEST} && rm {MANIFEST}.aside || mv {MANIFEST}.aside {MANIFEST}")
    assert run.status == "successful", run_log(run)
    log = run_log(run)
    assert f"The site cache (http://{lab.SITE_CACHE_ADDRESS}:8081/weights) could not serve the snapshot" in log
    assert "instead (model_weights_upstream_fallback)" in log
    fetched = host_results(run, "Fetch and verify the snapshot from hub")["gpu-1"]
    assert [f["path"] for f in fetched["fetched"]] == ["model-00004-of-00004.safetensors"], fetched
    assert node_exec("gpu-1", "test", "-s", weights, check=False).returncode == 0


FLIP = """
import os, sys
path = os.path.realpath(sys.argv[1])
st = os.stat(path)
with open(path, "r+b") as f:
    f.seek(100)
    byte = f.read(1)
    f.seek(100)
    f.write(bytes([byte[0] ^ 0xFF]))
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
"""


def test_the_scheduled_full_verification_names_a_flipped_byte_and_changes_nothing(runner: Runner) -> None:
    """A byte flipped in place with its mtime put back: the full verification playbook fails on that
    node only, naming the file, with nothing changed. (The routine quick check sees the change time
    move: tests/unit/plugins/modules/test_hf_snapshot.py.)"""
    shard = "model-00004-of-00004.safetensors"
    path = f"/var/lib/glm-fleet/huggingface/hub/models--zai-org--GLM-5.3-Flash/snapshots/{REVISION}/{shard}"
    node_exec("gpu-1", "python3", "-c", FLIP, path)
    flipped = node_exec("gpu-1", "sha256sum", path).stdout
    try:
        run = runner.playbook(REPO / "playbooks" / "verify_weights.yml")
        assert run.status == "failed", run_log(run)
        assert set(run.stats["failures"]) == {"gpu-1"}, run.stats
        # Check mode: gpu-1 reports the fetch it would do, nothing is done (the file is still flipped).
        assert run.stats["changed"] == {"gpu-1": 1}, run.stats
        assert node_exec("gpu-1", "sha256sum", path).stdout == flipped
        message = failure_message(run, "gpu-1")
        assert (
            f"gpu-1: 1 of 9 files of zai-org/GLM-5.3-Flash@{REVISION} are missing or do not verify: {shard}" in message
        )
        assert "ansible-playbook glm.fleet.artifacts -e model_weights_verify=full" in message
        assert "gpu-2: all 9 files of zai-org/GLM-5.3-Flash@" in run_log(run)
    finally:
        repair = runner.playbook(
            REPO / "playbooks" / "artifacts.yml", limit="gpu-1,cache-1", extravars={"model_weights_verify": "full"}
        )
    assert repair.status == "successful", run_log(repair)
    assert [f["path"] for f in snapshot_result(repair)["fetched"]] == [shard]


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


# --- a registry that needs a login ---------------------------------------------------------------

JOB_FILE = "/var/lib/glm-fleet/sglang-image-pull.json"
PRIVATE_PULL = {
    "target": TARGET,
    "role": "glm.fleet.sglang_image",
    "sglang_image_reference": "{{ glm_lab_private_image }}",
    "sglang_image_registry_username": "{{ glm_lab_registry_user }}",
    "sglang_image_registry_password": "{{ glm_lab_registry_password }}",
    "sglang_image_min_free_gb": 1,
}


def registry_password() -> str:
    return (lab.STATE_DIR / "registry_password").read_text().strip()


def files_holding(secret: str) -> list[str]:
    """Files anywhere on the node's filesystems (root, tmpfs mounts) that hold the secret; docker's
    image store, /proc and /sys aside. The secret travels on stdin, never in argv."""
    script = (
        'read -r s; for d in / /tmp /run /var/tmp; do find "$d" -xdev -type f -size -64M -print0; done'
        ' | xargs -0 grep -lsF -e "$s" -- || true'
    )
    found = subprocess.run(["docker", "exec", "-i", f"{lab.PREFIX}-{TARGET}", "sh", "-c", script],
                           input=secret + "\n", capture_output=True, text=True, check=True)  # fmt: skip
    return found.stdout.split()


def read_job() -> dict[str, Any]:
    shown = node_exec(TARGET, "cat", JOB_FILE, check=False).stdout
    try:
        return json.loads(shown)
    except ValueError:
        return {}


@pytest.fixture
def private_image() -> Iterator[str]:
    """The lab's private image, absent from the target before and after the test."""
    reference = lab.status()["private_image"]
    remove = f"docker images -q --no-trunc {reference.split(':lab@')[0]} | xargs -r docker rmi -f"
    node_exec(TARGET, "sh", "-c", remove)
    yield reference
    node_exec(TARGET, "sh", "-c", remove)


def test_a_killed_pull_with_a_registry_login_leaves_the_password_nowhere(runner: Runner, private_image: str) -> None:
    """The registry password is on no file of the node while the pull runs, after its worker is
    killed, and after the pull that follows; the killed pull fails with that said."""
    password = registry_password()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(runner.playbook, PLAYBOOK, extravars=PRIVATE_PULL)
        deadline = time.monotonic() + 120
        job: dict[str, Any] = {}
        while time.monotonic() < deadline and not first.done():
            job = read_job()
            if (
                job.get("reference") == private_image
                and job.get("state") == "running"
                and (job.get("progress", {}).get("bytes", 0) > 0)
            ):
                break
            time.sleep(0.3)
        assert job.get("state") == "running", f"no running pull seen: {job}"
        worker = str(job["pid"])
        # With the link paused, the pull (which the node's docker engine runs, not the worker) cannot
        # finish while the node's files are searched, which can outlast the whole pull on a busy
        # machine; the worker is killed before the link resumes, so the engine cancels the pull.
        with lab.slow_link_paused():
            for proc_file in ("cmdline", "environ"):
                shown = node_exec(TARGET, "cat", f"/proc/{worker}/{proc_file}").stdout
                assert password not in shown, f"the password is in the worker's {proc_file}"
            assert files_holding(password) == [], "the password lies in a file on the node during the pull"
            node_exec(TARGET, "kill", "-9", worker)
        killed = first.result(timeout=300)
    assert killed.status == "failed", run_log(killed)
    assert f"its worker (pid {worker}) ended without a result" in failure_message(killed)
    assert node_exec(TARGET, "docker", "image", "inspect", private_image, check=False).returncode != 0
    assert files_holding(password) == [], "the password lies in a file on the node after the kill"

    again = runner.playbook(PLAYBOOK, extravars=PRIVATE_PULL)
    assert again.status == "successful", run_log(again)
    digests = node_exec(TARGET, "docker", "image", "inspect", "--format", "{{json .RepoDigests}}", private_image)
    name, digest = private_image.split(":lab@")
    assert f"{name}@{digest}" in json.loads(digests.stdout)
    done = read_job()
    assert (done["state"], done["reference"]) == ("done", private_image)
    assert done["progress"]["bytes"] >= 16 * 1024 * 1024
    assert node_exec(TARGET, "stat", "-c", "%a", JOB_FILE).stdout.strip() == "600"
    assert files_holding(password) == [], "the password lies in a file on the node after the pull"

    third = runner.playbook(PLAYBOOK, extravars=PRIVATE_PULL)
    assert third.status == "successful", run_log(third)
    assert third.stats["changed"] == {}


def test_a_wrong_registry_password_fails_clearly(runner: Runner, private_image: str) -> None:
    run = runner.playbook(PLAYBOOK, extravars={**PRIVATE_PULL, "sglang_image_registry_password": "not-the-password",
                                               "sglang_image_pull_retries": 1})  # fmt: skip
    assert run.status == "failed", run_log(run)
    message = failure_message(run)
    assert f"pulling {private_image} failed after 1 attempts" in message, message
    assert "unauthorized" in message or "denied" in message, message
