"""The glm.fleet lab: a fleet of systemd hosts on one machine, reached over SSH.

    python tests/lab/lab.py up [--gpu-nodes N]    start (or restart) the lab, write inventories/lab/hosts.yml
    python tests/lab/lab.py down                  remove every container, volume, network and process it made
    python tests/lab/lab.py status                print the lab state as JSON

Each node is a container whose PID 1 is systemd, built from a Debian 12 root bootstrapped on this
machine (no image can be pulled here) and started with least-privilege flags (privileged mode is
not available). Each node has its own docker volume for /var/lib/docker, so roles can install and
run a docker engine inside it. The controller reaches the nodes over SSH with a key generated for
the lab and host keys collected from the nodes (strict host key checking stays on).

Services on the lab network's gateway (172.30.253.1), started by `services` and by `up`:
- :5000, Debian's docker-registry, the site's Docker Hub mirror: nodes whose daemon.json lists it
  under registry-mirrors pull `lmsysorg/...@sha256:...` through it;
- :8080, a static HTTP server for the stand-ins of unreachable upstreams: /nvidia/ is a signed apt
  repository in the shape of NVIDIA's libnvidia-container repository (tests/lab/aptrepo.py), and
  /wheels/ the download client's wheels (from PyPI, which the nodes cannot reach);
- :5001, a second docker-registry that needs a login (htpasswd), a team's private registry, with a
  16 MB image; the nodes reach it through :5002, a 2 MB/s link (tests/lab/slowlink.py);
- :8090, the Hugging Face Hub stand-in (tests/lab/hub_standin.py) with the gated model repository,
  a per-lab token, byte counters and fault injection.

Nodes: gpu-N (172.30.253.10+N), the site cache cache-1 (172.30.253.50) and laptop-1 (.100).

GPU nodes also get the lab's stand-in NVIDIA driver tools: an `nvidia-smi` that reports a 4x B200
half HGX system and a fabric manager unit, so preflight sees the machine of the deployment recipe.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aptrepo
import oci
import standin_deps

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STATE_DIR = Path(os.environ.get("GLM_LAB_STATE", REPO / ".lab"))
INVENTORY = REPO / "inventories" / "lab" / "hosts.yml"
PREFIX = os.environ.get("GLM_LAB_PREFIX", "glm-lab")
LABEL = "io.glm-fleet.lab"
NETWORK = f"{PREFIX}-net"
IMAGE_REPO = "glm-fleet-lab/debian12"
SUITE = "bookworm"
# Fixed addresses: inventories/lab/group_vars and molecule refer to them.
SUBNET = "172.30.253.0/24"
GATEWAY = "172.30.253.1"
DYNAMIC_RANGE = "172.30.253.128/25"  # molecule's containers; lab nodes take fixed addresses below it
REGISTRY_PORT = 5000
PRIVATE_REGISTRY_PORT = 5001  # a registry that needs a login ...
SLOW_LINK_PORT = 5002  # ... which the nodes reach through a slow link
SLOW_LINK_RATE = 2 * 1024 * 1024  # bytes per second
PRIVATE_REPO = "team/sglang-private"
PRIVATE_USER = "fleet-pull"
HTTP_PORT = 8080
HUB_PORT = 8090
SITE_CACHE_ADDRESS = "172.30.253.50"
STANDIN_CACHE = STATE_DIR / "cache" / "standin"


CLIENT_REQUIREMENTS = REPO / "roles" / "model_weights" / "files" / "client-requirements.txt"


WWW = STATE_DIR / "www"
MAX_GPU_NODES = 8
SMOKE_REPO = "glm-fleet-lab/smoke"
SGLANG_REPO, SGLANG_TAG = "lmsysorg/sglang", "glm-5.3-flash-lab"
SERVICES_VARS = REPO / "inventories" / "lab" / "group_vars" / "all" / "services.yml"

NODE_FLAGS = [
    "--cap-add", "SYS_ADMIN",
    "--cap-add", "NET_ADMIN",
    "--security-opt", "seccomp=unconfined",
    "--security-opt", "apparmor=unconfined",
    "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs", "/run",
    "--tmpfs", "/run/lock",
    "--tmpfs", "/tmp",  # noqa: S108 - the node's own /tmp
    "--stop-signal", "SIGRTMIN+3",
]  # fmt: skip


class LabError(RuntimeError):
    pass


@dataclass
class Node:
    name: str
    group: str
    container: str
    address: str = ""


def log(msg: str) -> None:
    print(f"lab: {msg}", flush=True)


def run(cmd: list[str], *, check: bool = True, capture: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, check=False, text=True, capture_output=capture, **kw)  # type: ignore[call-overload]
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip() if capture else ""
        raise LabError(f"{' '.join(cmd[:4])} ... failed (rc={proc.returncode}): {detail}")
    return proc


def docker(*args: str, check: bool = True) -> str:
    return run(["docker", *args], check=check).stdout.strip()


# --- docker engine -------------------------------------------------------------------------------


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


# --- base image ----------------------------------------------------------------------------------


def packages() -> list[str]:
    lines = (HERE / "image" / "packages.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def image_tag() -> str:
    recipe = hashlib.sha256()
    recipe.update(SUITE.encode())
    recipe.update(" ".join(packages()).encode())
    recipe.update((HERE / "image" / "customize.sh").read_bytes())
    return f"{IMAGE_REPO}:{recipe.hexdigest()[:12]}"


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (so the lab needs no mirror name of its own)."""
    if os.environ.get("GLM_LAB_DEBIAN_MIRROR"):
        return os.environ["GLM_LAB_DEBIAN_MIRROR"]
    sources = sorted(Path("/etc/apt").glob("sources.list.d/*.sources"))
    for path in sources:
        for line in path.read_text().splitlines():
            if line.startswith("URIs:"):
                for uri in line.split()[1:]:
                    if "security" not in uri:
                        return uri
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                return parts[1]
    raise LabError("no Debian mirror found in /etc/apt; set GLM_LAB_DEBIAN_MIRROR")


