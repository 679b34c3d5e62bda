"""glm.fleet.apt_missing's reading: which package specs a host's dpkg database does not satisfy."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ansible_collections.glm.fleet.plugins.module_utils._dpkg import DPKG_QUERY, apt_missing, held

# dpkg-query -W -f '${db:Status-Abbrev}\t${Package}\t${Version}\n' on a GPU node: installed,
# held, removed with its configuration left, half-installed, and a package of two architectures.
DPKG = (
    "ii \tpigz\t2.6-1\n"
    "ii \tnvidia-container-toolkit\t1.17.8-1\n"
    "hi \tnvidia-container-toolkit-base\t1.17.8-1\n"
    "rc \tnginx\t1.22.1-9\n"
    "iH \tgnupg\t2.2.40-1.1\n"
    "ii \tlibc6\t2.36-9+deb12u10\n"
    "ii \tlibc6\t2.36-9+deb12u10\n"
    "ii \tdocker.io\t20.10.24+dfsg1-1+b3\n"
    "un \tdocker-ce\t\n"
)


def test_a_name_is_satisfied_by_any_installed_version_and_a_pin_only_by_its_own() -> None:
    specs = ["pigz", "nvidia-container-toolkit=1.17.8-1", "nvidia-container-toolkit-base=1.17.8-1", "libc6"]
    assert apt_missing(specs, DPKG) == []
    assert apt_missing(["nvidia-container-toolkit=1.17.7-1", "pigz=2.6-1"], DPKG) == [
        "nvidia-container-toolkit=1.17.7-1"
    ]


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("nginx", "removed, configuration left (rc)"),
        ("gnupg", "half-installed (iH)"),
        ("docker-ce", "never installed (un)"),
        ("ca-certificates", "not in the database"),
    ],
)
def test_packages_not_installed_are_missing(spec: str, why: str) -> None:
    assert apt_missing([spec], DPKG) == [spec], why


@pytest.mark.parametrize("spec", ["pigz=2.6*", "pigz>=2.6", "pigz/bookworm", "libc6:amd64", "pigz=2.6-1\n", ""])
def test_forms_it_does_not_read_are_left_to_apt(spec: str) -> None:
    assert apt_missing([spec], DPKG) == [spec]


def test_order_is_kept() -> None:
    assert apt_missing(["zstd", "pigz", "ca-certificates"], DPKG) == ["zstd", "ca-certificates"]


def test_holds_are_read_from_the_desired_state_whatever_the_package_state() -> None:
    dpkg = DPKG + "hc \tcuda-drivers\t580.95.05-1\nhi \tnvidia-container-toolkit-base\t1.17.8-1\n"
    assert held(dpkg) == ["cuda-drivers", "nvidia-container-toolkit-base"]
    assert held("") == []


@pytest.mark.skipif(shutil.which("apt-mark") is None, reason="needs apt")
def test_this_machines_holds_agree_with_apt_mark() -> None:
    out = subprocess.run(DPKG_QUERY, capture_output=True, text=True, check=True).stdout
    shown = subprocess.run(["apt-mark", "showhold"], capture_output=True, text=True, check=True).stdout
    assert held(out) == sorted(shown.split())


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg")
def test_this_machines_dpkg_output_parses_and_agrees_with_dpkg() -> None:
    out = subprocess.run(DPKG_QUERY, capture_output=True, text=True, check=True).stdout
    status = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True, check=True
    ).stdout
    assert apt_missing(["dpkg", f"dpkg={status}", "glm-fleet-no-such-package"], out) == ["glm-fleet-no-such-package"]
