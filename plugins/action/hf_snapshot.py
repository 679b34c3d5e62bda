# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of glm.fleet.hf_snapshot: plan, check free space, fetch file by file with a
progress line per file (bytes done / total, rate, ETA), then verify and record (in the last
fetch's module run); or, with step=prune, only the host's pruning of older revisions. A snapshot
that is complete and recorded costs one module run (the plan)."""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.glm.fleet.plugins.module_utils._progress import human_bytes, human_seconds, progress_line

display = Display()
MODULE = "glm.fleet.hf_snapshot"
# Room left on the file system after the fetch, for partial files and the rest of the host.
FREE_MARGIN = 1024**3
# Files are fetched in batches of at least this many bytes, one module run and one progress line
# each: a 5 GB shard is a batch of its own, small files share one.
BATCH_BYTES = 1024**3


def batches(items: list[dict], size: int = BATCH_BYTES) -> list[list[dict]]:
    """Batches of at least `size` bytes, in order; files left over after the last full batch that
    make less than half a batch join it (a module run costs its start-up, whatever it fetches)."""
    out: list[list[dict]] = [[]]
    acc = 0
    left = sum(item["size"] for item in items)
    for item in items:
        if acc >= size and left >= size // 2:
            out.append([])
            acc = 0
        out[-1].append(item)
        acc += item["size"]
        left -= item["size"]
    return [b for b in out if b]


def snapshot_diff(plan: dict) -> dict[str, str]:
    """What `--diff` shows of a fetch: each file to fetch and why (missing, of the wrong size, not
    verifying), then as it will be; the weights themselves are not shown."""
    files = plan["to_fetch"]
    return {
        "before_header": plan["snapshot"],
        "after_header": plan["snapshot"],
        "before": "".join(f"{f['path']}: {f['reason']}\n" for f in files),
        "after": "".join(f"{f['path']}: {human_bytes(f['size'])}, verified against the manifest\n" for f in files),
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def step(self, args: dict, task_vars: dict, **extra: object) -> dict:
        result = self._execute_module(module_name=MODULE, module_args={**args, **extra}, task_vars=task_vars)
        result.pop("invocation", None)
        return result

    def run(self, tmp: str | None = None, task_vars: dict | None = None) -> dict:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = {k: v for k, v in self._task.args.items() if k not in ("step", "files", "manifest", "finalize")}
        if self._task.args.get("step") == "prune":  # one step on the host, no download
            return {**result, **self.step(args, task_vars, step="prune")}
        return self.fetch(result, args, task_vars)

    def fetch(self, result: dict, args: dict, task_vars: dict) -> dict:
        """Plan, check free space, then fetch (transfer), unless the snapshot is complete and recorded."""
        plan = self.step(args, task_vars, step="plan")
        if plan.get("failed"):
            return plan
        to_fetch = plan["to_fetch"]
        total = plan["total_bytes"]
        remaining = sum(f["size"] for f in to_fetch)
        result.update(
            snapshot=plan["snapshot"],
            files=plan["files"],
            total_bytes=total,
            to_fetch=to_fetch,
            manifest=plan["manifest"],
            fetched=[],
        )
        if self._play_context.diff and to_fetch:
            result["diff"] = snapshot_diff(plan)
        if remaining + FREE_MARGIN > plan["free_bytes"] and to_fetch:
            result.update(
                failed=True,
                msg=f"{plan['snapshot']}: {len(to_fetch)} files ({human_bytes(remaining)}) to fetch need "
                f"{human_bytes(remaining + FREE_MARGIN)} free, the file system has {human_bytes(plan['free_bytes'])}; "
                "free space or point model_weights_hf_home elsewhere",
            )
            return result
        if self._task.check_mode:
            result.update(
                changed=bool(to_fetch),
                msg=f"would fetch {len(to_fetch)} of {plan['files']} files ({human_bytes(remaining)})",
            )
            return result
        if plan.get("recorded"):  # every file verified, records and manifest as they should be: one module run
            result.update(
                changed=False,
                manifest_file=plan["manifest_file"],
                manifest_sha256=plan["manifest_sha256"],
                fetched_bytes=0,
                seconds=0.0,
                msg=f"all files present; {plan['files']} files ({human_bytes(total)}) verified at {plan['snapshot']}",
            )
            return result
        return self.transfer(result, args, task_vars, plan)

    def transfer(self, result: dict, args: dict, task_vars: dict, plan: dict) -> dict:
        """Fetch the planned files batch by batch, a progress line each; the last run also verifies
        and records (or, with nothing to fetch, a finalize run alone)."""
        host = task_vars.get("inventory_hostname", "?")
        to_fetch = plan["to_fetch"]
        total = plan["total_bytes"]
        done = total - sum(f["size"] for f in to_fetch)
        started = time.monotonic()
        fetched_bytes = 0
        count = 0
        final: dict = {}
        planned = batches(to_fetch)
        for number, batch in enumerate(planned, 1):
            paths = [item["path"] for item in batch]
            last = number == len(planned)  # verifies and records in the same module run
            res = self.step(args, task_vars, step="fetch", files=paths, manifest=plan["manifest"], finalize=last)
            if res.get("failed"):
                res["msg"] = f"fetching {', '.join(paths)}: {res.get('msg')}"
                res["fetched"] = result["fetched"]
                return res
            for report in res["fetched"]:
                result["fetched"].append(report)
                count += 1
                fetched_bytes += report["bytes"]
                done += report["bytes"]
            rate = fetched_bytes / max(time.monotonic() - started, 1e-6)
            stalls = sum(r["stalls"] for r in res["fetched"])
            corrupt = sum(r["corrupt"] for r in res["fetched"])
            notes = ", ".join(f"{n} {what}" for n, what in ((stalls, "stalled"), (corrupt, "corrupt")) if n)
            name = paths[0] if len(paths) == 1 else f"{len(paths)} files"
            display.display(
                f"{host}: [{count}/{len(to_fetch)}] {name} ({human_bytes(sum(i['size'] for i in batch))}"
                f"{', retried: ' + notes if notes else ''}); {progress_line(done, total, rate)}"
            )
            if last:
                final = res

        if not planned:  # nothing to fetch, but the records or the manifest to write
            final = self.step(args, task_vars, step="finalize", manifest=plan["manifest"])
        if final.get("failed"):
            final["fetched"] = result["fetched"]
            return final
        seconds = time.monotonic() - started
        result.update(
            changed=bool(to_fetch) or final["changed"],
            manifest_file=final.get("manifest_file"),
            manifest_sha256=final.get("manifest_sha256"),
            fetched_bytes=fetched_bytes,
            seconds=round(seconds, 3),
            msg=(
                f"fetched {len(to_fetch)} files, {human_bytes(fetched_bytes)} in {human_seconds(seconds)}; "
                if to_fetch
                else "all files present; "
            )
            + f"{plan['files']} files ({human_bytes(total)}) verified at {plan['snapshot']}",
        )
        return result