def ensure_image() -> str:
    tag = image_tag()
    if succeeds("docker", "image", "inspect", tag):
        log(f"base image {tag} is cached")
        docker("tag", tag, f"{IMAGE_REPO}:latest")
        return tag
    if shutil.which("debootstrap") is None:
        raise LabError("debootstrap is not installed (run: make deps)")
    mirror = debian_mirror()
    log(f"bootstrapping Debian {SUITE} for {tag} (about a minute)")
    with tempfile.TemporaryDirectory(prefix="glm-lab-root-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "root"
        run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(packages())}", SUITE, str(root), mirror],
            capture=True,
        )
        shutil.copy(HERE / "image" / "customize.sh", root / "customize.sh")
        run(["chroot", str(root), "/bin/sh", "/customize.sh"])
        (root / "customize.sh").unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        run(
            [
                "docker", "import",
                "-c", 'CMD ["/lib/systemd/systemd"]',
                "-c", "ENV container=docker",
                "-c", f"LABEL {LABEL}.image=base",
                "-", tag,
            ],
            stdin=tar.stdout,
        )  # fmt: skip
        tar.wait()
    docker("tag", tag, f"{IMAGE_REPO}:latest")
    log(f"built {tag}")
    return tag


# --- network and registry ------------------------------------------------------------------------


def ensure_network() -> str:
    """Create the lab network; returns its gateway address (the host side)."""
    if not succeeds("docker", "network", "inspect", NETWORK):
        created = run(
            ["docker", "network", "create", "--label", f"{LABEL}=1", "--subnet", SUBNET,
             "--gateway", GATEWAY, "--ip-range", DYNAMIC_RANGE, NETWORK],
            check=False,
        )  # fmt: skip
        if created.returncode != 0:
            raise LabError(f"cannot create the lab network {NETWORK} on {SUBNET}: {created.stderr.strip()}")
    ipam = json.loads(docker("network", "inspect", NETWORK, "--format", "{{json .IPAM.Config}}"))
    if ipam[0].get("Gateway") != GATEWAY:
        raise LabError(f"network {NETWORK} exists with gateway {ipam[0].get('Gateway')}; run: make lab-down")
    return GATEWAY


def registry_paths() -> dict[str, Path]:
    base = STATE_DIR / "registry"
    return {
        "base": base,
        "config": base / "config.yml",
        "data": base / "data",
        "pid": base / "registry.pid",
        "log": base / "registry.log",
    }


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
    name: str, argv: list[str], pidfile: Path, logfile: Path, address: tuple[str, int]
) -> subprocess.Popen[bytes]:
    stop_pid(pidfile)
    if port_taken(*address):
        raise LabError(
            f"{address[0]}:{address[1]} is taken by a process this lab did not start "
            "(the lab of another checkout? run `make lab-down` there)"
        )
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    logf = logfile.open("ab")
    proc = subprocess.Popen(argv, stdout=logf, stderr=logf, start_new_session=True)
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


