"""glm.fleet.hf_snapshot's pure parts, and its HTTP source against the lab's Hub stand-in in a thread."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import hub_standin
import huggingface_hub
import pytest
from ansible.module_utils.urls import open_url
from huggingface_hub.utils._xet_progress_reporting import XetDownloadProgressReporter

from ansible_collections.glm.fleet.plugins.module_utils import _hf_hub as hub_client
from ansible_collections.glm.fleet.plugins.module_utils import _hf_local as local
from ansible_collections.glm.fleet.plugins.module_utils import _hf_mirror as mirror
from ansible_collections.glm.fleet.plugins.module_utils import _hf_model as model
from ansible_collections.glm.fleet.plugins.module_utils import _progress as fmt
from ansible_collections.glm.fleet.plugins.module_utils import _splice as splice
from ansible_collections.glm.fleet.plugins.modules import hf_snapshot

REPO = Path(__file__).resolve().parents[4]  # the collection (plugin tests also run under ansible-test units)

REV = hub_standin.REVISION
REPO_ID = hub_standin.REPO_ID


@pytest.mark.parametrize("revision", ["main", "eb9eb20", "v1.0", "EB9EB208EB0D988989D07A6A12D0FDEB5F52574A", ""])
def test_revisions_other_than_a_full_commit_are_refused(revision: str) -> None:
    problem = model.check_revision(revision)
    assert problem is not None
    assert repr(revision) in problem


def test_a_full_commit_is_accepted() -> None:
    assert model.check_revision(REV) is None
    assert model.check_repo_id(REPO_ID) is None
    assert model.check_repo_id("no-slash") is not None


def test_tree_entries_carry_the_lfs_sha256_and_refuse_escaping_paths() -> None:
    entries = model.entries_from_tree(
        [
            {"type": "file", "path": "b.safetensors", "size": 3, "oid": "1" * 40, "lfs": {"oid": "5" * 64, "size": 3}},
            {"type": "directory", "path": "sub", "oid": "x"},
            {"type": "file", "path": "a.json", "size": 2, "oid": "2" * 40},
        ]
    )
    assert [(e.path, e.etag, e.lfs) for e in entries] == [
        ("a.json", "2" * 40, False),
        ("b.safetensors", "5" * 64, True),
    ]
    with pytest.raises(model.SnapshotError, match="outside the snapshot"):
        model.entries_from_tree([{"type": "file", "path": "../../etc/passwd", "size": 1, "oid": "1" * 40}])


def test_a_manifest_for_another_revision_is_refused() -> None:
    data = model.manifest([model.Entry("a", 1, "1" * 40)], REPO_ID, "0" * 40)
    with pytest.raises(model.SnapshotError, match=r"not zai-org/GLM-5\.3-Flash@"):
        model.entries_from_manifest(data, REPO_ID, REV)


GOOD = {"path": "config.json", "size": 2, "git_oid": "1" * 40, "sha256": None}


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ({"git_oid": "../../../../tmp/x"}, "git blob id that is not 40 hex"),
        ({"git_oid": "1" * 40 + "\n"}, "git blob id that is not 40 hex"),
        ({"sha256": "../" + "a" * 61}, "sha256 that is not 64 hex"),
        ({"sha256": "A" * 64}, "sha256 that is not 64 hex"),
        ({"path": "../outside.json"}, "outside the snapshot"),
        ({"path": "/etc/passwd"}, "outside the snapshot"),
        ({"path": "sub/\nx.json"}, "outside the snapshot"),
        ({"path": "a\\..\\b"}, "outside the snapshot"),
        ({"size": -1}, "size that is not a whole number"),
        ({"size": "2"}, "size that is not a whole number"),
        ({"extra": "x"}, "malformed file entry"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_a_manifest_entry_that_could_leave_the_cache_is_refused(bad: dict, expected: str) -> None:
    """The manifest travels over the LAN's plain HTTP: its ids become file names, so only hex passes."""
    data = model.manifest([], REPO_ID, REV)
    data["files"] = [{**GOOD, **bad}]
    with pytest.raises(model.SnapshotError, match=expected):
        model.entries_from_manifest(data, REPO_ID, REV)


