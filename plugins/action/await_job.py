# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for an async job started with `async: N, poll: 0`, printing its progress file as it grows.

A long pull runs as an async job on the host, so neither an SSH drop nor a task timeout kills it;
this action polls the job and shows, every time the progress changes, what the job wrote to its
progress file. It returns the job's own result (changed, failed, msg, ...)."""

from __future__ import annotations

import base64
import json
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.glm.fleet.plugins.module_utils._hf_snapshot import human_bytes, human_seconds

display = Display()


def describe(progress: dict, elapsed: float) -> str:
    """One line for a progress dict with layers/bytes (image pulls) or bytes/size (files)."""
    parts = []
    if "layers" in progress:
        parts.append(f"layers {progress.get('layers_done', 0)}/{progress['layers']}")
    done = progress.get("bytes", 0)
    total = progress.get("bytes_total") or progress.get("size") or 0
    if total:
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else 0.0
        parts.append(f"{human_bytes(done)} / {human_bytes(total)}, {human_bytes(rate)}/s, ETA {human_seconds(eta)}")
    return "; ".join(parts) or "started"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("jid", "progress_file", "timeout", "interval", "what"))

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        jid = args.get("jid")
        if not jid:
            raise AnsibleActionFail("jid is required: the ansible_job_id of a task run with async and poll: 0")
        timeout = float(args.get("timeout", 86400))
        interval = float(args.get("interval", 5))
        what = args.get("what", "job")
        progress_file = args.get("progress_file")
        host = task_vars.get("inventory_hostname", "?")
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        started = time.monotonic()
        shown = None
        while True:
            status = self._execute_module(
                module_name="ansible.legacy.async_status",
                module_args={"jid": jid, "mode": "status", "_async_dir": async_dir},
                task_vars=task_vars,
            )
            if status.get("finished"):
                self._execute_module(
                    module_name="ansible.legacy.async_status",
                    module_args={"jid": jid, "mode": "cleanup", "_async_dir": async_dir},
                    task_vars=task_vars,
                )
                for key in ("ansible_job_id", "finished", "started", "results_file", "invocation"):
                    status.pop(key, None)
                result.update(status)
                result["waited_s"] = round(time.monotonic() - started, 1)
                return result
            if status.get("failed"):
                result.update(status)
                return result
            if time.monotonic() - started > timeout:
                result.update(failed=True, msg=f"{what} did not finish in {timeout:.0f} s (job {jid} goes on)")
                return result
            if progress_file:
                read = self._execute_module(
                    module_name="ansible.legacy.slurp", module_args={"src": progress_file}, task_vars=task_vars
                )
                if not read.get("failed"):
                    try:
                        progress = json.loads(base64.b64decode(read["content"]))
                    except ValueError:
                        progress = None
                    line = describe(progress, time.monotonic() - started) if isinstance(progress, dict) else None
                    if line and progress != shown:
                        display.display(f"{host}: {what}: {line}")
                        shown = progress
            time.sleep(interval)