def start_registry(gateway: str) -> str:
    """Debian's docker-registry (distribution 2.8) on the gateway: the site's Docker Hub mirror."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise LabError("docker-registry is not installed (run: make deps)")
    paths = registry_paths()
    paths["data"].mkdir(parents=True, exist_ok=True)
    address = f"{gateway}:{REGISTRY_PORT}"
    paths["config"].write_text(
        "version: 0.1\n"
        "log:\n  level: info\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {paths['data']}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: {address}\n"
    )
    argv = [binary, "serve", str(paths["config"])]
    proc = start_daemon("registry", argv, paths["pid"], paths["log"], (gateway, REGISTRY_PORT))
    wait_http(f"http://{address}/v2/", "the registry", paths["log"], proc)
    return address


def start_private_registry(gateway: str) -> str:
    """A second docker-registry that needs a login (htpasswd, bcrypt), as a team's own registry; the
    nodes reach it through a 2 MB/s link (tests/lab/slowlink.py), so a pull lasts long enough to be
    looked at and killed. Returns the address the nodes pull from."""
    binary, htpasswd = shutil.which("docker-registry"), shutil.which("htpasswd")
    if binary is None or htpasswd is None:
        raise LabError("docker-registry and htpasswd are needed (Debian: docker-registry, apache2-utils): make deps")
    base = STATE_DIR / "private-registry"
    (base / "data").mkdir(parents=True, exist_ok=True)
    password_file = STATE_DIR / "registry_password"
    if not password_file.exists():
        password_file.touch(mode=0o600)
        password_file.write_text(secrets.token_hex(20))
    password = password_file.read_text().strip()
    subprocess.run([htpasswd, "-iBc", str(base / "htpasswd"), PRIVATE_USER], input=password, text=True,
                   check=True, capture_output=True)  # fmt: skip
    (base / "config.yml").write_text(
        "version: 0.1\n"
        "log:\n  level: info\n"
        f"storage:\n  filesystem:\n    rootdirectory: {base / 'data'}\n"
        f"http:\n  addr: {gateway}:{PRIVATE_REGISTRY_PORT}\n"
        f"auth:\n  htpasswd:\n    realm: glm-lab-private\n    path: {base / 'htpasswd'}\n"
    )
    proc = start_daemon("private registry", [binary, "serve", str(base / "config.yml")], base / "registry.pid",
                        base / "registry.log", (gateway, PRIVATE_REGISTRY_PORT))  # fmt: skip
    wait_port((gateway, PRIVATE_REGISTRY_PORT), "the private registry", base / "registry.log", proc)
    argv = [sys.executable, str(HERE / "slowlink.py"), "--listen", f"{gateway}:{SLOW_LINK_PORT}",
            "--to", f"{gateway}:{PRIVATE_REGISTRY_PORT}", "--rate", str(SLOW_LINK_RATE)]  # fmt: skip
    link = start_daemon("slow link", argv, base / "slowlink.pid", base / "slowlink.log", (gateway, SLOW_LINK_PORT))
    wait_port((gateway, SLOW_LINK_PORT), "the slow link", base / "slowlink.log", link)
    return f"{gateway}:{SLOW_LINK_PORT}"


def private_image() -> oci.Image:
    """An image with 16 MB of incompressible bytes (the same bytes every time): 8 s over the slow link."""
    import random  # noqa: PLC0415 - only here: reproducible filler, not a secret

    return oci.Image(
        files=[oci.File("payload", random.Random(5).randbytes(16 * 1024 * 1024))],  # noqa: S311
        entrypoint=["/payload"],
        labels={"org.opencontainers.image.title": "glm.fleet lab private image"},
    )


def start_www(gateway: str) -> str:
    """The static HTTP server for upstream stand-ins; builds the signed NVIDIA apt repository."""
    aptrepo.build(WWW / "nvidia", STATE_DIR / "gnupg")
    pidfile, logfile = STATE_DIR / "www.pid", STATE_DIR / "www.log"
    argv = [sys.executable, "-m", "http.server", str(HTTP_PORT), "--bind", gateway, "--directory", str(WWW)]
    proc = start_daemon("http server", argv, pidfile, logfile, (gateway, HTTP_PORT))
    url = f"http://{gateway}:{HTTP_PORT}"
    wait_http(f"{url}/nvidia/gpgkey", "the lab http server", logfile, proc)
    return url


def start_hub(gateway: str) -> str:
    """The Hugging Face Hub stand-in (tests/lab/hub_standin.py) with a per-lab token."""
    token_file = STATE_DIR / "hf_token"
    if not token_file.exists():
        token_file.touch(mode=0o600)
        token_file.write_text("hf_lab_" + secrets.token_hex(16))
    pidfile, logfile = STATE_DIR / "hub.pid", STATE_DIR / "hub.log"
    shard_mib = os.environ.get("GLM_LAB_HUB_SHARD_MIB", "4")
    argv = [
        sys.executable, str(HERE / "hub_standin.py"), "--bind", gateway, "--port", str(HUB_PORT),
        "--token-file", str(token_file), "--shard-mib", shard_mib,
        "--tokenizer-json", str(standin_deps.tokenizer_json(STANDIN_CACHE)),
    ]  # fmt: skip
    proc = start_daemon("hub stand-in", argv, pidfile, logfile, (gateway, HUB_PORT))
    url = f"http://{gateway}:{HUB_PORT}"
    wait_http(f"{url}/_lab/stats", "the hub stand-in", logfile, proc)
    return url


def hub_call(path: str, body: dict | None = None) -> dict:
    """The Hub stand-in's lab endpoints: GET /_lab/stats, POST /_lab/reset and /_lab/fault."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://{GATEWAY}:{HUB_PORT}{path}", data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - the lab's fixed http:// URL
        return json.load(resp)


