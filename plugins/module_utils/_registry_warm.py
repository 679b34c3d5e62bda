# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm a pull-through registry mirror (distribution 2.8 in proxy mode) with one image.

On a miss, distribution's proxy fetches a blob twice: once to stream it to the client and once in
the background to store it (and once more per concurrent client). Warming asks the mirror for each
blob it lacks, reads one byte of the stream and closes it, then waits until the stored copy is on
disk: only that copy (plus the first MB of the aborted stream) crosses the upstream link, and the
GPU nodes that pull afterwards are served from storage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.glm.fleet.plugins.module_utils._docker_api import parse_reference

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)


class WarmError(Exception):
    pass


def repository_path(reference: str) -> tuple[str, str]:
    """(repository path on the registry API, digest): docker.io's own names get library/."""
    ref = parse_reference(reference)
    name = ref.repository
    if ref.registry != "docker.io":
        name = name.split("/", 1)[1]
    elif "/" not in name:
        name = f"library/{name}"
    return name, ref.digest


def platform_manifest(index: dict, os_name: str = "linux", arch: str = "amd64") -> str:
    """The digest of the platform's manifest in a multi-platform index."""
    for entry in index.get("manifests", []):
        platform = entry.get("platform") or {}
        if platform.get("os") == os_name and platform.get("architecture") == arch:
            return entry["digest"]
    raise WarmError(f"the index lists no {os_name}/{arch} manifest")


def image_blobs(manifest: dict) -> list[str]:
    """The config's and the layers' digests of an image manifest."""
    if "config" not in manifest or "layers" not in manifest:
        raise WarmError(f"not an image manifest: {sorted(manifest)}")
    return [manifest["config"]["digest"], *(layer["digest"] for layer in manifest["layers"])]


def stored_path(storage: str, digest: str) -> Path:
    """Where distribution's filesystem driver keeps a blob."""
    hex_digest = digest.split(":", 1)[1]
    return Path(storage) / "docker" / "registry" / "v2" / "blobs" / "sha256" / hex_digest[:2] / hex_digest / "data"


@dataclass
class Mirror:
    """The mirror's API (an http(s) base URL) and its storage directory; `opener(url, headers=,
    timeout=)` opens a URL and returns a response to read (ansible's open_url on the host)."""

    base: str
    storage: str
    opener: Callable
    timeout: float = 60

    def __post_init__(self) -> None:
        if not self.base.startswith(("http://", "https://")):
            raise WarmError(f"the mirror's URL must be http(s); got: {self.base!r}")

    def manifest(self, repo: str, reference: str) -> dict:
        url = f"{self.base}/v2/{repo}/manifests/{reference}"
        with self.opener(url, headers={"Accept": ", ".join(MANIFEST_TYPES)}, timeout=self.timeout) as response:
            return json.loads(response.read())

    def touch_blob(self, repo: str, digest: str) -> None:
        """Start the mirror's fetch of a blob: one byte of the stream, then close it."""
        with self.opener(f"{self.base}/v2/{repo}/blobs/{digest}", headers={}, timeout=self.timeout) as response:
            response.read(1)


def missing_blobs(mirror: Mirror, reference: str) -> tuple[str, list[str]]:
    """(repository path, blobs of the image that the mirror's storage does not hold)."""
    repo, digest = repository_path(reference)
    top = mirror.manifest(repo, digest)
    manifest = mirror.manifest(repo, platform_manifest(top)) if "manifests" in top else top
    return repo, [b for b in image_blobs(manifest) if not stored_path(mirror.storage, b).exists()]


def warm(
    mirror: Mirror,
    repo: str,
    blobs: list[str],
    *,
    wait: float,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Ask for each blob in turn and wait until the mirror has stored it."""
    for blob in blobs:
        mirror.touch_blob(repo, blob)
        deadline = clock() + wait
        while not stored_path(mirror.storage, blob).exists():
            if clock() > deadline:
                raise WarmError(
                    f"the mirror did not store {blob} within {wait:.0f} s (site_cache_warm_timeout); "
                    "is the upstream registry reachable from the site cache?"
                )
            sleep(interval)
