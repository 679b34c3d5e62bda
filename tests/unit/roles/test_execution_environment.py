"""The execution environment's build context, as `ansible-builder create` makes it (no image can be
built here): the pinned ansible-core and ansible-runner, SSH, and this collection's tarball
installed where AWX and Automation Platform look for collections."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml
from conftest import REPO


def pins() -> dict[str, str]:
    text = (REPO / "requirements.txt").read_text()
    return dict(re.findall(r"^(ansible-core|ansible-runner)==(\S+)$", text, re.MULTILINE))


def test_the_build_context_installs_the_pinned_ansible_and_this_collection(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    shutil.copy(REPO / "execution-environment.yml", tmp_path)
    (tmp_path / "meta").mkdir()
    shutil.copy(REPO / "meta" / "ee-requirements.txt", tmp_path / "meta")
    (tmp_path / "build" / "ee").mkdir(parents=True)
    subprocess.run([bindir / "ansible-galaxy", "collection", "build", "--output-path", tmp_path / "build", str(REPO)],
                   check=True, capture_output=True, cwd=REPO)  # fmt: skip
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    shutil.copy(tmp_path / "build" / f"glm-fleet-{version}.tar.gz", tmp_path / "build" / "ee" / "glm-fleet.tar.gz")
    subprocess.run([bindir / "ansible-builder", "create", "--file", "execution-environment.yml", "--context", "ctx",
                    "--output-filename", "Containerfile"], check=True, capture_output=True, cwd=tmp_path)  # fmt: skip

    containerfile = (tmp_path / "ctx" / "Containerfile").read_text()
    wanted = pins()
    assert set(wanted) == {"ansible-core", "ansible-runner"}
    refs = " ".join(f"{name}=={wanted[name]}" for name in ("ansible-core", "ansible-runner"))
    assert f'ARG ANSIBLE_INSTALL_REFS="{refs}"' in containerfile
    install = "RUN ansible-galaxy collection install /tmp/glm-fleet.tar.gz -p /usr/share/ansible/collections"
    assert install in containerfile
    assert containerfile.index("FROM base AS final") < containerfile.index(install)
    assert "openssh-clients [platform:rpm]" in (tmp_path / "ctx" / "_build" / "bindep.txt").read_text()
    # The runtime requirements only (meta/ee-requirements.txt), none of the development pins.
    installed = (tmp_path / "ctx" / "_build" / "requirements.txt").read_text()
    assert "matplotlib==" in installed
    assert not re.search(r"^(ansible|mitogen|molecule|pytest|ruff)\b", installed, re.MULTILINE), installed

    with tarfile.open(tmp_path / "ctx" / "_build" / "collections" / "glm-fleet.tar.gz") as tar:
        manifest = json.load(tar.extractfile("MANIFEST.json"))  # type: ignore[arg-type]
        names = tar.getnames()
        # What builder's introspection of an EE listing glm.fleet installs: the runtime requirements.
        ee_meta = yaml.safe_load(tar.extractfile("meta/execution-environment.yml"))  # type: ignore[arg-type]
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == ("glm", "fleet", version)
    assert {"roles/deployment/tasks/main.yml", "plugins/modules/image_pull.py", "playbooks/site.yml"} <= set(names)
    assert not [n for n in names if n.startswith((".lab", ".venv", "tests/output", "build/", "requirements.txt"))]
    assert ee_meta["dependencies"]["python"] == "meta/ee-requirements.txt"
    assert "meta/ee-requirements.txt" in names