def test_paths_that_resolve_outside_the_cache_are_refused(tmp_path: Path) -> None:
    paths = local.Paths(tmp_path / "hub", REPO_ID, REV)
    paths.snapshot.mkdir(parents=True)
    (paths.snapshot / "escape").symlink_to(tmp_path)  # a link planted in the snapshot
    with pytest.raises(model.SnapshotError, match="outside the cache"):
        paths.link(model.Entry("escape/x.json", 1, "1" * 40))


def test_only_the_manifest_the_cache_verified_is_trusted() -> None:
    data = model.manifest([model.Entry("config.json", 2, "1" * 40)], REPO_ID, REV)
    raw = model.manifest_text(data).encode()
    anchor = hashlib.sha256(raw).hexdigest()
    assert model.trusted_manifest(raw, anchor, "http://cache/m") == data
    forged = raw.replace(b"1" * 40, b"2" * 40)  # consistent, but not what the cache verified
    with pytest.raises(model.SnapshotError, match=f"not the trusted {anchor}"):
        model.trusted_manifest(forged, anchor, "http://cache/m")


def make_file(paths: local.Paths, name: str, content: bytes, lfs: bool) -> model.Entry:
    sha = hashlib.sha256(content).hexdigest()
    git = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()  # noqa: S324 - git's id
    entry = model.Entry(name, len(content), git, sha if lfs else None)
    paths.blobs.mkdir(parents=True, exist_ok=True)
    paths.blob(entry).write_bytes(content)
    local.link_blob(paths, entry)
    return entry


@pytest.mark.parametrize("lfs", [True, False])
def test_local_status_verifies_then_trusts_the_record_until_the_file_changes(tmp_path: Path, lfs: bool) -> None:
    paths = local.Paths(tmp_path, REPO_ID, REV)
    entry = make_file(paths, "model.safetensors", b"weights" * 100, lfs)
    status, record = local.local_status(paths, entry, None, full=False)
    assert status == "ok"
    assert record is not None
    assert record["sha256"] == hashlib.sha256(b"weights" * 100).hexdigest()
    assert local.local_status(paths, entry, record, full=False) == ("ok", record)
    blob = paths.blob(entry)
    data = bytearray(blob.read_bytes())
    data[10] ^= 0xFF
    blob.write_bytes(bytes(data))  # same size, new mtime
    assert local.local_status(paths, entry, record, full=False)[0] == "corrupt"


def test_local_status_sees_a_byte_written_in_place_with_its_mtime_put_back(tmp_path: Path) -> None:
    paths = local.Paths(tmp_path, REPO_ID, REV)
    entry = make_file(paths, "model.safetensors", b"weights" * 100, lfs=True)
    status, record = local.local_status(paths, entry, None, full=False)
    assert status == "ok"
    blob = paths.blob(entry)
    st = blob.stat()
    time.sleep(0.01)
    with blob.open("r+b") as f:
        f.seek(10)
        f.write(b"X")
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))  # size, mtime and inode as recorded
    assert local.local_status(paths, entry, record, full=False)[0] == "corrupt"


def test_local_status_reports_missing_and_wrong_size(tmp_path: Path) -> None:
    paths = local.Paths(tmp_path, REPO_ID, REV)
    entry = make_file(paths, "a.json", b"{}", lfs=False)
    assert local.local_status(paths, model.Entry("b.json", 2, "x"), None, full=False)[0] == "missing"
    assert local.local_status(paths, model.Entry("a.json", 3, entry.git_oid), None, full=False)[0] == "size"


def test_remove_local_keeps_only_the_named_partial(tmp_path: Path) -> None:
    paths = local.Paths(tmp_path, REPO_ID, REV)
    entry = make_file(paths, "a.safetensors", b"xyz", lfs=True)
    (paths.blobs / f"{entry.etag}.abcd1234.incomplete").write_bytes(b"x")
    (paths.blobs / f"{entry.etag}.glm-fleet.incomplete").write_bytes(b"xy")
    assert local.partial_bytes(paths, entry) == 3
    local.remove_local(paths, entry, keep=f"{entry.etag}.glm-fleet.incomplete")
    assert sorted(p.name for p in paths.blobs.iterdir()) == [f"{entry.etag}.glm-fleet.incomplete"]
    assert not paths.link(entry).exists()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_watchdog_kills_a_child_that_stops_making_progress() -> None:
    proc = subprocess.Popen(  # a child that never finishes
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    clock = FakeClock()
    progress = iter([0, 10, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20])
    watch = hub_client.watch_process(proc, lambda: next(progress), 1.0, clock=clock, sleep=clock.sleep, tick=0.25)
    assert watch.stalled
    assert proc.returncode is not None
    assert clock.now == pytest.approx(0.25 * 2 + 1.0, abs=0.3)


def test_watchdog_lets_a_progressing_child_finish() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "print('{}')"], start_new_session=True, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    watch = hub_client.watch_process(proc, lambda: 0, 30.0)
    assert not watch.stalled
    assert watch.rc == 0
    assert watch.stdout.strip() == "{}"


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"error": "gated", "message": "Access restricted"}, "model_weights_hf_token"),
        ({"error": "revision", "message": "Invalid rev id"}, "model_weights_revision"),
        ({"error": "http", "status": 401, "message": "Invalid credentials"}, "refused the token"),
    ],
)
def test_hub_refusals_are_final_and_name_what_to_fix(payload: dict, match: str) -> None:
    with pytest.raises(model.HubRefused, match=match):
        hub_client.parse_child(json.dumps(payload), "", 2, "list")


