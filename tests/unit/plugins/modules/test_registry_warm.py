"""Warming a pull-through mirror: every blob it lacks is asked for once, one byte read, and waited
for until stored; a stored blob is left alone; a blob never stored fails naming it."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _registry_warm as rw


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


BLOBS = {digest(b): b for b in (b"config", b"layer-1" * 1000, b"layer-2" * 1000)}
CONFIG, LAYER1, LAYER2 = BLOBS
MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": CONFIG},
                       "layers": [{"digest": LAYER1}, {"digest": LAYER2}]}).encode()  # fmt: skip
ARM = json.dumps({"schemaVersion": 2, "config": {"digest": digest(b"arm")}, "layers": []}).encode()
INDEX = json.dumps({"manifests": [
    {"digest": digest(ARM), "platform": {"os": "linux", "architecture": "arm64"}},
    {"digest": digest(MANIFEST), "platform": {"os": "linux", "architecture": "amd64"}},
]}).encode()  # fmt: skip
MANIFESTS = {digest(m): m for m in (MANIFEST, ARM, INDEX)}


class FakeMirror:
    """A proxy's behaviour: a blob asked for is stored in the background (unless told not to)."""

    def __init__(self, storage: Path, never_store: frozenset[str] = frozenset()) -> None:
        self.storage, self.never_store = storage, never_store
        self.requests: list[str] = []

    def store(self, blob: str) -> None:
        if blob not in self.never_store:
            path = rw.stored_path(str(self.storage), blob)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(BLOBS[blob])


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[rw.Mirror, FakeMirror]]:
    fake = FakeMirror(tmp_path / "registry", getattr(request, "param", frozenset()))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake.requests.append(self.path)
            kind, ref = self.path.split("/")[-2:]
            body = MANIFESTS.get(ref) if kind == "manifests" else BLOBS.get(ref)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            if kind == "blobs":
                threading.Timer(0.05, fake.store, [ref]).start()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def opener(url: str, headers: dict[str, str], timeout: float) -> object:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)  # noqa: S310

    yield rw.Mirror(base=f"http://127.0.0.1:{server.server_port}", storage=str(fake.storage), opener=opener), fake
    server.shutdown()


@pytest.mark.parametrize(
    ("reference", "repo"),
    [
        ("lmsysorg/sglang:glm-5.3-flash@" + CONFIG, "lmsysorg/sglang"),
        ("ubuntu@" + CONFIG, "library/ubuntu"),
        ("docker.io/lmsysorg/sglang@" + CONFIG, "lmsysorg/sglang"),
        ("registry.example.internal:5000/team/sglang:x@" + CONFIG, "team/sglang"),
    ],
)
def test_the_repository_path_is_the_registry_apis(reference: str, repo: str) -> None:
    assert rw.repository_path(reference) == (repo, CONFIG)


def test_an_index_resolves_to_the_amd64_image_and_missing_blobs_are_fetched_once(
    served: tuple[rw.Mirror, FakeMirror],
) -> None:
    mirror, fake = served
    reference = "lmsysorg/sglang:x@" + digest(INDEX)
    repo, missing = rw.missing_blobs(mirror, reference)
    assert (repo, missing) == ("lmsysorg/sglang", [CONFIG, LAYER1, LAYER2])
    rw.warm(mirror, repo, missing, wait=10, interval=0.02)
    assert all(rw.stored_path(mirror.storage, b).read_bytes() == BLOBS[b] for b in BLOBS)
    blob_requests = [r for r in fake.requests if "/blobs/" in r]
    assert sorted(blob_requests) == sorted(f"/v2/lmsysorg/sglang/blobs/{b}" for b in BLOBS)
    assert rw.missing_blobs(mirror, reference)[1] == []  # a second run has nothing to fetch


def test_a_stored_blob_is_not_asked_for(served: tuple[rw.Mirror, FakeMirror]) -> None:
    mirror, fake = served
    fake.store(LAYER1)
    assert rw.missing_blobs(mirror, "lmsysorg/sglang@" + digest(MANIFEST)) == ("lmsysorg/sglang", [CONFIG, LAYER2])


@pytest.mark.parametrize("served", [frozenset({LAYER2})], indirect=True)
def test_a_blob_the_mirror_never_stores_fails_naming_it(served: tuple[rw.Mirror, FakeMirror]) -> None:
    mirror, _fake = served
    repo, missing = rw.missing_blobs(mirror, "lmsysorg/sglang@" + digest(MANIFEST))
    now = [0.0]

    def sleep(seconds: float) -> None:  # a second of the wait per 20 ms: the stored blobs land meanwhile
        now[0] += seconds
        time.sleep(0.02)

    with pytest.raises(rw.WarmError, match=f"did not store {LAYER2} within 30 s .site_cache_warm_timeout."):
        rw.warm(mirror, repo, missing, wait=30, interval=1, clock=lambda: now[0], sleep=sleep)


def test_an_index_without_the_platform_and_a_mirror_url_of_another_scheme_are_refused() -> None:
    with pytest.raises(rw.WarmError, match="no linux/amd64 manifest"):
        rw.platform_manifest({"manifests": [{"digest": "d", "platform": {"os": "linux", "architecture": "arm64"}}]})
    with pytest.raises(rw.WarmError, match="must be http"):
        rw.Mirror(base="file:///etc", storage="/tmp", opener=print)  # noqa: S108 - never opened
