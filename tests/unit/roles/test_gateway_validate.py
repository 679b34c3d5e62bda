"""The gateway's nginx check (`__gateway_nginx_validate`, run as root by the site's template task):
the candidate configuration goes into a directory of its own, never a fixed name in the shared temp
directory that another user of the host could create first, and nothing of it is left behind."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import yaml
from conftest import REPO


def test_the_check_runs_in_a_fresh_directory_it_removes(tmp_path: Path) -> None:
    command = yaml.safe_load((REPO / "roles/gateway/vars/main.yml").read_text())["__gateway_nginx_validate"]
    nginx_conf = tmp_path / "nginx.conf"
    nginx_conf.write_text("http {\n    include /etc/nginx/sites-enabled/*;\n}\n")
    seen = tmp_path / "seen"
    fake = tmp_path / "bin" / "nginx"  # records the -c file and what it holds
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$4" > {seen}\ncat "$4" >> {seen}\n')
    fake.chmod(0o755)
    argv = shlex.split(command.replace("/etc/nginx/nginx.conf", str(nginx_conf)) % "/candidate/site.conf")
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}", "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    checked, *content = seen.read_text().splitlines()
    assert Path(checked).parent.parent == tmp_path / "tmp", checked  # a directory mktemp made
    assert "    include /candidate/site.conf;" in content
    assert list((tmp_path / "tmp").iterdir()) == []  # removed
