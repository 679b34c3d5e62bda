"""glm.fleet.jit_archive: the fleet's copy of a server's JIT caches holds only directories and regular
files inside the cache, without set-id bits or links, and is unpacked only with the SHA-256 recorded
when it was published."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.modules import jit_archive

RunMain = Callable[..., dict[str, Any]]  # the run_main fixture (tests/unit/conftest.py)


def pack(path: Path, members: list[tuple[str, bytes | None, int, bytes]]) -> Path:
    """A gzip tar at `path` of (name, content or None for a directory, mode, type) members."""
    with tarfile.open(path, "w:gz") as archive:
        for name, content, mode, kind in members:
            info = tarfile.TarInfo(name)
            info.mode, info.type = mode, kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/usr/lib/x86_64-linux-gnu/libc.so.6"
            info.size = len(content or b"")
            archive.addfile(info, io.BytesIO(content) if content else None)
    return path


KERNELS = [
    (".", None, 0o755, tarfile.DIRTYPE),
    ("./triton", None, 0o755, tarfile.DIRTYPE),
    ("./triton/abc/kernel.so", b"\x7fELF kernel", 0o755, tarfile.REGTYPE),
    ("./deep_gemm/cache/kernel.cubin", b"cubin", 0o644, tarfile.REGTYPE),
]


def published(tmp_path: Path, run_main: RunMain) -> Path:
    src = pack(tmp_path / "copy.tar.gz.gpu-1.part", KERNELS)
    path = tmp_path / "copy.tar.gz"
    result = run_main(jit_archive.main, {"src": str(src), "path": str(path), "state": "published"})
    assert (result["failed"], result["changed"]) == (False, True), result
    return path


def test_a_nodes_kernels_are_published_with_their_sha256_and_verified(tmp_path: Path, run_main: RunMain) -> None:
    path = published(tmp_path, run_main)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (tmp_path / "copy.tar.gz.sha256").read_text() == f"{digest}  copy.tar.gz\n"
    assert not (tmp_path / "copy.tar.gz.gpu-1.part").exists()
    verified = run_main(jit_archive.main, {"path": str(path)})
    assert (verified["failed"], verified["changed"], verified["sha256"]) == (False, False, digest)


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (("./triton/libc.so", None, 0o777, tarfile.SYMTYPE), "'./triton/libc.so' is a link, not a file or directory"),
        (("./triton/hard", None, 0o644, tarfile.LNKTYPE), "'./triton/hard' is a link, not a file or directory"),
        (("./nv/dev", None, 0o644, tarfile.CHRTYPE), "'./nv/dev' is a device, FIFO or other special file"),
        (("./nv/fifo", None, 0o644, tarfile.FIFOTYPE), "'./nv/fifo' is a device, FIFO or other special file"),
        (("/etc/cron.d/x", b"* * * * * root sh", 0o644, tarfile.REGTYPE), "'/etc/cron.d/x' leaves the cache directory"),
        (("./../../../etc/passwd", b"x", 0o644, tarfile.REGTYPE), "'./../../../etc/passwd' leaves the cache directory"),
        (("./jit/suid", b"x", 0o4755, tarfile.REGTYPE), "'./jit/suid' has mode 4755 (set-id, sticky"),
        (("./jit/shared", b"x", 0o666, tarfile.REGTYPE), "'./jit/shared' has mode 0666"),
        (("./jit", None, 0o1777, tarfile.DIRTYPE), "'./jit' has mode 1777"),
    ],
    ids=["symlink", "hardlink", "device", "fifo", "absolute", "parent", "setuid", "world-writable", "sticky-dir"],
)
def test_what_a_compiler_does_not_write_is_refused_named_and_not_published(
    tmp_path: Path, run_main: RunMain, member: tuple[str, bytes | None, int, bytes], why: str
) -> None:
    src = pack(tmp_path / "copy.tar.gz.gpu-1.part", [*KERNELS, member])
    path = tmp_path / "copy.tar.gz"
    refused = run_main(jit_archive.main, {"src": str(src), "path": str(path), "state": "published"})
    assert refused["failed"], refused
    assert f"{src}: not published as the fleet's JIT caches: " in refused["msg"]
    assert why in refused["msg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing published, the packed file removed"


def test_a_copy_changed_after_it_was_published_is_not_unpacked(tmp_path: Path, run_main: RunMain) -> None:
    path = published(tmp_path, run_main)
    recorded = (tmp_path / "copy.tar.gz.sha256").read_text().split()[0]
    pack(path, [*KERNELS, ("./triton/abc/other.so", b"\x7fELF planted", 0o755, tarfile.REGTYPE)])
    refused = run_main(jit_archive.main, {"path": str(path)})
    assert refused["failed"], refused
    assert f"not the {recorded} recorded when it was published; remove it and its .sha256" in refused["msg"]
    (tmp_path / "copy.tar.gz.sha256").unlink()
    unrecorded = run_main(jit_archive.main, {"path": str(path)})
    assert unrecorded["failed"]
    assert "no SHA-256 recorded in" in unrecorded["msg"]


def test_check_mode_publishes_nothing(tmp_path: Path, run_main: RunMain) -> None:
    src = pack(tmp_path / "copy.tar.gz.gpu-1.part", KERNELS)
    result = run_main(jit_archive.main, {"src": str(src), "path": str(tmp_path / "copy.tar.gz"),
                                         "state": "published"}, check_mode=True)  # fmt: skip
    assert (result["failed"], result["changed"]) == (False, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.tar.gz.gpu-1.part"]
    shown = run_main(jit_archive.main, {"src": str(src), "path": str(tmp_path / "copy.tar.gz"),
                                        "state": "published"}, check_mode=True, diff=True)  # fmt: skip
    path = tmp_path / "copy.tar.gz"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    assert (shown["diff"]["before"], shown["diff"]["after"]) == (
        f"{path}: absent\n",
        f"{path}: the fleet's copy, sha256 {digest}\n",
    )
