# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small client for the docker engine API over its unix socket, and image reference parsing.

The engine API streams a pull's progress (per layer, bytes current/total) and takes registry
credentials in the X-Registry-Auth header, so credentials never reach argv or a file on disk.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote, urlencode

# docker's reference grammar, restricted to what a pinned reference needs.
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
REFERENCE_RE = re.compile(
    r"(?P<name>(?:(?P<domain>[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9-]+)*(?::[0-9]+)?)/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"@(?P<digest>sha256:[0-9a-f]{64})"
)


class DockerError(Exception):
    pass


@dataclass(frozen=True)
class Reference:
    name: str  # as written, e.g. lmsysorg/sglang or registry.example:5000/team/sglang
    tag: str | None
    digest: str

    @property
    def registry(self) -> str:
        first = self.name.split("/", 1)[0]
        if "/" in self.name and ("." in first or ":" in first or first == "localhost"):
            return first
        return "docker.io"

    @property
    def repository(self) -> str:
        """The name as the engine writes it in RepoDigests (docker.io/library/ dropped)."""
        name = self.name
        for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/"):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        return name

    @property
    def pinned(self) -> str:
        return f"{self.repository}@{self.digest}"


def parse_reference(ref: str) -> Reference:
    match = REFERENCE_RE.fullmatch(ref or "")
    domain = match.group("domain") if match else None
    if domain and not ("." in domain or ":" in domain or domain == "localhost") and domain != domain.lower():
        match = None  # not a registry host, so a path component: those are lowercase
    if not match:
        raise DockerError(
            "image reference must be NAME[:TAG]@sha256:<64 hex> (pinned by digest; tag-only references are "
            f"refused); got: {ref!r}"
        )
    return Reference(name=match.group("name"), tag=match.group("tag"), digest=match.group("digest"))


def registry_auth(username: str, password: str, server: str) -> str:
    data = json.dumps({"username": username, "password": password, "serveraddress": server}).encode()
    return base64.urlsafe_b64encode(data).decode()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


class Engine:
    def __init__(self, socket_path: str = "/var/run/docker.sock", timeout: float = 60) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def request(self, method: str, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        conn = UnixHTTPConnection(self.socket_path, self.timeout)
        try:
            conn.request(method, path, headers=headers or {})
        except OSError as err:
            raise DockerError(f"cannot reach the docker engine at {self.socket_path}: {err}") from err
        return conn.getresponse()

    def json(self, method: str, path: str) -> tuple[int, object]:
        resp = self.request(method, path)
        body = resp.read()
        try:
            return resp.status, json.loads(body or b"null")
        except ValueError:
            return resp.status, body.decode(errors="replace")

    def inspect(self, ref: str) -> dict | None:
        status, data = self.json("GET", f"/images/{quote(ref, safe='')}/json")
        if status == 404:
            return None
        if status != 200 or not isinstance(data, dict):
            raise DockerError(f"docker image inspect {ref}: HTTP {status}: {data}")
        return data

    def images(self, repository: str) -> list[dict]:
        filters = json.dumps({"reference": [repository]})
        status, data = self.json("GET", "/images/json?" + urlencode({"filters": filters}))
        if status != 200 or not isinstance(data, list):
            raise DockerError(f"docker images {repository}: HTTP {status}: {data}")
        return data

    def remove(self, image_id: str) -> tuple[bool, str]:
        status, data = self.json("DELETE", f"/images/{quote(image_id, safe='')}")
        return status == 200, "" if status == 200 else str(data)

    def pull(self, ref: Reference, auth: str | None) -> Iterator[dict]:
        """Stream the engine's pull events (JSON objects)."""
        query = urlencode({"fromImage": ref.name, "tag": ref.digest})
        headers = {"X-Registry-Auth": auth} if auth else {}
        resp = self.request("POST", f"/images/create?{query}", headers)
        if resp.status != 200:
            raise DockerError(
                f"pulling {ref.pinned}: HTTP {resp.status}: {resp.read().decode(errors='replace').strip()}"
            )
        buf = b""
        while chunk := resp.read1(65536):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)


@dataclass
class PullProgress:
    """Layer progress from the engine's pull events."""

    layers: dict[str, dict]

    def __init__(self) -> None:
        self.layers = {}

    def update(self, event: dict) -> None:
        if "error" in event:
            raise DockerError(event.get("error") or "pull failed")
        layer = event.get("id")
        status = event.get("status", "")
        if not layer or layer.startswith("sha256:") or status.startswith(("Pulling from", "Digest", "Status")):
            return
        entry = self.layers.setdefault(layer, {"current": 0, "total": 0, "done": False})
        detail = event.get("progressDetail") or {}
        if status == "Downloading" and detail.get("total"):
            entry["current"], entry["total"] = detail.get("current", 0), detail["total"]
        if status in ("Download complete", "Pull complete", "Already exists"):
            entry["done"] = True
            if entry["total"]:
                entry["current"] = entry["total"]

    def summary(self) -> dict[str, int]:
        return {
            "layers": len(self.layers),
            "layers_done": sum(1 for e in self.layers.values() if e["done"]),
            "bytes": sum(e["current"] for e in self.layers.values()),
            "bytes_total": sum(e["total"] for e in self.layers.values()),
        }


def pull_with_progress(
    engine: Engine, ref: Reference, auth: str | None, report: Callable[[dict[str, int]], None]
) -> dict[str, int]:
    progress = PullProgress()
    for event in engine.pull(ref, auth):
        progress.update(event)
        report(progress.summary())
    return progress.summary()


def stale_images(images: list[dict], ref: Reference, keep: int = 0) -> list[dict]:
    """Images pulled by digest from the same repository that are not the pinned one, less the
    `keep` newest of them (by creation time: the versions to roll back to). An image built on the
    host (no digest of this repository) is never one of them."""
    prefix = ref.pinned.split("@", 1)[0] + "@sha256:"
    out = []
    for image in images:
        digests = image.get("RepoDigests") or []
        if ref.pinned not in digests and any(d.startswith(prefix) for d in digests):
            out.append(image)
    out.sort(key=lambda image: int(image.get("Created") or 0), reverse=True)
    return out[max(keep, 0) :]