def test_a_server_error_is_retryable() -> None:
    with pytest.raises(model.SnapshotError) as err:
        hub_client.parse_child(json.dumps({"error": "http", "status": 503, "message": "busy"}), "", 2, "download x")
    assert not isinstance(err.value, model.HubRefused)


def test_a_full_disk_in_the_download_child_is_an_enospc_for_the_parent() -> None:
    """The child reports ENOSPC as such, so the parent names the file system and the bytes needed."""
    message = "[Errno 28] No space left on device"
    with pytest.raises(OSError, match="No space left") as err:
        hub_client.parse_child(json.dumps({"error": "nospace", "message": message}), "", 2, "download x")
    assert err.value.errno == errno.ENOSPC


def test_child_env_carries_the_token_and_endpoint_not_the_callers_hf_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env = hub_client.child_env("http://hub.test/", "tok", disable_xet=True, download_timeout=30)
    assert env["HF_TOKEN"] == "tok"  # noqa: S105 - a test value
    assert env["HF_ENDPOINT"] == "http://hub.test"
    assert env["HF_HUB_DISABLE_XET"] == "1"
    assert "HF_HUB_OFFLINE" not in env


def test_progress_line_has_bytes_rate_and_eta() -> None:
    line = fmt.progress_line(1024**3, 4 * 1024**3, 100 * 1024**2)
    assert line == "1.0 GiB / 4.0 GiB (25%), 100.0 MiB/s, ETA 31s"


# --- the mirror source against the Hub stand-in's file server ------------------------------------


