"""A role's receipt: what is looked at, how two looks compare, and why a receipt does not stand."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _receipt

DPKG = "ii \tdocker.io\t20.10.24+dfsg1-1\nhi \tnvidia-container-toolkit\t1.18.0-1\nrc \tpigz\t2.6-1\n"
SHOW = (
    "Id=docker.service\nActiveState=active\nUnitFileState=enabled\n\n"
    "Id=gone.service\nActiveState=inactive\nUnitFileState=\n"
)


def no_commands(argv: list[str]) -> str:
    raise AssertionError(f"no command expected: {argv}")


def test_a_file_is_seen_by_content_mode_and_owner(tmp_path: Path) -> None:
    path = tmp_path / "daemon.json"
    path.write_text("{}\n")
    path.chmod(0o644)
    state = _receipt.file_state(str(path))
    assert state == {"sha256": "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356",
                     "mode": "0644", "uid": os.getuid(), "gid": os.getgid()}  # fmt: skip
    path.chmod(0o600)
    assert _receipt.file_state(str(path))["mode"] == "0600"
    assert _receipt.file_state(str(tmp_path / "missing")) is None


def test_a_tree_is_seen_by_path_size_times_and_inode_through_links(tmp_path: Path) -> None:
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshots" / "rev"
    blobs.mkdir()
    snap.mkdir(parents=True)
    (blobs / "a").write_bytes(b"weights")
    (snap / "model.safetensors").symlink_to(blobs / "a")
    first = _receipt.tree_state(str(snap))
    assert first is not None
    assert _receipt.tree_state(str(snap)) == first
    # A byte written in place with its mtime put back is seen: the change time moved.
    st = (blobs / "a").stat()
    time.sleep(0.01)
    (blobs / "a").write_bytes(b"weightz")
    os.utime(blobs / "a", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (blobs / "a").stat().st_mtime_ns == st.st_mtime_ns
    assert _receipt.tree_state(str(snap)) != first
    settled = _receipt.tree_state(str(snap))
    # A new mtime, a replaced file (another inode), a file more or less are seen too.
    os.utime(blobs / "a", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert _receipt.tree_state(str(snap)) not in (first, settled)
    (blobs / "b").write_bytes(b"weightz")
    os.utime(blobs / "b", ns=(st.st_atime_ns, st.st_mtime_ns))
    (blobs / "b").replace(blobs / "a")
    assert _receipt.tree_state(str(snap)) not in (first, settled)
    assert _receipt.tree_state(str(tmp_path / "nothing")) is None


def test_packages_are_seen_by_version_and_hold() -> None:
    states = _receipt.package_states(["docker.io", "nvidia-container-toolkit", "pigz", "docker-ce"], DPKG)
    assert states == {
        "docker.io": {"version": "20.10.24+dfsg1-1", "held": False},
        "nvidia-container-toolkit": {"version": "1.18.0-1", "held": True},
        "pigz": None,  # removed, its configuration left: not installed
        "docker-ce": None,
    }


def test_units_are_seen_by_enablement_and_state() -> None:
    assert _receipt.unit_states(["docker.service", "gone.service"], SHOW) == {
        "docker.service": {"UnitFileState": "enabled", "ActiveState": "active"},
        "gone.service": {"UnitFileState": "", "ActiveState": "inactive"},
    }
    # An answer that is not systemd's (a failed systemctl) leaves every property empty.
    assert _receipt.unit_states(["docker.service"], "") == {"docker.service": {"UnitFileState": "", "ActiveState": ""}}


class FakeEngine:
    def __init__(self, images: dict[str, str]) -> None:
        self.images = images

    def inspect(self, ref: str) -> dict | None:
        return {"Id": self.images[ref]} if ref in self.images else None


def test_observe_reads_each_kind_with_one_command_each(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    calls: list[list[str]] = []

    def run(argv: list[str]) -> str:
        calls.append(argv)
        return DPKG if argv[0] == "dpkg-query" else SHOW

    spec = {"files": [str(tmp_path / "f")], "packages": ["docker.io"], "units": ["docker.service", "gone.service"],
            "images": ["r@sha256:" + "a" * 64, "other"], "listings": [str(tmp_path)]}  # fmt: skip
    seen = _receipt.observe(spec, run, FakeEngine({"r@sha256:" + "a" * 64: "sha256:1"}))
    assert [c[0] for c in calls] == ["dpkg-query", "systemctl"]
    assert calls[1][-3:] == ["--", "docker.service", "gone.service"]
    assert seen["images"] == {"r@sha256:" + "a" * 64: "sha256:1", "other": None}
    assert seen["listings"] == {str(tmp_path): ["f"]}
    assert set(seen) == {"files", "packages", "units", "images", "listings"}
    assert _receipt.observe({}, no_commands) == {}


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ([], "observe must be a mapping"),
        ({"sockets": []}, "unknown kinds ['sockets']"),
        ({"files": "/etc/x"}, "observe.files must be a list"),
        ({"units": ["a\nb"]}, "observe.units must be a list of non-empty printable strings"),
        ({"files": ["etc/x"]}, "observe.files must be absolute paths; got ['etc/x']"),
    ],
)
def test_a_bad_spec_is_refused_naming_it(spec: object, problem: str) -> None:
    assert problem in (_receipt.spec_problem(spec) or "")


def test_a_good_spec_passes() -> None:
    assert _receipt.spec_problem({"files": ["/a"], "packages": ["p"], "units": [], "trees": ["/t"]}) is None


def test_staleness_names_what_differs() -> None:
    spec = {"files": ["/etc/docker/daemon.json"]}
    recorded = {"files": {"/etc/docker/daemon.json": {"sha256": "1" * 64, "mode": "0644", "uid": 0, "gid": 0}}}
    receipt = _receipt.parse(_receipt.render("d" * 64, spec, recorded))
    assert receipt is not None
    assert _receipt.staleness(receipt, "d" * 64, recorded) is None
    assert "settings or code changed" in (_receipt.staleness(receipt, "e" * 64, recorded) or "")
    assert "no receipt" in (_receipt.staleness(None, "d" * 64, None) or "")
    gone = {"files": {"/etc/docker/daemon.json": None}}
    why = _receipt.staleness(receipt, "d" * 64, gone) or ""
    assert why.startswith("changed since its receipt: file /etc/docker/daemon.json:")
    assert why.endswith("-> absent")


def test_a_long_list_of_differences_is_cut_short() -> None:
    recorded = {"packages": {f"p{i}": {"version": "1", "held": True} for i in range(8)}}
    observed = {"packages": {f"p{i}": None for i in range(8)}}
    receipt = {"digest": "d", "observe": {"packages": [f"p{i}" for i in range(8)]}, "observed": recorded}
    assert (_receipt.staleness(receipt, "d", observed) or "").endswith("(and 3 more)")


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"observe": {"x": []}}'])
def test_an_unreadable_receipt_counts_as_none(data: bytes) -> None:
    assert _receipt.parse(data) is None


def test_render_is_stable() -> None:
    a = _receipt.render("d", {"files": ["/b", "/a"]}, {"files": {"/b": None, "/a": None}})
    b = _receipt.render("d", {"files": ["/b", "/a"]}, {"files": {"/a": None, "/b": None}})
    assert a == b


def test_a_directory_is_seen_by_mode_and_owner_not_by_what_it_holds(tmp_path: Path) -> None:
    cache = tmp_path / "jit"
    cache.mkdir(mode=0o755)
    cache.chmod(0o755)
    before = _receipt.dir_state(str(cache))
    assert before == {"mode": "0755", "uid": os.getuid(), "gid": os.getgid()}
    (cache / "kernel.so").write_bytes(b"x")  # what the server writes there is not the role's
    assert _receipt.dir_state(str(cache)) == before
    cache.chmod(0o700)
    assert _receipt.dir_state(str(cache)) == {**before, "mode": "0700"}
    assert _receipt.dir_state(str(cache / "kernel.so")) is None
    assert _receipt.dir_state(str(tmp_path / "none")) is None
