"""glm.fleet.image_pull's pure parts: pinned references, pull progress, what pruning removes."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _docker_api as d

DIGEST = "sha256:" + "aa9210e3507fef64ded0c78afc571d9412b53417c6e271721a095fbde754ad40"


@pytest.mark.parametrize(
    ("ref", "registry", "pinned"),
    [
        (f"lmsysorg/sglang:glm-5.3-flash@{DIGEST}", "docker.io", f"lmsysorg/sglang@{DIGEST}"),
        (f"lmsysorg/sglang@{DIGEST}", "docker.io", f"lmsysorg/sglang@{DIGEST}"),
        (f"docker.io/lmsysorg/sglang:x@{DIGEST}", "docker.io", f"lmsysorg/sglang@{DIGEST}"),
        (f"registry.example.internal:5000/team/sglang:v1@{DIGEST}", "registry.example.internal:5000",
         f"registry.example.internal:5000/team/sglang@{DIGEST}"),
        (f"localhost/sglang@{DIGEST}", "localhost", f"localhost/sglang@{DIGEST}"),
    ],
)  # fmt: skip
def test_pinned_references_parse(ref: str, registry: str, pinned: str) -> None:
    parsed = d.parse_reference(ref)
    assert parsed.registry == registry
    assert parsed.pinned == pinned
    assert parsed.digest == DIGEST


@pytest.mark.parametrize(
    "ref",
    [
        "lmsysorg/sglang:glm-5.3-flash",
        "lmsysorg/sglang:latest",
        "lmsysorg/sglang@sha256:abc",
        f"lmsysorg/sglang@{DIGEST.upper()}",
        f"LMSYSORG/sglang@{DIGEST}",
        "",
    ],
)
def test_references_not_pinned_by_a_full_digest_are_refused(ref: str) -> None:
    with pytest.raises(d.DockerError, match="pinned by digest") as err:
        d.parse_reference(ref)
    assert repr(ref) in str(err.value)


def test_registry_auth_is_the_engines_header_format() -> None:
    data = json.loads(base64.urlsafe_b64decode(d.registry_auth("u", "p@ss", "docker.io")))
    assert data == {"username": "u", "password": "p@ss", "serveraddress": "docker.io"}


def test_pull_progress_adds_up_layers() -> None:
    progress = d.PullProgress()
    events = [
        {"status": "Pulling from lmsysorg/sglang", "id": "glm-5.3-flash"},
        {"status": "Pulling fs layer", "id": "l1"},
        {"status": "Pulling fs layer", "id": "l2"},
        {"status": "Downloading", "id": "l1", "progressDetail": {"current": 50, "total": 100}},
        {"status": "Downloading", "id": "l2", "progressDetail": {"current": 10, "total": 300}},
        {"status": "Download complete", "id": "l1"},
        {"status": "Pull complete", "id": "l1"},
        {"status": "Digest: " + DIGEST},
    ]
    for event in events:
        progress.update(event)
    assert progress.summary() == {"layers": 2, "layers_done": 1, "bytes": 110, "bytes_total": 400}


def test_an_error_event_fails_the_pull() -> None:
    with pytest.raises(d.DockerError, match="manifest unknown"):
        d.PullProgress().update({"error": "manifest unknown", "errorDetail": {"message": "manifest unknown"}})


def test_prune_removes_only_older_pulls_of_the_repository() -> None:
    ref = d.parse_reference(f"lmsysorg/sglang:glm-5.3-flash@{DIGEST}")
    images = [
        {"Id": "sha256:new", "RepoDigests": [f"lmsysorg/sglang@{DIGEST}"]},
        {"Id": "sha256:old", "RepoDigests": ["lmsysorg/sglang@sha256:" + "0" * 64]},
        {"Id": "sha256:local", "RepoDigests": None},  # built on the host: never pruned
        {"Id": "sha256:retagged", "RepoDigests": ["registry.example.internal/team/sglang@sha256:" + "1" * 64]},
    ]
    assert [i["Id"] for i in d.stale_images(images, ref)] == ["sha256:old"]


def test_prune_keeps_the_newest_older_images_to_roll_back_to() -> None:
    ref = d.parse_reference(f"lmsysorg/sglang:glm-5.3-flash@{DIGEST}")
    images = [
        {"Id": "sha256:current", "Created": 400, "RepoDigests": [f"lmsysorg/sglang@{DIGEST}"]},
        {"Id": "sha256:oldest", "Created": 100, "RepoDigests": ["lmsysorg/sglang@sha256:" + "0" * 64]},
        {"Id": "sha256:previous", "Created": 300, "RepoDigests": ["lmsysorg/sglang@sha256:" + "2" * 64]},
        {"Id": "sha256:older", "Created": 200, "RepoDigests": ["lmsysorg/sglang@sha256:" + "3" * 64]},
        {"Id": "sha256:local", "Created": 500, "RepoDigests": None},
    ]
    assert [i["Id"] for i in d.stale_images(images, ref, keep=1)] == ["sha256:older", "sha256:oldest"]
    assert [i["Id"] for i in d.stale_images(images, ref, keep=2)] == ["sha256:oldest"]
    assert d.stale_images(images, ref, keep=3) == []
    assert [i["Id"] for i in d.stale_images(images, ref)] == ["sha256:previous", "sha256:older", "sha256:oldest"]