def hub_tree() -> list[dict]:
    """The Hub stand-in's files with path, size and sha256 (its /_lab/files, which counts no bytes)."""
    return hub_call("/_lab/files")["files"]


REGISTRY_LINE = re.compile(r'^(\S+) .* "GET /v2/[^ ]+/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" 200 (\d+)')


def image_blobs(reference: str) -> list[dict]:
    """Config and layer descriptors of an image the lab pushed (NAME[:TAG]@DIGEST), from its registry."""
    name, digest = reference.split("@")
    repo = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    request = urllib.request.Request(
        f"http://{GATEWAY}:{REGISTRY_PORT}/v2/{repo}/manifests/{digest}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310
        manifest = json.load(resp)
    return [manifest["config"], *manifest["layers"]]


def registry_log_offset() -> int:
    log_path = registry_paths()["log"]
    return log_path.stat().st_size if log_path.exists() else 0


def registry_blob_bytes(since: int = 0) -> dict[str, int]:
    """Bytes of image layers the lab registry (Docker Hub's stand-in) served since a log offset, per client."""
    out: dict[str, int] = {}
    with registry_paths()["log"].open("rb") as f:
        f.seek(since)
        for line in f.read().decode(errors="replace").splitlines():
            match = REGISTRY_LINE.match(line)
            if match:
                out[match.group(1)] = out.get(match.group(1), 0) + int(match.group(3))
    return out


def fetch_wheels() -> None:
    """Wheels of the download client, served to the nodes as a find-links index (PyPI through this
    machine's pip configuration; the nodes themselves reach no package index but Debian's): the
    role's hash-pinned requirements, for the nodes' Python (Debian 12's 3.11, as here)."""
    wheels = WWW / "wheels"
    marker = wheels / ".requirements"
    wanted = CLIENT_REQUIREMENTS.read_text()
    if marker.exists() and marker.read_text() == wanted:
        return
    wheels.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:", "--require-hashes",
         "-d", str(wheels), "-r", str(CLIENT_REQUIREMENTS)])  # fmt: skip
    marker.write_text(wanted)


def smoke_image() -> oci.Image:
    """A one-binary image (static busybox) that proves a node ran what it pulled by digest."""
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise LabError("/bin/busybox is missing (Debian package busybox-static; run: make deps)")
    return oci.Image(
        files=[
            oci.File("bin", is_dir=True, mode=0o755),
            oci.File("bin/busybox", busybox.read_bytes(), mode=0o755),
            oci.File("bin/sh", link="busybox", mode=0o777),
            oci.File("etc/glm-lab-smoke", b"glm.fleet lab smoke image\n"),
        ],
        entrypoint=["/bin/busybox"],
        cmd=["cat", "/etc/glm-lab-smoke"],
        labels={"org.opencontainers.image.title": "glm.fleet lab smoke image"},
    )


