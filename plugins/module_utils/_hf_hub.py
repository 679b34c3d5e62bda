# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Hub source: huggingface_hub (the real client, in its own virtualenv) lists a revision's
files and downloads each one, in a child process per file watched for stalls.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.glm.fleet.plugins.module_utils._hf_model import (
    Entry,
    HubRefused,
    SnapshotError,
    entries_from_tree,
)

# Runs under the virtualenv's python. argv: mode repo_id revision cache_dir [filename]; the token and
# the endpoint come in the environment (HF_TOKEN, HF_ENDPOINT), never in argv. Prints one JSON line.
#
# Progress for the stall watchdog: every byte that huggingface_hub reports to a progress bar is
# counted into GLM_FLEET_PROGRESS_FILE (even with the bars disabled). Over HTTP that is the bytes
# written to the partial file; over Xet (huggingface_hub 2.4's XetDownloadProgressReporter) it is
# the bytes written plus the bytes received from the network. hf_xet 1.8 writes a file in order
# (reconstruct_to_file: truncate, then a SequentialWriter), one whole term at a time, while it
# fetches later terms and retries a failed fetch for up to 6 minutes: the partial file can stand
# still while the download is healthy, the network count does not.
CHILD_PROGRESS = r"""
import os
from huggingface_hub.utils import tqdm as hf_tqdm

class Progress(hf_tqdm):
    seen = 0
    fd = None

    def update(self, n=1):
        if n and os.environ.get("GLM_FLEET_PROGRESS_FILE"):
            if Progress.fd is None:
                Progress.fd = os.open(os.environ["GLM_FLEET_PROGRESS_FILE"], os.O_WRONLY | os.O_CREAT, 0o600)
            Progress.seen += int(n)
            os.pwrite(Progress.fd, b"%020d" % Progress.seen, 0)
        return super().update(n)
"""
CHILD = (
    CHILD_PROGRESS
    + r"""
import json, sys
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, RepositoryNotFoundError,
                                    RevisionNotFoundError, EntryNotFoundError)
mode, repo_id, revision, cache_dir = sys.argv[1:5]
try:
    if mode == "tree":
        files = []
        for f in HfApi().list_repo_tree(repo_id, revision=revision, recursive=True):
            if getattr(f, "blob_id", None) is None:
                continue
            lfs = {"sha256": f.lfs.sha256, "size": f.lfs.size} if f.lfs else None
            files.append({"type": "file", "path": f.path, "size": f.size, "blob_id": f.blob_id, "lfs": lfs})
        print(json.dumps({"files": files}))
    else:
        path = hf_hub_download(repo_id, sys.argv[5], revision=revision, cache_dir=cache_dir, tqdm_class=Progress)
        print(json.dumps({"path": path}))
except GatedRepoError as e:
    print(json.dumps({"error": "gated", "message": str(e).splitlines()[0]})); sys.exit(2)
except RevisionNotFoundError as e:
    print(json.dumps({"error": "revision", "message": str(e).splitlines()[0]})); sys.exit(2)
except EntryNotFoundError as e:
    print(json.dumps({"error": "entry", "message": str(e).splitlines()[0]})); sys.exit(2)
except RepositoryNotFoundError as e:
    print(json.dumps({"error": "repository", "message": str(e).splitlines()[0]})); sys.exit(2)
except HfHubHTTPError as e:
    status = e.response.status_code if e.response is not None else None
    print(json.dumps({"error": "http", "status": status, "message": str(e).splitlines()[0]})); sys.exit(2)
except OSError as e:
    if e.errno != 28:  # ENOSPC: the parent names the file system and the bytes needed
        raise
    print(json.dumps({"error": "nospace", "message": str(e)})); sys.exit(2)
"""
)

HINTS = {
    "gated": "the repository is gated: set model_weights_hf_token (in ansible-vault) to a token that has access",
    "revision": "the revision does not exist in this repository: check model_weights_revision",
    "repository": "the repository does not exist or the token cannot see it: check model_weights_repo_id and the token",
    "entry": "the file is not in this revision",
}


def child_env(endpoint: str, token: str, disable_xet: bool, download_timeout: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        {
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DOWNLOAD_TIMEOUT": str(download_timeout),
            "HF_HUB_ETAG_TIMEOUT": str(download_timeout),
        }
    )
    if endpoint:
        env["HF_ENDPOINT"] = endpoint.rstrip("/")
    if token:
        env["HF_TOKEN"] = token
    if disable_xet:
        env["HF_HUB_DISABLE_XET"] = "1"
    return env


def parse_child(stdout: str, stderr: str, rc: int, what: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        raise SnapshotError(f"huggingface_hub failed to {what} (rc={rc}): {' '.join(tail) or 'no output'}")
    data = json.loads(lines[-1])
    if data.get("error") == "nospace":
        raise OSError(errno.ENOSPC, data["message"])
    if "error" in data:
        hint = HINTS.get(data["error"], "")
        if data["error"] == "http" and data.get("status") == 401:
            hint = "the Hub refused the token: check model_weights_hf_token"
        if data["error"] != "http" or data.get("status") in (401, 403, 404):
            raise HubRefused(f"huggingface_hub could not {what}: {data['message']}" + (f" ({hint})" if hint else ""))
        raise SnapshotError(f"huggingface_hub could not {what}: {data['message']}" + (f" ({hint})" if hint else ""))
    return data


def hub_tree(
    *, python: str, repo_id: str, revision: str, cache_dir: Path, env: dict[str, str], timeout: float
) -> list[Entry]:
    # Not AnsibleModule.run_command: the child gets an environment of its own (env, not the module's
    # plus additions) and a timeout, which run_command has not.
    proc = subprocess.run(  # pylint: disable=ansible-bad-function
        [python, "-c", CHILD, "tree", repo_id, revision, str(cache_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    data = parse_child(proc.stdout, proc.stderr, proc.returncode, f"list {repo_id}@{revision}")
    return entries_from_tree(data["files"])


def start_child(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start a download child in its own session (so the watchdog can kill its whole group)."""
    # Not AnsibleModule.run_command: the watchdog reads progress while the child runs, and kills its
    # whole process group on a stall.
    return subprocess.Popen(  # pylint: disable=ansible-bad-function
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )


@dataclass
class Watch:
    """What the watchdog saw of one attempt."""

    rc: int | None
    stalled: bool
    stdout: str = ""
    stderr: str = ""


def watch_process(
    proc: subprocess.Popen,
    progress: Callable[[], int],
    stall_timeout: float,
    *,
    on_progress: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tick: float = 0.2,
) -> Watch:
    """Wait for proc; kill it when progress() has not grown for stall_timeout seconds."""
    last_bytes, last_change = progress(), clock()
    while proc.poll() is None:
        sleep(tick)
        now_bytes = progress()
        if now_bytes != last_bytes:
            last_bytes, last_change = now_bytes, clock()
            if on_progress is not None:
                on_progress(now_bytes)
        elif clock() - last_change >= stall_timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Watch(rc=None, stalled=True, stdout=out or "", stderr=err or "")
    out, err = proc.communicate()
    return Watch(rc=proc.returncode, stalled=False, stdout=out or "", stderr=err or "")
