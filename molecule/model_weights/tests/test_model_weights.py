"""What a person checks by hand after fetching the weights: every file of the revision is in the
snapshot with the sha256 the Hub publishes, owned by root, and the token is nowhere on disk."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
REVISION = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
SNAPSHOT = f"/var/lib/glm-fleet/huggingface/hub/models--zai-org--GLM-5.3-Flash/snapshots/{REVISION}"
HUB = "http://172.30.253.1:8090"


def token() -> str:
    return (REPO / ".lab" / "hf_token").read_text().strip()


def hub_tree() -> list[dict]:
    req = urllib.request.Request(  # noqa: S310 - the lab's fixed http URL
        f"{HUB}/api/models/zai-org/GLM-5.3-Flash/tree/{REVISION}?recursive=true",
        headers={"Authorization": f"Bearer {token()}"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
        return json.load(resp)


@pytest.mark.parametrize("entry", hub_tree(), ids=lambda e: e["path"])
def test_every_file_is_there_and_verifies(host, entry: dict) -> None:  # noqa: ANN001 - testinfra fixture
    path = f"{SNAPSHOT}/{entry['path']}"
    link = host.file(path)
    assert link.is_symlink, f"{path} is not a link into blobs/"
    blob = host.file(host.check_output(f"readlink -f {path}"))
    assert blob.size == entry["size"]
    assert blob.user == "root"
    assert blob.mode & 0o022 == 0, f"{blob.path} is writable by others: {oct(blob.mode)}"
    if "lfs" in entry:
        assert blob.sha256sum == entry["lfs"]["oid"]
        assert blob.path.endswith(entry["lfs"]["oid"])  # blob named by its sha256, as huggingface_hub names it
    else:
        size = blob.size
        git_oid = host.check_output(f"(printf 'blob {size}\\0'; cat {blob.path}) | sha1sum | cut -d' ' -f1")
        assert git_oid == entry["oid"]


def test_client_is_exactly_the_hash_pinned_requirements(host) -> None:  # noqa: ANN001
    """Every package in the client's virtualenv is one the requirements file pins, at its version."""
    lock = (REPO / "roles" / "model_weights" / "files" / "client-requirements.txt").read_text()
    pins = set(re.findall(r"^([a-z0-9-]+)==([^\s;]+)", lock, re.MULTILINE))
    frozen = host.check_output("/opt/glm-fleet/hf/bin/python -m pip freeze --all").splitlines()
    installed = {
        (re.sub(r"[-_.]+", "-", name.lower()), version)
        for name, version in (line.split("==") for line in frozen)
        if name not in ("pip", "setuptools")
    }
    assert {("huggingface-hub", "2.4.0"), ("hf-xet", "1.8.0")} <= installed
    assert installed <= pins, installed - pins
    assert host.file("/opt/glm-fleet/hf/requirements.txt").content_string == lock


def test_no_partial_downloads_left(host) -> None:  # noqa: ANN001
    blobs = SNAPSHOT.rsplit("/snapshots/", 1)[0] + "/blobs"
    assert host.run(f"ls {blobs} | grep -c incomplete").stdout.strip() == "0"


def test_token_is_not_on_disk(host) -> None:  # noqa: ANN001
    found = host.run(f"grep -rl --fixed-strings '{token()}' /var/lib/glm-fleet /opt/glm-fleet /etc /root /tmp")
    assert found.stdout == "", f"the HF token is in: {found.stdout}"


def test_verification_record_and_manifest_are_written(host) -> None:  # noqa: ANN001
    state = "/var/lib/glm-fleet/weights"
    manifest = json.loads(host.file(f"{state}/models--zai-org--GLM-5.3-Flash--{REVISION}.manifest.json").content_string)
    assert manifest["revision"] == REVISION
    assert {f["path"] for f in manifest["files"]} == {e["path"] for e in hub_tree()}
    records = json.loads(host.file(f"{state}/models--zai-org--GLM-5.3-Flash--{REVISION}.verified.json").content_string)
    assert len(records["files"]) == len(manifest["files"])


def test_a_changed_file_is_detected_and_fetched_again(host) -> None:  # noqa: ANN001
    """Flip one byte of a shard on disk (its mtime changes), rerun the role: it fetches that file again."""
    shard = f"{SNAPSHOT}/model-00002-of-00004.safetensors"
    blob = host.check_output(f"readlink -f {shard}")
    want = host.file(blob).sha256sum
    host.run(f"printf '\\x00' | dd of={blob} bs=1 seek=4096 conv=notrunc status=none", sudo=True)
    assert host.file(blob).sha256sum != want
    args = {
        "repo_id": "zai-org/GLM-5.3-Flash",
        "revision": REVISION,
        "cache_dir": "/var/lib/glm-fleet/huggingface/hub",
        "state_dir": "/var/lib/glm-fleet/weights",
        "endpoint": HUB,
        "token": "{{ glm_lab_hf_token }}",  # from the linked lab group_vars: no token in argv
    }
    result = host.ansible("glm.fleet.hf_snapshot", json.dumps(args), become=True, check=False)
    assert result.get("failed") is not True, result
    assert [f["path"] for f in result["to_fetch"]] == ["model-00002-of-00004.safetensors"]
    assert result["to_fetch"][0]["reason"] == "corrupt"
    assert host.file(host.check_output(f"readlink -f {shard}")).sha256sum == want


def test_older_revisions_beyond_the_retention_are_pruned(host) -> None:  # noqa: ANN001
    """prepare.yml left three older revisions; the oldest is named by a server unit."""
    snapshots = SNAPSHOT.rsplit("/", 1)[0]
    blobs = snapshots.rsplit("/", 1)[0] + "/blobs"
    left = set(host.check_output(f"ls {snapshots}").split())
    assert left == {REVISION, "3" * 40, "1" * 40}  # pinned, the newest older one, the one a unit names
    assert not host.file(f"{blobs}/old-2222").exists
    assert host.file(f"{blobs}/old-3333").exists
    assert host.file(f"{snapshots}/{'3' * 40}/config.json").content_string == "3" * 40 + "\n"