def base_layer(image: str) -> oci.Layer:
    """The lab base image's root filesystem as a layer (cached per image), via `docker save`."""
    cache = STATE_DIR / "cache" / image.replace("/", "_").replace(":", "_")
    if not (cache / "layer.tar.gz").exists():
        cache.mkdir(parents=True, exist_ok=True)
        saved = subprocess.run(["docker", "save", image], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
            (layer_name,) = manifest[0]["Layers"]
            raw = tar.extractfile(layer_name).read()  # type: ignore[union-attr]
        layer = oci.layer_from_tar(raw)
        (cache / "layer.tar.gz").write_bytes(layer.blob)
        (cache / "diff_id").write_text(layer.diff_id)
    return oci.Layer(blob=(cache / "layer.tar.gz").read_bytes(), diff_id=(cache / "diff_id").read_text())


def sglang_standin_image(base: str) -> oci.Image:
    """The stand-in SGLang server (tests/lab/sglang_standin) on the lab's Debian root filesystem,
    with the `tokenizers` library it counts tokens with (tests/lab/standin_deps.py)."""
    package = HERE / "sglang_standin" / "sglang"
    dist = "usr/local/lib/python3.11/dist-packages"
    tokenizers = standin_deps.tokenizers_package(STANDIN_CACHE)
    dirs = sorted({str(Path(name).parent) for name in tokenizers} | {"sglang"})
    return oci.Image(
        base=[base_layer(base)],
        files=[
            oci.File(dist, is_dir=True, mode=0o755),
            *(oci.File(f"{dist}/{d}", is_dir=True, mode=0o755) for d in dirs),
            *(oci.File(f"{dist}/sglang/{path.name}", path.read_bytes()) for path in sorted(package.glob("*.py"))),
            *(
                oci.File(f"{dist}/{name}", data, mode=0o755 if name.endswith(".so") else 0o644)
                for name, data in tokenizers.items()
            ),
        ],
        cmd=["python3", "-m", "sglang.launch_server", "--help"],
        env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONUNBUFFERED=1"],
        labels={"org.opencontainers.image.title": "glm.fleet lab stand-in for SGLang"},
    )


# --- nodes ---------------------------------------------------------------------------------------


def ssh_key() -> Path:
    key = STATE_DIR / "id_ed25519"
    if not key.exists():
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "glm-fleet-lab", "-f", str(key)])
    return key


def plan(gpu_nodes: int) -> list[Node]:
    nodes = [
        Node(f"gpu-{i}", "gpu_nodes", f"{PREFIX}-gpu-{i}", f"172.30.253.{10 + i}") for i in range(1, gpu_nodes + 1)
    ]
    nodes.append(Node("cache-1", "site_cache", f"{PREFIX}-cache-1", SITE_CACHE_ADDRESS))
    nodes.append(Node("laptop-1", "developer_laptops", f"{PREFIX}-laptop-1", "172.30.253.100"))
    return nodes


def start_node(node: Node, image: str, pubkey: str) -> None:
    docker(
        "run", "-d", "--name", node.container, "--hostname", node.name,
        "--network", NETWORK, "--ip", node.address,
        "--label", f"{LABEL}=1", "--label", f"{LABEL}.group={node.group}",
        *NODE_FLAGS,
        "--mount", f"type=volume,source={node.container}-docker,target=/var/lib/docker,volume-label={LABEL}=1",
        image,
    )  # fmt: skip
    for user in ("fleet", "dev"):
        docker(
            "exec", node.container, "sh", "-c",
            f"printf '%s\\n' '{pubkey}' > /home/{user}/.ssh/authorized_keys && "
            f"chown {user}:{user} /home/{user}/.ssh/authorized_keys && chmod 600 /home/{user}/.ssh/authorized_keys",
        )  # fmt: skip


def prepare_nodes() -> None:
    """What the hosts have before site.yml runs: on GPU nodes the driver's tools (nvidia-smi, on HGX
    the fabric manager); on laptops Node.js with npm and the site's CAs."""
    for name in ("driver_standins.yml", "laptop_tools.yml"):
        playbook = HERE / "playbooks" / name
        proc = run(["ansible-playbook", "-i", str(INVENTORY.parent), str(playbook)], check=False, cwd=REPO)
        if proc.returncode != 0:
            raise LabError(f"{name} failed:\n{proc.stdout[-3000:]}")


