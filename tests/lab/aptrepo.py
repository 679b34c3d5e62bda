"""A signed apt repository that stands in for NVIDIA's libnvidia-container repository.

NVIDIA's repository is not reachable from the lab. This builds one of the same shape: a flat
repository at `<base>/stable/deb/amd64/` (the role's source line is
`deb [signed-by=KEYRING] <base>/stable/deb/$(ARCH) /`), an armored public key at `<base>/gpgkey`,
and a Release file signed (InRelease and Release.gpg) by a key generated for the lab. It serves
the four packages NVIDIA ships, at several versions, so pinning is tested against a newer one:
nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container-tools and
libnvidia-container1. Their programs are stand-ins (tests/lab/standins/nvidia-container-toolkit).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDINS = HERE / "standins" / "nvidia-container-toolkit"
VERSIONS = ("1.17.8-1", "1.18.0-1", "1.18.1-1")

# package -> (dependencies at the same version, {installed path: stand-in file})
PACKAGES: dict[str, tuple[list[str], dict[str, str]]] = {
    "libnvidia-container1": ([], {}),
    "libnvidia-container-tools": (["libnvidia-container1"], {"usr/bin/nvidia-container-cli": "nvidia-container-cli"}),
    "nvidia-container-toolkit-base": (
        [],
        {"usr/bin/nvidia-ctk": "nvidia-ctk.py", "usr/bin/nvidia-container-runtime": "nvidia-container-runtime"},
    ),
    "nvidia-container-toolkit": (
        ["nvidia-container-toolkit-base", "libnvidia-container-tools"],
        {"usr/bin/nvidia-container-runtime-hook": "nvidia-container-runtime-hook.py"},
    ),
}


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, check=True, capture_output=True, **kw)  # type: ignore[call-overload]


def build_deb(name: str, version: str, out: Path) -> Path:
    depends, files = PACKAGES[name]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for dest, source in files.items():
            target = root / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            text = (STANDINS / source).read_text().replace("@VERSION@", version.rsplit("-", 1)[0])
            if source.endswith(".py"):
                text = "#!/usr/bin/python3\n" + text
            target.write_text(text)
            target.chmod(0o755)
        doc = root / "usr" / "share" / "doc" / name
        doc.mkdir(parents=True)
        (doc / "README.glm-lab").write_text(f"{name} {version}: glm.fleet lab stand-in, not NVIDIA's package.\n")
        (root / "DEBIAN").mkdir()
        control = [
            f"Package: {name}",
            f"Version: {version}",
            "Architecture: amd64",
            "Maintainer: glm.fleet lab <lab@glm-fleet.invalid>",
            "Section: utils",
            "Priority: optional",
        ]
        if depends:
            control.append("Depends: " + ", ".join(f"{dep} (= {version})" for dep in depends))
        control.append(f"Description: {name} (glm.fleet lab stand-in)")
        (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
        deb = out / f"{name}_{version}_amd64.deb"
        run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
    return deb


def build(base: Path, gnupg_home: Path) -> Path:
    """Build the repository under base (…/stable/deb/amd64); returns the armored public key path."""
    for tool in ("dpkg-deb", "apt-ftparchive", "gpg"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed (run: make deps)")
    shutil.rmtree(base, ignore_errors=True)
    flat = base / "stable" / "deb" / "amd64"
    flat.mkdir(parents=True)
    for version in VERSIONS:
        for name in PACKAGES:
            build_deb(name, version, flat)

    env = {**os.environ, "GNUPGHOME": str(gnupg_home)}
    gnupg_home.mkdir(parents=True, exist_ok=True)
    gnupg_home.chmod(0o700)
    uid = "glm.fleet lab apt signing key <lab@glm-fleet.invalid>"
    if run(["gpg", "--batch", "--list-secret-keys"], env=env).stdout.strip() == b"":
        run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"], env=env)
    key = base / "gpgkey"
    key.write_bytes(run(["gpg", "--batch", "--armor", "--export", uid], env=env).stdout)

    packages = run(["apt-ftparchive", "packages", "."], cwd=flat).stdout
    (flat / "Packages").write_bytes(packages)
    run(["gzip", "-9", "-k", "-n", "Packages"], cwd=flat)
    release = run(
        ["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=glm.fleet lab", "release", "."], cwd=flat
    ).stdout
    (flat / "Release").write_bytes(release)
    sign = ["gpg", "--batch", "--yes", "--local-user", uid]
    run([*sign, "--clearsign", "-o", "InRelease", "Release"], cwd=flat, env=env)
    run([*sign, "--armor", "--detach-sign", "-o", "Release.gpg", "Release"], cwd=flat, env=env)
    return key


def fingerprint(key: Path) -> str:
    """The primary key fingerprint of an armored public key (what the role pins)."""
    out = run(["gpg", "--batch", "--with-colons", "--show-keys", str(key)]).stdout.decode()
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))