@pytest.fixture(scope="module")
def hub(lab_tokenizer: Path) -> Iterator[tuple[str, hub_standin.HubState]]:
    files = hub_standin.make_repo(shards=2, shard_bytes=300_000, tokenizer=lab_tokenizer.read_bytes())
    state = hub_standin.HubState(files=files, token="tok")  # noqa: S106 - a test value
    handler = type("Handler", (hub_standin.HubHandler,), {"state": state, "log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()


def resolve_url(base: str, name: str) -> str:
    return f"{base}/{REPO_ID}/resolve/{REV}/{name}"


@pytest.fixture(params=["splice", "copy"])
def body_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str]]:
    """Which way http_fetch moves a body (the kernel's splice, or the read loop that TLS and
    other platforms use), forced, and the ways it took, recorded."""
    taken: list[str] = []
    for name in ("spliced", "copied"):
        real = getattr(mirror, name)

        def spy(*args: object, _real: object = real, _name: str = name, **kwargs: object) -> int:
            taken.append(_name)
            return _real(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(mirror, name, spy)
    if request.param == "copy":
        monkeypatch.setattr(mirror, "usable", lambda resp: False)
    return ("spliced" if request.param == "splice" else "copied"), taken


def test_http_fetch_resumes_after_a_dropped_connection(
    hub: tuple[str, hub_standin.HubState], tmp_path: Path, body_path: tuple[str, list[str]]
) -> None:
    base, state = hub
    name = "model-00001-of-00002.safetensors"
    want = state.files[name].content
    state.faults.append(hub_standin.Fault(kind="drop", path=name))
    dest = tmp_path / "part"
    auth = {"Authorization": f"Bearer {state.token}"}
    with pytest.raises((model.SnapshotError, OSError)):
        mirror.http_fetch(resolve_url(base, name), dest, len(want), timeout=5, headers=auth)
    assert 0 < dest.stat().st_size < len(want)
    before = state.bytes_served
    repo_file = state.files[name]
    digest = local.Digest(model.Entry(name, len(want), repo_file.git_oid, repo_file.sha256))
    seen: list[int] = []
    mirror.http_fetch(
        resolve_url(base, name), dest, len(want), timeout=5, headers=auth, digest=digest, on_bytes=seen.append
    )
    assert dest.read_bytes() == want
    assert digest.matches()  # the resumed part was hashed from disk, the rest as it arrived
    assert state.bytes_served - before == len(want) // 2 + len(want) % 2  # only the missing half again
    assert seen[-1] == len(want)
    way, taken = body_path
    assert taken == [way, way]


def test_http_fetch_splices_a_plain_http_body_and_hashes_every_byte(
    hub: tuple[str, hub_standin.HubState], tmp_path: Path, body_path: tuple[str, list[str]]
) -> None:
    base, state = hub
    auth = {"Authorization": f"Bearer {state.token}"}
    for name, repo_file in state.files.items():
        dest = tmp_path / name.replace("/", "_")
        digest = local.Digest(model.Entry(name, len(repo_file.content), repo_file.git_oid, repo_file.sha256))
        mirror.http_fetch(resolve_url(base, name), dest, len(repo_file.content), timeout=5, headers=auth, digest=digest)
        assert dest.read_bytes() == repo_file.content, name
        assert digest.matches(), name
        assert digest.sha256 == hashlib.sha256(repo_file.content).hexdigest()
    way, taken = body_path
    assert taken == [way] * len(state.files)


def test_the_plain_http_mirror_is_spliced_and_tls_is_not(hub: tuple[str, hub_standin.HubState], tmp_path: Path) -> None:
    base, state = hub
    name = "model-00002-of-00002.safetensors"
    auth = {"Authorization": f"Bearer {state.token}"}
    with open_url(resolve_url(base, name), headers=auth, timeout=5) as resp:
        assert splice.usable(resp)
        resp.geturl = lambda: resolve_url(base.replace("http:", "https:"), name)  # as a TLS response says
        assert not splice.usable(resp)
        # Read to the end, so that this request is over before a later test arms a fault for
        # the same file (the server takes a fault after the headers, and would take it here).
        assert resp.read() == state.files[name].content


def test_a_stalled_body_raises_within_the_timeout(
    hub: tuple[str, hub_standin.HubState], tmp_path: Path, body_path: tuple[str, list[str]]
) -> None:
    base, state = hub
    name = "model-00002-of-00002.safetensors"
    state.faults.append(hub_standin.Fault(kind="stall", path=name, stall_seconds=3))
    auth = {"Authorization": f"Bearer {state.token}"}
    size = len(state.files[name].content)
    with pytest.raises(OSError, match=r"timed out|no data for 0.5 s"):  # before the server's 3 s stall ends
        mirror.http_fetch(resolve_url(base, name), tmp_path / "part", size, timeout=0.5, headers=auth)
    kept = (tmp_path / "part").stat().st_size
    if body_path[0] == "spliced":  # what arrived before the stall is on disk, for the resume
        assert 0 < kept < size
    else:  # the read loop loses the chunk it was filling (up to 4 MiB)
        assert kept < size


def test_file_hasher_hashes_what_a_writer_appends_as_it_goes(tmp_path: Path) -> None:
    path = tmp_path / "grows"
    data = os.urandom(3 * splice.REPORT_BYTES + 12345)
    path.write_bytes(data[:100])  # a resumed file's first part is hashed from disk too
    feed = hashlib.sha256()
    hasher = splice.FileHasher(str(path), feed, 100)
    with path.open("ab") as out:
        for offset in range(100, len(data), 1_000_003):
            out.write(data[offset : offset + 1_000_003])
            out.flush()
            hasher.written(min(len(data), offset + 1_000_003))
    hasher.close(len(data))
    assert feed.hexdigest() == hashlib.sha256(data).hexdigest()


def test_file_hasher_reports_a_file_shorter_than_written(tmp_path: Path) -> None:
    path = tmp_path / "short"
    path.write_bytes(b"abc")
    hasher = splice.FileHasher(str(path), hashlib.sha256(), 0)
    with pytest.raises(OSError, match="shorter than the 10 bytes"):
        hasher.close(10)


# --- the watchdog's progress signal from the real client (huggingface_hub, as pinned) --------------


def test_pinned_client_is_the_one_the_tests_run() -> None:
    """requirements.txt's huggingface_hub (these tests) is model_weights' pinned client."""
    lock = (REPO / "roles" / "model_weights" / "files" / "client-requirements.txt").read_text()
    assert f"\nhuggingface-hub=={huggingface_hub.__version__} " in lock


def test_child_reports_the_bytes_it_fetches(hub: tuple[str, hub_standin.HubState], tmp_path: Path) -> None:
    """Over HTTP, the download child counts what huggingface_hub writes into the watchdog's file."""
    base, state = hub
    name = "model-00002-of-00002.safetensors"
    counter = tmp_path / "received"
    env = {
        **hub_client.child_env(base, state.token, disable_xet=True, download_timeout=10),
        "GLM_FLEET_PROGRESS_FILE": str(counter),
    }
    cmd = [sys.executable, "-c", hub_client.CHILD, "download", REPO_ID, REV, str(tmp_path / "hub"), name]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert local.reported_bytes(counter) == len(state.files[name].content)
    assert counter.stat().st_mode & 0o777 == 0o600


def test_over_xet_network_bytes_move_the_watchdog_while_the_file_stands_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub's Xet reporter, fed as hf_xet feeds it: bytes received while the in-order
    writer waits for the next term move the count; a stalled network does not."""
    counter = tmp_path / "received"
    monkeypatch.setenv("GLM_FLEET_PROGRESS_FILE", str(counter))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # as the child runs
    scope: dict[str, object] = {}
    exec(hub_client.CHILD_PROGRESS, scope)  # noqa: S102 - the child's own progress class, as it runs there

    def report(written: int, received: int) -> SimpleNamespace:
        return SimpleNamespace(
            total_bytes_completed=written, total_transfer_bytes_completed=received, total_bytes=1000,
            total_bytes_completion_rate=None, total_transfer_bytes_completion_rate=None,
        )  # fmt: skip

    with XetDownloadProgressReporter(
        reconstruction_desc="f: reconstructing file", total=1000, log_level=30, tqdm_class=scope["Progress"]
    ) as reporter:
        reporter.update_progress(report(0, 0))
        seen = [local.reported_bytes(counter)]
        for received in (300, 600, 900):  # the first term is still in flight: nothing written yet
            reporter.update_progress(report(0, received))
            seen.append(local.reported_bytes(counter))
        reporter.update_progress(report(0, 900))  # the network stands still too
        seen.append(local.reported_bytes(counter))
        reporter.update_progress(report(1000, 1000))
        seen.append(local.reported_bytes(counter))
    assert seen == [0, 300, 600, 900, 900, 2000]


def test_a_second_fetch_on_the_same_host_is_told_who_runs(tmp_path: Path) -> None:
    message = rf"another weights fetch is running on this host \(pid {os.getpid()}"
    with local.FetchLock(tmp_path), pytest.raises(model.SnapshotError, match=message):
        local.FetchLock(tmp_path).__enter__()
    with local.FetchLock(tmp_path):  # released: the next run takes it
        pass


def test_a_full_disk_says_where_and_how_much() -> None:
    entry = model.Entry("model-00001-of-00002.safetensors", 5_000_000_000, "1" * 40, "5" * 64)
    full = OSError(errno.ENOSPC, "No space left on device")
    message = local.no_space_message(full, Path("/var/lib/glm-fleet/huggingface/hub"), entry, 1_000)
    assert message is not None
    assert "/var/lib/glm-fleet/huggingface/hub" in message
    assert "needs 5000000000 bytes and 1000 bytes are free" in message
    assert local.no_space_message(OSError(errno.EIO, "I/O error"), Path("/x"), entry, 1) is None


def test_state_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "records.json"
    local.write_atomic(target, "old\n")

    def crash(self: Path, text: str) -> None:
        Path.write_bytes(self, text[:2].encode())
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", crash)
    with pytest.raises(OSError, match="No space left"):
        local.write_atomic(target, "new content\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["records.json"]  # no temporary file left behind


# --- a site cache that is down ---------------------------------------------------------------------


def mirror_snapshot(tmp_path: Path, anchor: str) -> hf_snapshot.Snapshot:
    params = {
        "cache_dir": str(tmp_path / "hf"), "state_dir": str(tmp_path / "state"), "repo_id": REPO_ID, "revision": REV,
        "source": "mirror", "endpoint": "http://127.0.0.1:9", "manifest_sha256": anchor, "manifest": None,
    }  # fmt: skip
    return hf_snapshot.Snapshot(params)


def test_a_host_with_the_verified_manifest_lists_its_snapshot_without_the_site_cache(tmp_path: Path) -> None:
    """The cache's weights server does not answer (port 9 is closed): the manifest this host kept
    when it last verified, with the anchor's sha256, lists the files to check."""
    data = model.manifest([model.Entry("config.json", 2, "1" * 40)], REPO_ID, REV)
    raw = model.manifest_text(data).encode()
    snap = mirror_snapshot(tmp_path, hashlib.sha256(raw).hexdigest())
    snap.state_dir.mkdir(parents=True)
    snap.manifest_file.write_bytes(raw)
    assert snap.entries() == [model.Entry("config.json", 2, "1" * 40)]


def test_without_a_verified_manifest_a_cache_that_is_down_is_named_with_what_to_do(tmp_path: Path) -> None:
    data = model.manifest([model.Entry("config.json", 2, "1" * 40)], REPO_ID, REV)
    snap = mirror_snapshot(tmp_path, "0" * 64)  # the cache verified another manifest since
    snap.state_dir.mkdir(parents=True)
    snap.manifest_file.write_text(model.manifest_text(data))
    with pytest.raises(model.SnapshotError) as e:
        snap.entries()
    message = str(e.value)
    assert f"cannot read http://127.0.0.1:9/{REPO_ID}/{REV}.manifest.json" in message
    assert "site.yml --tags site_cache" in message
    assert "model_weights_mirror_url empty" in message


# --- files fetched at once from the site cache -----------------------------------------------------


class Transfers(hf_snapshot.Snapshot):
    """A mirror snapshot whose downloads take 50 ms each and count how many run at once; `fail`
    names a file whose download fails for good."""

    def __init__(self, tmp_path: Path, fail: str = "") -> None:
        super().__init__({
            "cache_dir": str(tmp_path / "hf"), "state_dir": str(tmp_path / "state"), "repo_id": REPO_ID,
            "revision": REV, "source": "mirror",
        })  # fmt: skip
        self.state_dir.mkdir(parents=True)
        self.fail, self.lock, self.running, self.most, self.started = fail, threading.Lock(), 0, 0, []

    def fetch(self, entry: model.Entry) -> tuple[model.FetchReport, dict]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(entry.path)
        threading.Event().wait(0.05)
        with self.lock:
            self.running -= 1
        if entry.path == self.fail:
            raise model.SnapshotError(f"{entry.path}: failed after 5 attempts")
        return model.FetchReport(path=entry.path, bytes=entry.size, seconds=0.05), {"sha256": entry.path}


def entries(count: int) -> dict[str, model.Entry]:
    return {f"f{i}": model.Entry(f"f{i}", 10, "0" * 40, "1" * 64) for i in range(count)}


@pytest.mark.parametrize(("source", "streams", "most"), [("mirror", 2, 2), ("mirror", 1, 1), ("hub", 2, 1)])
def test_mirror_files_are_fetched_streams_at_a_time_and_recorded_in_order(
    tmp_path: Path, source: str, streams: int, most: int
) -> None:
    snap, by_path, records = Transfers(tmp_path), entries(6), {}
    params = {"files": list(by_path), "source": source, "mirror_streams": streams}
    fetched = hf_snapshot.fetch_files(snap, params, by_path, records)
    assert snap.most == most
    assert [f["path"] for f in fetched] == list(by_path)
    assert list(json.loads(snap.records_file.read_text())["files"]) == list(by_path)


def test_a_file_that_fails_stops_the_files_not_yet_started(tmp_path: Path) -> None:
    snap, by_path, records = Transfers(tmp_path, fail="f1"), entries(8), {}
    with pytest.raises(model.SnapshotError, match="f1: failed after 5 attempts"):
        hf_snapshot.fetch_files(
            snap, {"files": list(by_path), "source": "mirror", "mirror_streams": 2}, by_path, records
        )
    assert len(snap.started) <= 4  # f0 and f1, and at most the two that took their places
    assert "f1" not in records
    assert "f0" in records
