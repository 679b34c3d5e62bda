"""Running commands and daemons for the lab: docker, the local engine, pid files, waiting for ports."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from glm_lab.config import STATE_DIR, LabError


def log(msg: str) -> None:
    print(f"lab: {msg}", flush=True)


def run(cmd: list[str], *, check: bool = True, capture: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, check=False, text=True, capture_output=capture, **kw)  # type: ignore[call-overload]
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip() if capture else ""
        raise LabError(f"{' '.join(cmd[:4])} ... failed (rc={proc.returncode}): {detail}")
    return proc


def write_whole(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `path` under another name and rename it into place: a reader (ansible-lint's syntax
    check, a playbook run, while `make test` brings the lab up beside its fast lane) sees the old
    file or the new one, never half of one."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(partial, mode)
    os.replace(partial, path)


def docker(*args: str, check: bool = True) -> str:
    return run(["docker", *args], check=check).stdout.strip()


def succeeds(*cmd: str) -> bool:
    return subprocess.run(cmd, check=False, capture_output=True).returncode == 0


def docker_alive() -> bool:
    return succeeds("docker", "info")


def ensure_dockerd() -> None:
    """Use the running engine, or start one (no systemd here: a setsid'd dockerd)."""
    if docker_alive():
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise LabError("no docker engine is running and dockerd is not installed (run: make deps)")
    Path("/var/run/docker.pid").unlink(missing_ok=True)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    logf = (STATE_DIR / "dockerd.log").open("ab")
    subprocess.Popen([dockerd], stdout=logf, stderr=logf, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if docker_alive():
            log("started dockerd")
            return
        time.sleep(1)
    raise LabError(f"dockerd did not come up in 90 s; see {STATE_DIR / 'dockerd.log'}")


def stop_pid(pidfile: Path) -> None:
    if not pidfile.exists():
        return
    try:
        pid = int(pidfile.read_text().strip())
        os.killpg(pid, signal.SIGTERM)
        for _attempt in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, ValueError, PermissionError):
        pass
    pidfile.unlink(missing_ok=True)


def port_taken(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


def start_daemon(
    name: str,
    argv: list[str],
    pidfile: Path,
    logfile: Path,
    address: tuple[str, int],
    *,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    stop_pid(pidfile)
    if port_taken(*address):
        raise LabError(
            f"{address[0]}:{address[1]} is taken by a process this lab did not start "
            "(the lab of another checkout? run `make lab-down` there)"
        )
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    logf = logfile.open("ab")
    proc = subprocess.Popen(argv, stdout=logf, stderr=logf, start_new_session=True, env=env)
    pidfile.write_text(str(proc.pid))
    log(f"started {name} (pid {proc.pid})")
    return proc


def wait_http(url: str, what: str, logfile: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Wait until `proc` serves url; a process that exits (a port taken by another) is an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            last = logfile.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise LabError(f"{what} exited with {proc.returncode}: {last[0]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - a fixed http:// URL
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise LabError(f"{what} did not answer on {url}; see {logfile}")


def wait_port(address: tuple[str, int], what: str, logfile: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not port_taken(*address):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise LabError(f"{what} does not listen on {address[0]}:{address[1]}; see {logfile}")
        time.sleep(0.2)
