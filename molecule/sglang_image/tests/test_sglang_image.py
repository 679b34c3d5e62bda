"""What a person checks by hand after the image stage: the engine holds the image under the pinned
digest, pulled through the mirror, with no credentials left behind."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def lab_image() -> str:
    return json.loads((REPO / ".lab" / "services.json").read_text())["sglang_image"]


def test_engine_holds_the_pinned_digest(host) -> None:  # noqa: ANN001 - testinfra fixture
    name, digest = lab_image().split("@")
    repo = name.rsplit(":", 1)[0]
    out = host.check_output(f"docker image inspect --format '{{{{json .RepoDigests}}}}' {repo}@{digest}")
    assert f"{repo}@{digest}" in json.loads(out)


def test_the_image_runs_what_the_server_runs(host) -> None:  # noqa: ANN001
    name, digest = lab_image().split("@")
    repo = name.rsplit(":", 1)[0]
    out = host.run(f"docker run --rm --entrypoint python3 {repo}@{digest} -c 'import sglang.launch_server; print(1)'")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_only_the_pinned_image_of_the_repository_is_kept(host) -> None:  # noqa: ANN001
    name = lab_image().split("@")[0].rsplit(":", 1)[0]
    ids = host.check_output(f"docker images --no-trunc --format '{{{{.ID}}}}' {name}").split()
    assert len(set(ids)) == 1


def test_no_registry_credentials_on_disk(host) -> None:  # noqa: ANN001
    assert not host.file("/root/.docker/config.json").exists


def test_the_pull_job_was_recorded_without_credentials(host) -> None:  # noqa: ANN001
    job_file = host.file("/var/lib/glm-fleet/sglang-image-pull.json")
    assert job_file.mode == 0o600
    job = json.loads(job_file.content_string)
    assert job["state"] == "done", job
    assert job["reference"] == lab_image()
    assert job["progress"]["layers"] >= 1
    assert job["progress"]["layers_done"] == job["progress"]["layers"]
    assert lab_image().split("@")[1] in str(job["result"]["repo_digests"])
    assert not {"registry_password", "registry_username"} & set(job)
    assert not host.process.filter(pid=job["pid"])  # the worker has ended