def wait_for_boot(node: Node, timeout: float = 120) -> str:
    """Wait until systemd finished booting and sshd listens; returns the node's ed25519 host key."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = docker("exec", node.container, "systemctl", "is-system-running", check=False)
        if state in ("running", "degraded"):
            break
        time.sleep(0.5)
    else:
        raise LabError(f"{node.name}: systemd did not finish booting in {timeout:.0f} s (state: {state!r})")
    if state == "degraded":
        failed = docker("exec", node.container, "systemctl", "--failed", "--no-legend", check=False)
        raise LabError(f"{node.name}: systemd is degraded; failed units:\n{failed}")
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(1)
            if sock.connect_ex((node.address, 22)) == 0:
                return docker("exec", node.container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
        time.sleep(0.3)
    raise LabError(f"{node.name}: sshd does not listen on {node.address}:22")


def write_inventory(nodes: list[Node], key: Path, known_hosts: Path) -> None:
    groups: dict[str, dict[str, dict[str, str]]] = {}
    for node in nodes:
        groups.setdefault(node.group, {})[node.name] = {"ansible_host": node.address}
    content = {
        "all": {
            "vars": {
                "ansible_user": "fleet",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes",
            },
            "children": {group: {"hosts": hosts} for group, hosts in groups.items()},
        }
    }
    header = "# Written by tests/lab/lab.py up: the running lab. Do not edit; `make lab-down` removes it.\n"
    INVENTORY.write_text(header + json.dumps(content, indent=2) + "\n")


def remove_lab_containers() -> None:
    ids = docker("ps", "-aq", "--filter", f"label={LABEL}=1").split()
    if ids:
        docker("rm", "-f", "-v", *ids)
    vols = docker("volume", "ls", "-q", "--filter", f"label={LABEL}=1").split()
    if vols:
        docker("volume", "rm", "-f", *vols)


def services() -> dict[str, str]:
    """The lab's network and gateway services; what molecule scenarios need without the nodes."""
    ensure_dockerd()
    base = ensure_image()
    gateway = ensure_network()
    registry = start_registry(gateway)
    smoke_digest = oci.push(registry, SMOKE_REPO, "latest", oci.assemble(smoke_image()))
    sglang_digest = oci.push(registry, SGLANG_REPO, SGLANG_TAG, oci.assemble(sglang_standin_image(base)))
    private = start_private_registry(gateway)
    login = (PRIVATE_USER, (STATE_DIR / "registry_password").read_text().strip())
    private_blobs = oci.assemble(private_image())
    private_digest = oci.push(f"{gateway}:{PRIVATE_REGISTRY_PORT}", PRIVATE_REPO, "lab", private_blobs, login)
    www = start_www(gateway)
    fetch_wheels()
    hub = start_hub(gateway)
    endpoints = {
        "registry": registry,
        "www": www,
        "hub": hub,
        "smoke_image": f"{SMOKE_REPO}@{smoke_digest}",
        "sglang_image": f"{SGLANG_REPO}:{SGLANG_TAG}@{sglang_digest}",
        "private_image": f"{private}/{PRIVATE_REPO}:lab@{private_digest}",
    }
    (STATE_DIR / "services.json").write_text(json.dumps(endpoints, indent=2) + "\n")
    write_services_vars(endpoints)
    return endpoints


def write_services_vars(endpoints: dict[str, str]) -> None:
    """Group vars for the lab: the images it pushed (by digest) and its API key (kept across runs)."""
    key_file, admin_file = STATE_DIR / "api_key", STATE_DIR / "admin_api_key"
    for path in (key_file, admin_file):
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(secrets.token_hex(24))
    SERVICES_VARS.touch(mode=0o600)
    SERVICES_VARS.write_text(
        "---\n# Written by tests/lab/lab.py: images the lab pushed to its registry mirror, and its API key.\n"
        f'glm_lab_smoke_image: "{endpoints["smoke_image"]}"\n'
        f'glm_lab_sglang_image: "{endpoints["sglang_image"]}"\n'
        f'glm_lab_api_key: "{key_file.read_text().strip()}"\n'
        f'glm_lab_admin_api_key: "{admin_file.read_text().strip()}"\n'
        f'glm_lab_hf_token: "{(STATE_DIR / "hf_token").read_text().strip()}"\n'
        f'glm_lab_private_image: "{endpoints["private_image"]}"\n'
        f'glm_lab_registry_user: "{PRIVATE_USER}"\n'
        f'glm_lab_registry_password: "{(STATE_DIR / "registry_password").read_text().strip()}"\n'
        f'glm_lab_apt_key_fingerprint: "{aptrepo.fingerprint(WWW / "nvidia" / "gpgkey")}"\n'
    )


