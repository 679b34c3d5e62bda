"""glm.fleet.foreign_files: a file a role would replace passes when it is missing, glm.fleet's or its
package's conffile as shipped (dpkg's MD5 sum), and is named with why when a site changed or wrote it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from ansible.module_utils import basic

from ansible_collections.glm.fleet.plugins.module_utils._foreign import CONFFILES_QUERY, conffiles, foreign
from ansible_collections.glm.fleet.plugins.modules import foreign_files

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)
SHIPPED = b"# Sample config for Prometheus.\nglobal:\n  scrape_interval: 15s\n"


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def listing(sums: dict[str, dict[str, str]]) -> str:
    """What CONFFILES_QUERY prints for packages {package: {path: md5}}."""
    lines = []
    for package, files in sums.items():
        entries = [f" {path} {digest}" for path, digest in files.items()]
        lines.append(f"{package}\t{entries[0]}")
        lines += entries[1:]
    return "\n".join(lines) + "\n"


def test_dpkgs_conffiles_are_read_per_package_with_a_word_after_the_sum() -> None:
    listed = "prometheus\t /etc/default/prometheus aaa\n /etc/prometheus/prometheus.yml bbb obsolete\nmtail\t\n"
    assert conffiles(listed) == {
        ("prometheus", "/etc/default/prometheus"): "aaa",
        ("prometheus", "/etc/prometheus/prometheus.yml"): "bbb",
    }


def test_missing_glm_fleets_and_the_shipped_files_pass_and_the_others_are_named(tmp_path: Path) -> None:
    shipped, ours, changed, written, link = (tmp_path / n for n in ("shipped", "ours", "changed", "written", "link"))
    shipped.write_bytes(SHIPPED)
    ours.write_text("#\n# Ansible managed\n#\n# The fleet's scrape targets (glm.fleet.scrape_configs).\nglobal: {}\n")
    changed.write_bytes(SHIPPED + b"  evaluation_interval: 1m\n")
    written.write_text("vrrp_instance site { }\n")
    link.symlink_to(shipped)
    listed = listing({"prometheus": {str(shipped): md5(SHIPPED), str(changed): md5(SHIPPED), str(link): md5(SHIPPED)}})
    files = [
        {"path": str(tmp_path / "missing"), "package": "prometheus"},
        {"path": str(shipped), "package": "prometheus"},
        {"path": str(ours), "package": "prometheus"},
        {"path": str(changed), "package": "prometheus"},
        {"path": str(written), "package": None},
        {"path": str(link), "package": "prometheus"},
        {"path": str(shipped), "package": "alertmanager"},  # the sum of another package's file does not count
    ]
    found = foreign(files, listed)
    assert [f["path"] for f in found] == [str(changed), str(written), str(link), str(shipped)]
    assert found[0]["why"].startswith(f"{changed} is not glm.fleet's and differs from the one package prometheus ships")
    assert "move it away (or remove it) to let glm.fleet write its own" in found[0]["why"]
    assert found[1]["why"].startswith(f"{written} is not glm.fleet's and is not a file that a package ships")
    assert found[2]["why"].startswith(f"{link} is not a regular file")
    assert found[3]["why"].startswith(f"{shipped} is not glm.fleet's and is not a file that package alertmanager ships")


def test_the_marker_counts_in_the_first_five_lines_only(tmp_path: Path) -> None:
    late = tmp_path / "late"
    late.write_text("a\nb\nc\nd\ne\n# glm.fleet\n")
    assert [f["path"] for f in foreign([{"path": str(late), "package": None}], "")] == [str(late)]


def test_the_module_asks_dpkg_once_for_every_package_and_changes_nothing(run_main: RunMain, tmp_path: Path) -> None:
    shipped = tmp_path / "prometheus.yml"
    shipped.write_bytes(SHIPPED)
    changed = tmp_path / "mtail"
    changed.write_text("HOST=0.0.0.0\n")
    calls = []

    def run_command(_self: Any, argv: list[str], **_kwargs: Any) -> tuple[int, str, str]:
        calls.append(argv)
        # mtail is not installed: dpkg-query says so and exits 1, having listed the others.
        return (
            1,
            listing({"prometheus": {str(shipped): md5(SHIPPED)}}),
            "dpkg-query: no packages found matching mtail\n",
        )

    files = [{"path": str(shipped), "package": "prometheus"}, {"path": str(changed), "package": "mtail"}]
    with mock.patch.object(basic.AnsibleModule, "run_command", run_command):
        result = run_main(foreign_files.main, {"files": files}, check_mode=True)
    assert calls == [[*CONFFILES_QUERY, "mtail", "prometheus"]]
    assert not result["failed"]
    assert not result["changed"]
    assert [f["path"] for f in result["foreign"]] == [str(changed)]
    assert os.path.exists(changed)
