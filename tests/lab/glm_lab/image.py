"""The images the lab builds: the Debian 12 node image, and the smoke, SGLang stand-in and private images."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import oci
import standin_deps

from glm_lab.config import HERE, IMAGE_REPO, LABEL, STANDIN_CACHE, STATE_DIR, SUITE, LabError
from glm_lab.shell import docker, log, run, succeeds


def packages() -> list[str]:
    lines = (HERE / "image" / "packages.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def image_tag() -> str:
    recipe = hashlib.sha256()
    recipe.update(SUITE.encode())
    recipe.update(" ".join(packages()).encode())
    recipe.update((HERE / "image" / "customize.sh").read_bytes())
    return f"{IMAGE_REPO}:{recipe.hexdigest()[:12]}"


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (so the lab needs no mirror name of its own)."""
    if os.environ.get("GLM_LAB_DEBIAN_MIRROR"):
        return os.environ["GLM_LAB_DEBIAN_MIRROR"]
    sources = sorted(Path("/etc/apt").glob("sources.list.d/*.sources"))
    for path in sources:
        for line in path.read_text().splitlines():
            if line.startswith("URIs:"):
                for uri in line.split()[1:]:
                    if "security" not in uri:
                        return uri
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[1]
    raise LabError("no Debian mirror found in /etc/apt; set GLM_LAB_DEBIAN_MIRROR")


def ensure_image() -> str:
    tag = image_tag()
    if succeeds("docker", "image", "inspect", tag):
        log(f"base image {tag} is cached")
        docker("tag", tag, f"{IMAGE_REPO}:latest")
        return tag
    if shutil.which("debootstrap") is None:
        raise LabError("debootstrap is not installed (run: make deps)")
    mirror = debian_mirror()
    log(f"bootstrapping Debian {SUITE} for {tag} (about a minute)")
    with tempfile.TemporaryDirectory(prefix="glm-lab-root-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "root"
        run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(packages())}", SUITE, str(root), mirror],
            capture=True,
        )
        shutil.copy(HERE / "image" / "customize.sh", root / "customize.sh")
        run(["chroot", str(root), "/bin/sh", "/customize.sh"])
        (root / "customize.sh").unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        run(
            [
                "docker", "import",
                "-c", 'CMD ["/lib/systemd/systemd"]',
                "-c", "ENV container=docker",
                "-c", f"LABEL {LABEL}.image=base",
                "-", tag,
            ],
            stdin=tar.stdout,
        )  # fmt: skip
        tar.wait()
    docker("tag", tag, f"{IMAGE_REPO}:latest")
    log(f"built {tag}")
    return tag


def smoke_image() -> oci.Image:
    """A one-binary image (static busybox) that proves a node ran what it pulled by digest."""
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise LabError("/bin/busybox is missing (Debian package busybox-static; run: make deps)")
    return oci.Image(
        files=[
            oci.File("bin", is_dir=True, mode=0o755),
            oci.File("bin/busybox", busybox.read_bytes(), mode=0o755),
            oci.File("bin/sh", link="busybox", mode=0o777),
            oci.File("etc/glm-lab-smoke", b"glm.fleet lab smoke image\n"),
        ],
        entrypoint=["/bin/busybox"],
        cmd=["cat", "/etc/glm-lab-smoke"],
        labels={"org.opencontainers.image.title": "glm.fleet lab smoke image"},
    )


def base_layer(image: str) -> oci.Layer:
    """The lab base image's root filesystem as a layer (cached per image), via `docker save`."""
    cache = STATE_DIR / "cache" / image.replace("/", "_").replace(":", "_")
    if not (cache / "layer.tar.gz").exists():
        cache.mkdir(parents=True, exist_ok=True)
        saved = subprocess.run(["docker", "save", image], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            (layer_name,) = manifest[0]["Layers"]
            raw = tar.extractfile(layer_name).read()  # type: ignore[union-attr]
        layer = oci.layer_from_tar(raw)
        (cache / "layer.tar.gz").write_bytes(layer.blob)
        (cache / "diff_id").write_text(layer.diff_id)
    return oci.Layer(blob=(cache / "layer.tar.gz").read_bytes(), diff_id=(cache / "diff_id").read_text())


def sglang_standin_image(base: str, release: str = "lab") -> oci.Image:
    """The stand-in SGLang server (tests/lab/sglang_standin) on the lab's Debian root filesystem,
    with SGLang's own chat path and the libraries it and the stand-in import, `tokenizers` among
    them (tests/lab/standin_deps.py chat_site). Another `release` is the same server under another
    digest (its label differs, its layers are shared): what a rollout to a new image meets."""
    package = HERE / "sglang_standin" / "sglang"
    dist = "usr/local/lib/python3.11/dist-packages"
    site = standin_deps.chat_site(STANDIN_CACHE)
    libraries = {str(path.relative_to(site)): path for path in sorted(site.rglob("*")) if path.is_file()}
    dirs = sorted({str(parent) for name in libraries for parent in Path(name).parents if str(parent) != "."})
    return oci.Image(
        base=[base_layer(base)],
        files=[
            oci.File(dist, is_dir=True, mode=0o755),
            *(oci.File(f"{dist}/{d}", is_dir=True, mode=0o755) for d in dirs),
            *(oci.File(f"{dist}/sglang/{path.name}", path.read_bytes()) for path in sorted(package.glob("*.py"))),
            *(
                oci.File(f"{dist}/{name}", path.read_bytes(), mode=0o755 if ".so" in path.name else 0o644)
                for name, path in libraries.items()
            ),
        ],
        cmd=["python3", "-m", "sglang.launch_server", "--help"],
        env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONUNBUFFERED=1"],
        labels={
            "org.opencontainers.image.title": "glm.fleet lab stand-in for SGLang",
            "org.opencontainers.image.version": release,
        },
    )


def dcgm_standin_image(base: str) -> oci.Image:
    """The stand-in DCGM exporter (tests/lab/dcgm_standin) on the lab's Debian root filesystem."""
    script = HERE / "dcgm_standin" / "dcgm_exporter.py"
    return oci.Image(
        base=[base_layer(base)],
        files=[oci.File("usr/local/bin/dcgm-exporter", script.read_bytes(), mode=0o755)],
        entrypoint=["python3", "/usr/local/bin/dcgm-exporter"],
        env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONUNBUFFERED=1"],
        labels={"org.opencontainers.image.title": "glm.fleet lab stand-in for NVIDIA's DCGM exporter"},
    )


def private_image() -> oci.Image:
    """An image with 16 MB of incompressible bytes (the same bytes every time): 8 s over the slow link."""
    import random  # noqa: PLC0415 - only here: reproducible filler, not a secret

    return oci.Image(
        files=[oci.File("payload", random.Random(5).randbytes(16 * 1024 * 1024))],  # noqa: S311
        entrypoint=["/payload"],
        labels={"org.opencontainers.image.title": "glm.fleet lab private image"},
    )