def up(gpu_nodes: int) -> dict[str, object]:
    if not 1 <= gpu_nodes <= MAX_GPU_NODES:
        raise LabError(f"gpu_nodes must be between 1 and {MAX_GPU_NODES}; got: {gpu_nodes}")
    started = time.monotonic()
    ensure_dockerd()
    image = ensure_image()
    remove_lab_containers()  # a rerun starts from fresh nodes
    endpoints = services()
    key = ssh_key()
    pubkey = Path(f"{key}.pub").read_text().strip()
    nodes = plan(gpu_nodes)
    for node in nodes:
        start_node(node, image, pubkey)
    known = [f"{node.address} {wait_for_boot(node)}" for node in nodes]
    known_hosts = STATE_DIR / "known_hosts"
    known_hosts.write_text("\n".join(" ".join(line.split()[:3]) for line in known) + "\n")
    write_inventory(nodes, key, known_hosts)
    prepare_nodes()
    state = {
        "image": image,
        "network": NETWORK,
        **endpoints,
        "nodes": [asdict(n) for n in nodes],
        "inventory": str(INVENTORY),
        "seconds": round(time.monotonic() - started, 1),
    }
    (STATE_DIR / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    log(f"up: {len(nodes)} nodes in {state['seconds']} s; inventory {INVENTORY.relative_to(REPO)}")
    return state


def down() -> None:
    if docker_alive():
        remove_lab_containers()
        if succeeds("docker", "network", "inspect", NETWORK):
            docker("network", "rm", NETWORK)
    paths = registry_paths()
    stop_pid(paths["pid"])
    stop_pid(STATE_DIR / "www.pid")
    stop_pid(STATE_DIR / "hub.pid")
    stop_pid(STATE_DIR / "private-registry" / "registry.pid")
    stop_pid(STATE_DIR / "private-registry" / "slowlink.pid")
    shutil.rmtree(STATE_DIR / "private-registry", ignore_errors=True)
    shutil.rmtree(paths["base"], ignore_errors=True)
    shutil.rmtree(WWW, ignore_errors=True)
    INVENTORY.unlink(missing_ok=True)
    SERVICES_VARS.unlink(missing_ok=True)
    for name in ("state.json", "services.json", "known_hosts", "www.log", "nvidia-smi"):
        (STATE_DIR / name).unlink(missing_ok=True)
    log("down: lab containers, volumes, network, registry and http server removed")


def status() -> dict[str, object]:
    path = STATE_DIR / "state.json"
    if not path.exists():
        return {"up": False}
    state = json.loads(path.read_text())
    running = set(docker("ps", "--filter", f"label={LABEL}=1", "--format", "{{.Names}}").split())
    state["up"] = all(n["container"] in running for n in state["nodes"])
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--gpu-nodes", type=int, default=int(os.environ.get("GLM_LAB_GPU_NODES", "2")))
    sub.add_parser("down")
    sub.add_parser("services", help="start the network, registry and http server without nodes")
    sub.add_parser("status")
    sub.add_parser("image", help="build the node image unless cached; tag it :latest")
    sub.add_parser("engine", help="start a docker engine unless one is running")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.gpu_nodes)
        elif args.command == "down":
            down()
        elif args.command == "services":
            print(json.dumps(services(), indent=2))
        elif args.command == "engine":
            ensure_dockerd()
        elif args.command == "image":
            ensure_dockerd()
            print(ensure_image())
        else:
            print(json.dumps(status(), indent=2))
    except LabError as err:
        print(f"lab: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if not re.fullmatch(r"[a-z0-9-]+", PREFIX):
        sys.exit(f"lab: error: GLM_LAB_PREFIX must be lowercase letters, digits and dashes; got: {PREFIX}")
    sys.exit(main())
