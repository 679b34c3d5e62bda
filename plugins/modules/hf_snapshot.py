#!/usr/bin/python
# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_snapshot
short_description: Fetch a Hugging Face model snapshot at a pinned commit, verifying every file
version_added: 0.1.0
description:
  - Puts the files of O(repo_id) at O(revision) into the Hugging Face cache layout under
    O(cache_dir) (C(models--ORG--NAME/blobs) and C(snapshots/REVISION)), so that a server started
    with C(HF_HUB_OFFLINE=1) finds them.
  - With O(source=hub) the download client is huggingface_hub, run by the virtualenv interpreter
    O(python) in a child process per file. The token reaches it in the environment. A child that
    makes no progress for O(stall_timeout) seconds is killed and the file fetched again; after a
    stall, later attempts disable hf_xet and use plain HTTP.
  - With O(source=mirror) the files come over plain HTTP from a site cache that serves a verified
    snapshot (O(endpoint)C(/REPO/REVISION/PATH), manifest at O(endpoint)C(/REPO/REVISION.manifest.json)),
    resuming partial files with Range requests. The manifest is trusted only if its sha256 is
    O(manifest_sha256), which must come from the site cache over Ansible's own channel (the cache's
    C(manifest_sha256) return value), never from the mirror; a forged manifest or file is refused.
  - Every file is verified after its download, LFS files by sha256 (the Hub's LFS oid), the
    others by their git blob id; a file that does not verify is removed and fetched again.
    Verified files are recorded (size, mtime, change time, inode) in O(state_dir), so later runs do not hash
    320 GB again unless O(verify=full).
  - The action plugin of the same name runs the steps (C(plan), then C(fetch) file by file with a
    progress line per file, then C(finalize)); use the module through it, as the role does.
author:
  - glm.fleet contributors (@glm-fleet)
options:
  repo_id:
    description: The model repository, C(ORG/NAME).
    type: str
    required: true
  revision:
    description: Full 40-hex commit id. Branch names, tags and short ids are refused.
    type: str
    required: true
  cache_dir:
    description: The Hugging Face hub cache directory (C(HF_HOME/hub)).
    type: path
    required: true
  state_dir:
    description: Where verification records, the manifest and the progress file are kept.
    type: path
    required: true
  source:
    description: Where the files come from.
    type: str
    choices: [hub, mirror]
    default: hub
  endpoint:
    description:
      - For O(source=hub), the Hub endpoint (C(HF_ENDPOINT)); empty uses huggingface_hub's default.
      - For O(source=mirror), the base URL of the site cache's weights server.
    type: str
    default: ""
  token:
    description: Hugging Face token for gated repositories (O(source=hub)); passed to the client in C(HF_TOKEN).
    type: str
  python:
    description: Interpreter of the virtualenv that has huggingface_hub (O(source=hub)).
    type: path
    default: /opt/glm-fleet/hf/bin/python
  step:
    description:
      - C(plan) lists the files and what is missing; C(fetch) fetches O(files); C(finalize) verifies and records.
      - C(prune) removes this repository's revisions older than the O(keep_previous) newest others from the
        cache (their snapshot directories, the blobs no remaining revision links, refs naming them), never
        O(revision) or one in O(protect); it reads nothing from the network.
    type: str
    choices: [plan, fetch, finalize, prune]
    default: plan
  keep_previous:
    description: With O(step=prune), how many older revisions stay, newest first (the versions a rollback returns to).
    type: int
    default: 1
  protect:
    description: With O(step=prune), revisions that stay whatever their age.
    type: list
    elements: str
    default: []
  protect_from:
    description:
      - With O(step=prune), files or directories whose files name revisions that stay, as C(--revision <40 hex>)
        (the servers' systemd units, their last good versions).
    type: list
    elements: path
    default: []
  files:
    description: Paths of the files to fetch (O(step=fetch)).
    type: list
    elements: str
    default: []
  finalize:
    description: With O(step=fetch), verify and record in the same run once the files are fetched (the last batch).
    type: bool
    default: false
  manifest:
    description: The manifest returned by O(step=plan), so that later steps do not list the repository again.
    type: dict
  manifest_sha256:
    description:
      - For O(source=mirror), required, the sha256 (64 hex) of the manifest the site cache verified
        from the Hub (its C(manifest_sha256) return value). The mirror's manifest must have exactly it.
    type: str
    default: ""
  verify:
    description:
      - C(quick) trusts files whose size, mtime, change time and inode match their last verification.
      - C(full) hashes every file.
    type: str
    choices: [quick, full]
    default: quick
  stall_timeout:
    description: Seconds without progress after which a download is killed and retried.
    type: int
    default: 120
  retries:
    description: Attempts per file, counting stalls, dropped connections and files that do not verify.
    type: int
    default: 5
  mirror_streams:
    description:
      - With O(source=mirror), how many files are fetched at once (each over its own connection, hashed as it
        arrives). From the Hub, files are fetched one at a time.
    type: int
    default: 2
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - glm.fleet.attributes
attributes:
  check_mode:
    support: full
    details: The plan step runs in check mode and reports what would be fetched; nothing is downloaded.
  diff_mode:
    support: full
    details: Each file to fetch and why (missing, of the wrong size, not verifying), and its size once verified.
  idempotent:
    description: A complete, verified snapshot is left alone.
    support: full
notes:
  - Needs free space for the files it fetches; the action plugin checks it before the first download.
"""

EXAMPLES = r"""
- name: Fetch GLM-5.3-Flash at a pinned commit from the Hub
  glm.fleet.hf_snapshot:
    repo_id: zai-org/GLM-5.3-Flash
    revision: eb9eb208eb0d988989d07a6a12d0fdeb5f52574a
    cache_dir: /var/lib/glm-fleet/huggingface/hub
    state_dir: /var/lib/glm-fleet/weights
    token: "{{ vault_hf_token }}"

- name: Fetch the same snapshot from the site cache
  glm.fleet.hf_snapshot:
    repo_id: zai-org/GLM-5.3-Flash
    revision: eb9eb208eb0d988989d07a6a12d0fdeb5f52574a
    cache_dir: /var/lib/glm-fleet/huggingface/hub
    state_dir: /var/lib/glm-fleet/weights
    source: mirror
    endpoint: http://cache-1.example.internal:8081/weights
    manifest_sha256: "{{ hostvars['cache-1']['model_weights_manifest_sha256'] }}"
"""

RETURN = r"""
snapshot:
  description: The snapshot directory.
  returned: with O(step) C(plan), C(fetch) or C(finalize)
  type: str
removed:
  description: The revisions removed (or, in check mode, to remove).
  returned: with O(step=prune)
  type: list
  elements: str
freed_bytes:
  description: Bytes of the blobs removed with them.
  returned: with O(step=prune)
  type: int
total_bytes:
  description: Size of all the revision's files.
  returned: always
  type: int
files:
  description: Number of files in the revision.
  returned: always
  type: int
to_fetch:
  description: Files missing, of the wrong size or not verifying, with their sizes (step plan).
  returned: always
  type: list
  elements: dict
fetched:
  description: Per fetched file, bytes, seconds, attempts, stalls and corrupt downloads seen.
  returned: when files were fetched
  type: list
  elements: dict
manifest:
  description: The revision's files with size, git blob id and sha256 (LFS).
  returned: always
  type: dict
free_bytes:
  description: Free bytes on the file system of cache_dir.
  returned: always
  type: int
manifest_sha256:
  description: The sha256 of the manifest written to state_dir (what a site cache serves), the anchor of its mirrors.
  returned: after the finalize step, and with O(step=plan)
  type: str
recorded:
  description:
    - With O(step=plan), whether every file verified and the records and manifest on disk are already what the
      finalize step would write, so that no further step is needed.
  returned: with O(step=plan)
  type: bool
"""

import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm.fleet.plugins.module_utils._hf_hub import (
    CHILD,
    child_env,
    hub_tree,
    parse_child,
    start_child,
    watch_process,
)
from ansible_collections.glm.fleet.plugins.module_utils._hf_local import (
    Digest,
    FetchLock,
    Paths,
    link_blob,
    load_records,
    local_status,
    no_space_message,
    partial_bytes,
    remove_local,
    reported_bytes,
    save_records,
    stat_key,
    write_atomic,
)
from ansible_collections.glm.fleet.plugins.module_utils._hf_mirror import (
    http_bytes,
    http_fetch,
    mirror_url,
)
from ansible_collections.glm.fleet.plugins.module_utils._hf_model import (
    SHA256_RE,
    Entry,
    FetchReport,
    HubRefused,
    SnapshotError,
    check_repo_id,
    check_revision,
    entries_from_manifest,
    manifest,
    manifest_text,
    trusted_manifest,
)
from ansible_collections.glm.fleet.plugins.module_utils._hf_prune import named_revisions, prune


def free_bytes(path: Path) -> int:
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


class Snapshot:
    def __init__(self, params: dict) -> None:
        self.p = params
        self.paths = Paths(Path(params["cache_dir"]), params["repo_id"], params["revision"])
        self.state_dir = Path(params["state_dir"])
        self.records_file = self.state_dir / f"{self.paths.repo.name}--{params['revision']}.verified.json"
        self.progress_file = self.state_dir / "progress.json"
        self.progress_lock = threading.Lock()  # files fetched at once share the progress file

    # -- listing --

    def env(self, disable_xet: bool = False) -> dict[str, str]:
        return child_env(self.p["endpoint"], self.p["token"] or "", disable_xet, max(10, self.p["stall_timeout"]))

    def entries(self) -> list[Entry]:
        if self.p["manifest"]:
            return entries_from_manifest(self.p["manifest"], self.p["repo_id"], self.p["revision"])
        if self.p["source"] == "mirror":
            local = self.local_manifest()
            if local is not None:  # a node that has it needs no site cache to check its snapshot
                return entries_from_manifest(local, self.p["repo_id"], self.p["revision"])
            url = mirror_url(self.p["endpoint"], self.p["repo_id"], self.p["revision"])
            try:
                raw = http_bytes(url, 30)
            except SnapshotError as err:
                raise SnapshotError(
                    f"{err}: the site cache's weights server does not answer and this host has no verified copy of "
                    f"the manifest; start the site cache (site.yml --tags site_cache) or, to fetch from the Hub "
                    f"instead, allow it (model_weights_upstream_fallback) or leave model_weights_mirror_url empty "
                    f"for this host"
                ) from err
            data = trusted_manifest(raw, self.p["manifest_sha256"], url)
            return entries_from_manifest(data, self.p["repo_id"], self.p["revision"])
        if not Path(self.p["python"]).exists():
            raise SnapshotError(f"python {self.p['python']} does not exist: install huggingface_hub there first")
        return hub_tree(
            python=self.p["python"],
            repo_id=self.p["repo_id"],
            revision=self.p["revision"],
            cache_dir=self.paths.cache_dir,
            env=self.env(),
            timeout=300,
        )

    @property
    def manifest_file(self) -> Path:
        return self.state_dir / f"{self.paths.repo.name}--{self.p['revision']}.manifest.json"

    def local_manifest(self) -> dict | None:
        """The manifest this host kept when its snapshot last verified, if its bytes are the ones
        the site cache verified (the same sha256 anchor the mirror's copy must have)."""
        try:
            raw = self.manifest_file.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(raw).hexdigest() != self.p["manifest_sha256"]:
            return None  # another revision's, or the cache verified a new one: ask the mirror
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def plan(self, entries: list[Entry]) -> tuple[list[dict], dict[str, dict]]:
        records = load_records(self.records_file)
        fresh: dict[str, dict] = {}
        to_fetch = []
        for entry in entries:
            status, record = local_status(self.paths, entry, records.get(entry.path), self.p["verify"] == "full")
            if status == "ok" and record is not None:
                fresh[entry.path] = record
            else:
                to_fetch.append({"path": entry.path, "size": entry.size, "reason": status})
        return to_fetch, fresh

    # -- fetching --

    @staticmethod
    def partial_name(entry: Entry) -> str:
        return f"{entry.etag}.glm-fleet.incomplete"

    def write_progress(self, entry: Entry, done: int, started: float) -> None:
        elapsed = max(time.monotonic() - started, 1e-6)
        data = {"file": entry.path, "bytes": done, "size": entry.size, "rate": done / elapsed, "time": time.time()}
        with self.progress_lock:
            tmp = self.progress_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(data) + "\n")
            os.replace(tmp, self.progress_file)

    def attempt_hub(self, entry: Entry, report: FetchReport, started: float) -> None:
        cmd = [
            self.p["python"],
            "-c",
            CHILD,
            "download",
            self.p["repo_id"],
            self.p["revision"],
            str(self.paths.cache_dir),
            entry.path,
        ]
        counter = self.state_dir / f"{entry.etag}.received"
        counter.unlink(missing_ok=True)
        env = {**self.env(report.xet_disabled), "GLM_FLEET_PROGRESS_FILE": str(counter)}
        proc = start_child(cmd, env)
        try:
            # Stalled only when neither the file nor the bytes the client reports move (over Xet
            # the file grows a whole term at a time, see CHILD).
            watch = watch_process(
                proc,
                lambda: partial_bytes(self.paths, entry) + reported_bytes(counter),
                self.p["stall_timeout"],
                on_progress=lambda _moved: self.write_progress(entry, partial_bytes(self.paths, entry), started),
            )
        finally:
            counter.unlink(missing_ok=True)
        if watch.stalled:
            report.stalls += 1
            report.xet_disabled = True  # hf_xet has no read timeout of its own; fall back to plain HTTP
            raise SnapshotError(f"no progress for {self.p['stall_timeout']} s")
        parse_child(watch.stdout, watch.stderr, watch.rc or 0, f"download {entry.path}")

    def attempt_mirror(self, entry: Entry, started: float) -> Digest:
        self.paths.blobs.mkdir(parents=True, exist_ok=True)
        partial = self.paths.blobs / self.partial_name(entry)
        url = mirror_url(self.p["endpoint"], self.p["repo_id"], self.p["revision"], entry.path)
        digest = Digest(entry)
        try:
            http_fetch(
                url,
                partial,
                entry.size,
                self.p["stall_timeout"],
                on_bytes=lambda done: self.write_progress(entry, done, started),
                digest=digest,
            )
        except OSError as err:
            raise SnapshotError(self.no_space(err, entry) or f"{url}: {err}") from err
        os.replace(partial, self.paths.blob(entry))
        return digest

    def no_space(self, err: OSError, entry: Entry) -> str | None:
        return no_space_message(err, self.paths.blobs, entry, free_bytes(self.paths.cache_dir))

    def fetch(self, entry: Entry) -> tuple[FetchReport, dict]:
        report = FetchReport(path=entry.path, bytes=entry.size, seconds=0.0)
        started = time.monotonic()
        for report.attempts in range(1, self.p["retries"] + 1):
            try:
                blob = self.paths.blob(entry)
                if self.p["source"] == "hub":
                    self.attempt_hub(entry, report, started)
                    if not blob.exists():
                        raise SnapshotError(f"the download left no blob at {blob}")
                    digest = Digest(entry).feed_file(blob)
                else:
                    digest = self.attempt_mirror(entry, started)  # hashed while it downloaded
                if not digest.matches():
                    report.corrupt += 1
                    remove_local(self.paths, entry)
                    raise SnapshotError(f"content does not verify: expected {digest.wanted}, got {digest.found}")
                link_blob(self.paths, entry)
                report.seconds = round(time.monotonic() - started, 3)
                return report, {**stat_key(blob), "etag": entry.etag, "sha256": digest.sha256}
            except HubRefused:
                raise
            except SnapshotError as err:
                if "no space left" in str(err):
                    raise  # another attempt cannot help
                report.errors.append(f"attempt {report.attempts}: {err}")
            except OSError as err:
                full = self.no_space(err, entry)
                if full:
                    raise SnapshotError(full) from err
                report.errors.append(f"attempt {report.attempts}: {err}")
        raise SnapshotError(f"{entry.path}: failed after {report.attempts} attempts: " + "; ".join(report.errors))


def run(module: AnsibleModule) -> dict:
    p = module.params
    for problem in (check_repo_id(p["repo_id"]), check_revision(p["revision"])):
        if problem:
            raise SnapshotError(problem)
    if p["source"] == "mirror" and not p["endpoint"]:
        raise SnapshotError("source=mirror needs endpoint, the base URL of the site cache's weights server")
    if p["source"] == "mirror" and not SHA256_RE.fullmatch(p["manifest_sha256"] or ""):
        raise SnapshotError(
            "source=mirror needs manifest_sha256, the sha256 of the manifest the site cache verified "
            f"(64 hex, handed over by Ansible, not read from the mirror); got: {p['manifest_sha256']!r}"
        )
    if p["step"] == "prune":
        repo = Paths(Path(p["cache_dir"]), p["repo_id"], p["revision"]).repo
        protect = set(p["protect"]) | named_revisions([Path(d) for d in p["protect_from"]])
        removed, freed = prune(repo, p["revision"], p["keep_previous"], protect, module.check_mode)
        return {"changed": bool(removed), "removed": removed, "freed_bytes": freed}
    snap = Snapshot(p)
    entries = snap.entries()
    by_path = {e.path: e for e in entries}
    result: dict = {
        "changed": False,
        "snapshot": str(snap.paths.snapshot),
        "files": len(entries),
        "total_bytes": sum(e.size for e in entries),
        "manifest": manifest(entries, p["repo_id"], p["revision"]),
        "free_bytes": free_bytes(snap.paths.cache_dir),
    }
    if p["step"] == "plan":
        to_fetch, verified = snap.plan(entries)
        wanted_manifest = manifest_text(result["manifest"])
        result.update(
            to_fetch=to_fetch,
            verified=len(verified),
            recorded=not to_fetch and not must_record(snap, verified, wanted_manifest),
            manifest_file=str(snap.manifest_file),
            manifest_sha256=hashlib.sha256(wanted_manifest.encode()).hexdigest(),
        )
        return result
    if p["step"] == "fetch":
        unknown = [f for f in p["files"] if f not in by_path]
        if unknown:
            raise SnapshotError(f"not in {p['repo_id']}@{p['revision']}: {unknown}")
        records = load_records(snap.records_file)
        fetched = []
        if not module.check_mode:
            with FetchLock(snap.state_dir):
                fetched = fetch_files(snap, p, by_path, records)
        result.update(changed=bool(p["files"]), fetched=fetched, to_fetch=[])
        if not p["finalize"]:
            return result
        final = finalize(module, snap, entries, dict(result))
        return {**final, "changed": bool(p["files"]) or final["changed"]}
    return finalize(module, snap, entries, result)


def fetch_files(snap: Snapshot, p: dict, by_path: dict[str, Entry], records: dict[str, dict]) -> list[dict]:
    """Fetch the files, from the mirror `mirror_streams` at a time, from the Hub one by one; a file
    is recorded, in order, only once it verified. A file that fails stops the files not yet started."""

    def one(path: str) -> tuple[str, FetchReport, dict]:
        entry = by_path[path]
        # what the plan found there is wrong or partial; the mirror resumes its own partial file
        remove_local(snap.paths, entry, keep=snap.partial_name(entry) if p["source"] == "mirror" else "")
        report, record = snap.fetch(entry)
        return path, report, record

    streams = max(1, p["mirror_streams"]) if p["source"] == "mirror" else 1
    fetched = []
    pool = ThreadPoolExecutor(max_workers=streams)
    try:
        for path, report, record in pool.map(one, p["files"]):
            records[path] = record
            save_records(snap.records_file, records)
            fetched.append(report.__dict__)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return fetched


def must_record(snap: Snapshot, fresh: dict[str, dict], wanted_manifest: str) -> bool:
    """Whether the verification records or the manifest on disk differ from what they should be,
    or a progress file is left over: what finalize writes."""
    manifest_file = snap.manifest_file
    return (
        fresh != load_records(snap.records_file)
        or not manifest_file.exists()
        or manifest_file.read_text() != wanted_manifest
        or snap.progress_file.exists()
    )


def finalize(module: AnsibleModule, snap: Snapshot, entries: list[Entry], result: dict) -> dict:
    """Every file verified: the records and the manifest (the cache's trust anchor) written."""
    to_fetch, fresh = snap.plan(entries)
    if to_fetch:
        raise SnapshotError(f"the snapshot is incomplete or does not verify: {[f['path'] for f in to_fetch]}")
    wanted_manifest = manifest_text(result["manifest"])
    manifest_file = snap.manifest_file
    changed = must_record(snap, fresh, wanted_manifest)
    if changed and not module.check_mode:
        with FetchLock(snap.state_dir):
            save_records(snap.records_file, fresh)
            write_atomic(manifest_file, wanted_manifest)
            snap.progress_file.unlink(missing_ok=True)
    result.update(
        changed=changed,
        to_fetch=[],
        manifest_file=str(manifest_file),
        manifest_sha256=hashlib.sha256(wanted_manifest.encode()).hexdigest(),
    )
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "repo_id": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "state_dir": {"type": "path", "required": True},
            "source": {"type": "str", "choices": ["hub", "mirror"], "default": "hub"},
            "endpoint": {"type": "str", "default": ""},
            "token": {"type": "str", "no_log": True},
            "python": {"type": "path", "default": "/opt/glm-fleet/hf/bin/python"},
            "step": {"type": "str", "choices": ["plan", "fetch", "finalize", "prune"], "default": "plan"},
            "keep_previous": {"type": "int", "default": 1},
            "protect": {"type": "list", "elements": "str", "default": []},
            "protect_from": {"type": "list", "elements": "path", "default": []},
            "files": {"type": "list", "elements": "str", "default": []},
            "finalize": {"type": "bool", "default": False},
            "manifest": {"type": "dict"},
            "manifest_sha256": {"type": "str", "default": ""},
            "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
            "stall_timeout": {"type": "int", "default": 120},
            "retries": {"type": "int", "default": 5},
            "mirror_streams": {"type": "int", "default": 2},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except SnapshotError as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
