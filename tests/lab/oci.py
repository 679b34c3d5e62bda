"""Build small container images byte for byte reproducibly and push them to a registry.

The lab has no access to any public registry, so the images it serves are assembled here:
layers are gzip-compressed tarballs with fixed ownership and timestamps, the image config carries
no creation time, and the manifest is pushed through the Docker Registry HTTP API v2 (the same API
`docker push` speaks). The same inputs give the same manifest digest on every machine.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_V1 = "application/vnd.docker.container.image.v1+json"
LAYER_TGZ = "application/vnd.docker.image.rootfs.diff.tar.gzip"


@dataclass(frozen=True)
class File:
    """One regular file, symlink or directory of a layer."""

    path: str
    data: bytes = b""
    mode: int = 0o644
    link: str | None = None
    is_dir: bool = False


@dataclass(frozen=True)
class Layer:
    """A compressed layer blob and the digest of its uncompressed tar (its diff_id)."""

    blob: bytes
    diff_id: str


@dataclass
class Image:
    """An image: base layers, then one layer of its own files, and its run configuration."""

    files: list[File]
    base: list[Layer] = field(default_factory=list)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: list[str] = field(
        default_factory=lambda: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    )
    labels: dict[str, str] = field(default_factory=dict)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(files: list[File]) -> bytes:
    """An uncompressed tar of the files, sorted, owned by root, dated at the epoch."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for item in sorted(files, key=lambda f: f.path):
            info = tarfile.TarInfo(item.path.lstrip("/"))
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = item.mode
            if item.is_dir:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif item.link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = item.link
                tar.addfile(info)
            else:
                info.size = len(item.data)
                tar.addfile(info, io.BytesIO(item.data))
    return buf.getvalue()


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def layer_from_files(files: list[File]) -> Layer:
    raw = layer_tar(files)
    return Layer(blob=gzip_bytes(raw), diff_id=sha256(raw))


def layer_from_tar(raw: bytes) -> Layer:
    """A layer from an existing uncompressed tar, e.g. one layer of `docker save`."""
    return Layer(blob=gzip.compress(raw, compresslevel=1, mtime=0), diff_id=sha256(raw))


@dataclass(frozen=True)
class Blobs:
    """Everything a registry needs to serve one image."""

    layers: list[bytes]
    config: bytes
    manifest: bytes

    @property
    def digest(self) -> str:
        return sha256(self.manifest)


def assemble(image: Image) -> Blobs:
    layers = [*image.base, layer_from_files(image.files)]
    run_config: dict[str, object] = {"Env": image.env, "Labels": image.labels}
    if image.entrypoint is not None:
        run_config["Entrypoint"] = image.entrypoint
    if image.cmd is not None:
        run_config["Cmd"] = image.cmd
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": run_config,
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [{"created_by": "glm.fleet lab image builder"}],
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_V2,
            "config": {"mediaType": CONFIG_V1, "size": len(config), "digest": sha256(config)},
            "layers": [
                {"mediaType": LAYER_TGZ, "size": len(layer.blob), "digest": sha256(layer.blob)} for layer in layers
            ],
        },
        indent=3,
    ).encode()
    return Blobs(layers=[layer.blob for layer in layers], config=config, manifest=manifest)


def _request(
    method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str]]:
    if not url.startswith("http://"):
        raise ValueError(f"lab registries speak plain HTTP; got: {url}")
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})  # noqa: S310 - checked above
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - checked above
            return resp.status, dict(resp.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


def _push_blob(base: str, repo: str, blob: bytes, auth: dict[str, str]) -> None:
    digest = sha256(blob)
    status = _request("HEAD", f"{base}/v2/{repo}/blobs/{digest}", headers=auth)[0]
    if status == 200:
        return
    status, headers = _request("POST", f"{base}/v2/{repo}/blobs/uploads/", headers=auth)
    if status != 202:
        raise RuntimeError(f"registry refused an upload to {repo}: HTTP {status}")
    location = urllib.parse.urljoin(base + "/", headers["Location"])
    sep = "&" if "?" in location else "?"
    status = _request(
        "PUT",
        f"{location}{sep}digest={urllib.parse.quote(digest)}",
        data=blob,
        headers={"Content-Type": "application/octet-stream", **auth},
    )[0]
    if status != 201:
        raise RuntimeError(f"registry refused blob {digest} for {repo}: HTTP {status}")


def push(registry: str, repo: str, tag: str, blobs: Blobs, login: tuple[str, str] | None = None) -> str:
    """Push the blobs as REPO:TAG to the registry at host:port (with basic auth when `login` is
    given); returns the manifest digest."""
    base = f"http://{registry}"
    auth = {"Authorization": "Basic " + base64.b64encode(":".join(login).encode()).decode()} if login else {}
    for layer in blobs.layers:
        _push_blob(base, repo, layer, auth)
    _push_blob(base, repo, blobs.config, auth)
    status, headers = _request(
        "PUT", f"{base}/v2/{repo}/manifests/{tag}", data=blobs.manifest, headers={"Content-Type": MANIFEST_V2, **auth}
    )
    if status != 201:
        raise RuntimeError(f"registry refused manifest {repo}:{tag}: HTTP {status}")
    served = headers.get("Docker-Content-Digest")
    if served != blobs.digest:
        raise RuntimeError(f"registry stored {repo}:{tag} as {served}, expected {blobs.digest}")
    return blobs.digest
