# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Work that goes on after the module returns, without Ansible's async wrapper.

Ansible's `async` writes the module and its arguments to a file on the host for as long as the job
runs. A job started here lives in a detached process that received its arguments in memory (the
module itself runs pipelined, so they never touch the disk either): killing it, or rebooting the
host, leaves nothing behind but its job file, which holds no arguments.

The job file (JSON, 0600) records the worker's pid and the kernel's start time of that process, so
that a reader tells a live worker from a dead one even after the pid is reused.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    return parse_start_ticks(stat)


def parse_start_ticks(stat: str) -> int | None:
    # The command name (field 2) is in parentheses and may hold spaces or ")"; fields follow the last ")".
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def alive(record: dict) -> bool:
    """Whether the worker a job record names still runs (same pid, same start time)."""
    pid, ticks = record.get("pid"), record.get("start_ticks")
    return isinstance(pid, int) and ticks is not None and start_ticks(pid) == ticks


def write_json(path: str, data: dict) -> None:
    """Replace path with data atomically, mode 0600."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".job-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def spawn(job_file: str, record: dict, work: Callable[[dict], dict]) -> dict:
    """Run work(record) in a detached process (own session, no terminal, stdio on /dev/null).

    The worker writes `record` with its pid and start time to job_file before this returns, then
    {"state": "done", "result": work(...)} or {"state": "failed", "msg": ...} when it ends. Returns
    the record as the worker first wrote it."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked processes
        _detach_and_run(read_end, write_end, job_file, record, work)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as f:
        started = f.read()
    if not started:
        raise OSError(f"the worker for {job_file} did not start")
    return json.loads(started)


def _detach_and_run(  # pragma: no cover - runs in the forked processes
    read_end: int, write_end: int, job_file: str, record: dict, work: Callable[[dict], dict]
) -> None:
    code = 1
    try:
        os.close(read_end)
        os.setsid()
        if os.fork():
            os._exit(0)  # the session leader goes; its child can never get a controlling terminal
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, write_end)
        os.closerange(write_end + 1, max(write_end + 2, os.sysconf("SC_OPEN_MAX")))
        os.umask(0o077)
        me = os.getpid()
        record = {**record, "pid": me, "start_ticks": start_ticks(me), "state": "running"}
        write_json(job_file, record)
        os.write(write_end, json.dumps(record).encode())
        os.close(write_end)
        try:
            record = {**record, "state": "done", "result": work(record)}
        except Exception as err:
            record = {**record, "state": "failed", "msg": str(err)}
        write_json(job_file, {**(read_json(job_file) or {}), **record})
        code = 0
    finally:
        os._exit(code)
