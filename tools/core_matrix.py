"""Sanity and unit tests on the older ansible-core releases of the support matrix.

tests/ansible-core-matrix.txt lists them, each with a controller Python it supports; the development
venv (requirements.txt) is the newest and `make sanity unit` tests it. For each release this makes a
venv of its own under .venv-core/ (requirements.txt's test packages, with that ansible-core instead of
the `ansible` bundle and the linters, which pin the newest), a clean copy of the collection under
build/core-<version>/, and runs there what `make sanity unit` runs on the collection: `ansible-test
sanity`, `ansible-test units` over tests/unit/plugins and pytest over the rest of tests/unit but the
lab's stand-ins (tests/unit/lab). A release that fails stops the run.

    python tools/core_matrix.py            # every release of the matrix, one after the other
    python tools/core_matrix.py 2.20.10    # one
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "tests" / "ansible-core-matrix.txt"
# What only the development venv needs: the `ansible` bundle and the linters pin the newest
# ansible-core; molecule and Mitogen are not part of sanity or unit tests.
DEV_ONLY = {"ansible", "ansible-core", "ansible-lint", "molecule", "molecule-plugins", "mitogen", "ruff", "yamllint"}


def matrix() -> list[tuple[str, str]]:
    """(ansible-core version, Python X.Y) per line of tests/ansible-core-matrix.txt."""
    rows = []
    for text in MATRIX.read_text().splitlines():
        line = text.split("#", 1)[0].strip()
        if line:
            core, python = line.split()
            rows.append((core, python))
    return rows


def requirements(core: str) -> str:
    """requirements.txt's pins without DEV_ONLY, and ansible-core at `core`."""
    kept = []
    for line in (REPO / "requirements.txt").read_text().splitlines():
        name = re.match(r"^([A-Za-z0-9_.-]+)", line)
        if name and name.group(1).lower() not in DEV_ONLY:
            kept.append(line)
    return "\n".join([f"ansible-core=={core}", *kept]) + "\n"


def find_python(version: str) -> str:
    found = subprocess.run([REPO / "tools" / "find_python.sh", version], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise SystemExit(f"core_matrix: no working Python {version} for ansible-core (tests/ansible-core-matrix.txt)")
    return found.stdout.strip()


def venv(core: str, python: str) -> Path:
    """.venv-core/<core>, made anew when the requirements it was made with changed."""
    path = REPO / ".venv-core" / core
    wanted = requirements(core)
    marker = path / ".installed"
    if marker.exists() and marker.read_text() == wanted:
        return path
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([find_python(python), "-m", "venv", path], check=True)
    (path / "requirements.txt").write_text(wanted)
    subprocess.run([path / "bin" / "pip", "install", "-q", "-r", path / "requirements.txt"], check=True)
    marker.write_text(wanted)
    return path


def collection_copy(core: str) -> Path:
    """The collection's tracked and new files under build/core-<core>/ansible_collections/glm/fleet."""
    root = REPO / "build" / f"core-{core}" / "ansible_collections" / "glm" / "fleet"
    shutil.rmtree(root.parents[2], ignore_errors=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if name.startswith("collections/") or not source.exists():
            continue
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)  # its own repository: build/ is ignored by ours
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return root


def run(core: str, python: str) -> None:
    started = time.monotonic()
    env_dir = venv(core, python)
    bindir = env_dir / "bin"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    print(f"core_matrix: ansible-core {core} on Python {python}", flush=True)

    def step(argv: list[object], cwd: Path) -> None:
        subprocess.run([str(a) for a in argv], cwd=cwd, env=env, check=True)

    root = collection_copy(core)
    step([bindir / "python", REPO / "tests" / "sanity_bootstrap.py"], REPO)
    step([bindir / "ansible-test", "sanity", "--local", "--python", python, "--color", "no"], root)
    # The collection's unit tests: the plugins' through ansible-test below, the rest with pytest. The
    # lab's own (tests/unit/lab: the stand-ins) do not run on ansible-core and run once, in `make unit`.
    step([bindir / "pytest", "-q", "tests/unit", "--ignore=tests/unit/lab", "--ignore=tests/unit/plugins"], REPO)
    step(
        [bindir / "ansible-test", "units", "--local", "--python", python, "--color", "no", "tests/unit/plugins/"], root
    )
    print(f"core_matrix: ansible-core {core} passed in {time.monotonic() - started:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", help="ansible-core versions of the matrix (default: all)")
    args = parser.parse_args()
    rows = dict(matrix())
    unknown = [v for v in args.versions if v not in rows]
    if unknown:
        raise SystemExit(f"core_matrix: {', '.join(unknown)} not in {MATRIX.relative_to(REPO)} ({', '.join(rows)})")
    try:
        for core in args.versions or list(rows):
            run(core, rows[core])
    except subprocess.CalledProcessError as exc:
        sys.exit(f"core_matrix: {' '.join(map(str, exc.cmd))} failed with status {exc.returncode}")


if __name__ == "__main__":
    main()
