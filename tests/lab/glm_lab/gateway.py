"""The services on the lab network's gateway: the registries, the static http server, the Hub stand-in."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aptrepo
import oci
import standin_deps
from huggingface_hub import snapshot_download  # the controller venv's download client

from glm_lab import upstream_tls
from glm_lab.config import (
    ALERT_RECEIVER_PORT,
    CLIENT_REQUIREMENTS,
    DCGM_REPO,
    DCGM_TAG,
    DYNAMIC_RANGE,
    GATEWAY,
    GRAFANA_PORT,
    HERE,
    HTTP_PORT,
    HTTPS_PORT,
    HUB_PORT,
    LABEL,
    MAILDIR,
    NETWORK,
    PRIVATE_REGISTRY_PORT,
    PRIVATE_REPO,
    PRIVATE_USER,
    REGISTRY_LINE,
    REGISTRY_PORT,
    REVISION,
    ROUTER_REQUIREMENTS,
    SERVED_MODEL,
    SERVICES_VARS,
    SGLANG_REPO,
    SGLANG_TAG,
    SLOW_LINK_PORT,
    SLOW_LINK_RATE,
    SMOKE_REPO,
    SMTP_PORT,
    STANDIN_CACHE,
    STATE_DIR,
    SUBNET,
    WORKER_PORT,
    WWW,
    LabError,
)
from glm_lab.image import dcgm_standin_image, ensure_image, private_image, sglang_standin_image, smoke_image
from glm_lab.shell import docker, ensure_dockerd, run, start_daemon, succeeds, wait_http, wait_port, write_whole


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


@contextlib.contextmanager
def slow_link_paused() -> Iterator[None]:
    """The slow link stops relaying (its process is stopped; connections stay open) for the body of
    the with-statement, so a pull through it stands still while a test looks at the node."""
    pid = int((STATE_DIR / "private-registry" / "slowlink.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def start_www(gateway: str) -> str:
    """The static HTTP server for upstream stand-ins; builds the signed NVIDIA apt repository."""
    aptrepo.build(WWW / "nvidia", STATE_DIR / "gnupg")
    pidfile, logfile = STATE_DIR / "www.pid", STATE_DIR / "www.log"
    argv = [sys.executable, "-m", "http.server", str(HTTP_PORT), "--bind", gateway, "--directory", str(WWW)]
    proc = start_daemon("http server", argv, pidfile, logfile, (gateway, HTTP_PORT))
    url = f"http://{gateway}:{HTTP_PORT}"
    wait_http(f"{url}/nvidia/gpgkey", "the lab http server", logfile, proc)
    # The same files over TLS only, with a certificate of the lab's upstream CA: the toolkit's repository.
    _ca, cert, key = upstream_tls.server_files(gateway)
    argv = [sys.executable, str(HERE / "https_static.py"), "--bind", gateway, "--port", str(HTTPS_PORT),
            "--directory", str(WWW), "--cert", str(cert), "--key", str(key)]  # fmt: skip
    start_daemon("https server", argv, STATE_DIR / "www-tls.pid", STATE_DIR / "www-tls.log", (gateway, HTTPS_PORT))
    return url


def lab_token(name: str, prefix: str) -> Path:
    """A per-lab token in STATE_DIR (0600), generated once and kept across runs."""
    token_file = STATE_DIR / name
    if not token_file.exists():
        token_file.touch(mode=0o600)
        token_file.write_text(prefix + secrets.token_hex(16))
    return token_file


def start_hub(gateway: str) -> str:
    """The Hugging Face Hub stand-in (tests/lab/hub_standin.py) with a per-lab token."""
    token_file = lab_token("hf_token", "hf_lab_")
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


def start_tokened(gateway: str, what: str, script: str, port: int, *, token: tuple[str, str], ready: str) -> str:
    """A lab service of ours (tests/lab/`script`) on the gateway, with a per-lab token."""
    token_file = lab_token(*token)
    stem = script.split("_", maxsplit=1)[0]
    pidfile, logfile = STATE_DIR / f"{stem}.pid", STATE_DIR / f"{stem}.log"
    argv = [sys.executable, str(HERE / script), "--bind", gateway, "--port", str(port), "--token-file", str(token_file)]
    proc = start_daemon(what, argv, pidfile, logfile, (gateway, port))
    url = f"http://{gateway}:{port}"
    wait_http(f"{url}{ready}", f"the {what}", logfile, proc)
    return url


def start_grafana(gateway: str) -> str:
    """The Grafana stand-in (tests/lab/grafana_standin.py) with a per-lab service account token."""
    return start_tokened(
        gateway,
        "Grafana stand-in",
        "grafana_standin.py",
        GRAFANA_PORT,
        token=("grafana_token", "glsa_lab_"),
        ready="/_lab/dashboards",
    )


def start_alert_receiver(gateway: str) -> str:
    """The alert receiver (tests/lab/alert_receiver.py): a webhook whose URL holds a per-lab token."""
    return start_tokened(
        gateway,
        "alert receiver",
        "alert_receiver.py",
        ALERT_RECEIVER_PORT,
        token=("alert_hook_token", "hook_"),
        ready="/_lab/notifications",
    )


def start_mail_relay(gateway: str) -> str:
    """A site's mail relay (aiosmtpd, without TLS) that keeps every e-mail in the maildir MAILDIR."""
    argv = [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"{gateway}:{SMTP_PORT}",
            "-c", "aiosmtpd.handlers.Mailbox", str(MAILDIR)]  # fmt: skip
    logfile = STATE_DIR / "mail.log"
    proc = start_daemon("mail relay", argv, STATE_DIR / "mail.pid", logfile, (gateway, SMTP_PORT))
    wait_port((gateway, SMTP_PORT), "the mail relay", logfile, proc)
    return f"{gateway}:{SMTP_PORT}"


def start_worker(gateway: str, hub: str) -> str:
    """An SGLang stand-in on the gateway (one fake GPU, the lab's API key, metrics on), for the
    scenarios that route to or scrape a server without a GPU node of their own. Its Hugging Face
    cache is downloaded from the Hub stand-in with huggingface_hub, as a node's would be."""
    home = STATE_DIR / "worker-hf"
    snapshot_download(
        SERVED_MODEL, revision=REVISION, cache_dir=home / "hub", endpoint=hub,
        token=(STATE_DIR / "hf_token").read_text().strip(),
    )  # fmt: skip
    config = STATE_DIR / "worker.yaml"
    config.touch(mode=0o600)
    config.write_text(f"api_key: {(STATE_DIR / 'api_key').read_text().strip()}\n")
    argv = [
        standin_deps.standin_python(), "-m", "sglang.launch_server", "--config", str(config),
        "--model-path", SERVED_MODEL, "--revision", REVISION, "--host", gateway, "--port", str(WORKER_PORT),
        "--context-length", "100000", "--max-running-requests", "64", "--enable-metrics",
        "--reasoning-parser", "glm45", "--tool-call-parser", "glm47",
    ]  # fmt: skip
    python_path = standin_deps.standin_path(
        STANDIN_CACHE, HERE / "sglang_standin" / "sglang", STATE_DIR / "worker-standin"
    )
    env = {
        **os.environ, "PYTHONPATH": python_path, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1",
        "NVIDIA_VISIBLE_DEVICES": "0", "GLM_STANDIN_LOAD_SECONDS": "0",
    }  # fmt: skip
    pidfile, logfile = STATE_DIR / "worker.pid", STATE_DIR / "worker.log"
    proc = start_daemon("SGLang stand-in", argv, pidfile, logfile, (gateway, WORKER_PORT), env=env)
    url = f"http://{gateway}:{WORKER_PORT}"
    wait_http(f"{url}/health", "the SGLang stand-in on the gateway", logfile, proc)
    return url


def run_standin(port: int, script: Path | None, extra: list[str]) -> int:
    """The SGLang stand-in alone, in the foreground, on 127.0.0.1:`port` with the recipe's parsers,
    answering with the raw model texts of `script` (a JSON list, taken in turn, the last repeating)
    when given: what a test or a person debugging Claude Code's turns starts by hand. Its Hugging
    Face cache holds the lab's tokenizer and nothing else; no API key unless `extra` names one."""
    home = STATE_DIR / "standin-alone"
    snapshot = home / "hub" / f"models--{SERVED_MODEL.replace('/', '--')}" / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "config.json").write_text(json.dumps({"max_position_embeddings": 1048576}))
    shutil.copyfile(standin_deps.tokenizer_json(STANDIN_CACHE), snapshot / "tokenizer.json")
    env = {
        **os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "NVIDIA_VISIBLE_DEVICES": "0",
        "GLM_STANDIN_LOAD_SECONDS": "0",
        "PYTHONPATH": standin_deps.standin_path(STANDIN_CACHE, HERE / "sglang_standin" / "sglang", home / "standin"),
    }  # fmt: skip
    if script is not None:
        json.loads(script.read_text())  # a broken script fails here, not at the first request
        env["GLM_STANDIN_SCRIPT"] = str(script.resolve())
    argv = [
        standin_deps.standin_python(), "-s", "-m", "sglang.launch_server", "--model-path", SERVED_MODEL,
        "--revision", REVISION, "--host", "127.0.0.1", "--port", str(port),
        "--reasoning-parser", "glm45", "--tool-call-parser", "glm47", *extra,
    ]  # fmt: skip
    return subprocess.call(argv, env=env)


def hub_call(path: str, body: dict | None = None) -> dict:
    """The Hub stand-in's lab endpoints: GET /_lab/stats, POST /_lab/reset and /_lab/fault."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://{GATEWAY}:{HUB_PORT}{path}", data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - the lab's fixed http:// URL
        return json.load(resp)


def hub_tree() -> list[dict]:
    """The Hub stand-in's files with path, size and sha256 (its /_lab/files, which counts no bytes)."""
    return hub_call("/_lab/files")["files"]


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


def registry_blob_transfers(since: int = 0) -> list[tuple[str, str, int]]:
    """Each blob transfer the lab registry (Docker Hub's stand-in) logged since a log offset, as
    (client, digest, bytes written): a stream its client cut short logs the bytes sent until then."""
    with registry_paths()["log"].open("rb") as f:
        f.seek(since)
        lines = f.read().decode(errors="replace").splitlines()
    return [(match.group(1), match.group(2), int(match.group(3))) for match in map(REGISTRY_LINE.match, lines) if match]


def fetch_wheels() -> None:
    """Wheels of the download client and of the gateway's router, served to the nodes as a
    find-links index (PyPI through this machine's pip configuration; the nodes themselves reach no
    package index but Debian's): the roles' hash-pinned requirements, for the nodes' Python (Debian
    12's 3.11, as here)."""
    wheels = WWW / "wheels"
    marker = wheels / ".requirements"
    locks = (CLIENT_REQUIREMENTS, ROUTER_REQUIREMENTS)
    wanted = "".join(lock.read_text() for lock in locks)
    if marker.exists() and marker.read_text() == wanted:
        return
    wheels.mkdir(parents=True, exist_ok=True)
    for lock in locks:
        run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:", "--require-hashes",
             "--python-version", "3.11", "--platform", "manylinux2014_x86_64", "--implementation", "cp",
             "-d", str(wheels), "-r", str(lock)])  # fmt: skip
    marker.write_text(wanted)


def services() -> dict[str, str]:
    """The lab's network and gateway services; what molecule scenarios need without the nodes."""
    ensure_dockerd()
    base = ensure_image()
    gateway = ensure_network()
    registry = start_registry(gateway)
    smoke_digest = oci.push(registry, SMOKE_REPO, "latest", oci.assemble(smoke_image()))
    sglang_digest = oci.push(registry, SGLANG_REPO, SGLANG_TAG, oci.assemble(sglang_standin_image(base)))
    next_digest = oci.push(
        registry, SGLANG_REPO, f"{SGLANG_TAG}-next", oci.assemble(sglang_standin_image(base, "next"))
    )
    dcgm_digest = oci.push(registry, DCGM_REPO, DCGM_TAG, oci.assemble(dcgm_standin_image(base)))
    private = start_private_registry(gateway)
    login = (PRIVATE_USER, (STATE_DIR / "registry_password").read_text().strip())
    private_blobs = oci.assemble(private_image())
    private_digest = oci.push(f"{gateway}:{PRIVATE_REGISTRY_PORT}", PRIVATE_REPO, "lab", private_blobs, login)
    www = start_www(gateway)
    fetch_wheels()
    hub = start_hub(gateway)
    grafana = start_grafana(gateway)
    alerts = start_alert_receiver(gateway)
    mail = start_mail_relay(gateway)
    write_services_vars_keys()
    worker = start_worker(gateway, hub)
    endpoints = {
        "worker": worker,
        "registry": registry,
        "www": www,
        "hub": hub,
        "grafana": grafana,
        "alerts": alerts,
        "mail": mail,
        "smoke_image": f"{SMOKE_REPO}@{smoke_digest}",
        "sglang_image": f"{SGLANG_REPO}:{SGLANG_TAG}@{sglang_digest}",
        "sglang_image_next": f"{SGLANG_REPO}:{SGLANG_TAG}-next@{next_digest}",
        "dcgm_image": f"{DCGM_REPO}:{DCGM_TAG}@{dcgm_digest}",
        "private_image": f"{private}/{PRIVATE_REPO}:lab@{private_digest}",
    }
    (STATE_DIR / "services.json").write_text(json.dumps(endpoints, indent=2) + "\n")
    write_services_vars(endpoints)
    return endpoints


def write_services_vars_keys() -> None:
    """The lab's API keys (kept across runs)."""
    for path in (STATE_DIR / "api_key", STATE_DIR / "admin_api_key"):
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(secrets.token_hex(24))


def write_services_vars(endpoints: dict[str, str]) -> None:
    """Group vars for the lab: the images it pushed (by digest) and its API key."""
    key_file, admin_file = STATE_DIR / "api_key", STATE_DIR / "admin_api_key"
    write_whole(
        SERVICES_VARS,
        "---\n# Written by tests/lab/lab.py: images the lab pushed to its registry mirror, and its API key.\n"
        f'glm_lab_smoke_image: "{endpoints["smoke_image"]}"\n'
        f'glm_lab_sglang_image: "{endpoints["sglang_image"]}"\n'
        f'glm_lab_sglang_image_next: "{endpoints["sglang_image_next"]}"\n'
        f'glm_lab_dcgm_image: "{endpoints["dcgm_image"]}"\n'
        f'glm_lab_api_key: "{key_file.read_text().strip()}"\n'
        f'glm_lab_admin_api_key: "{admin_file.read_text().strip()}"\n'
        f'glm_lab_hf_token: "{(STATE_DIR / "hf_token").read_text().strip()}"\n'
        f'glm_lab_worker: "{endpoints["worker"]}"\n'
        f'glm_lab_grafana: "{endpoints["grafana"]}"\n'
        f'glm_lab_grafana_token: "{(STATE_DIR / "grafana_token").read_text().strip()}"\n'
        f'glm_lab_ca_passphrase: "{lab_token("ca_passphrase", "ca_").read_text().strip()}"\n'
        f'glm_lab_alert_webhook: "{endpoints["alerts"]}/hooks/{(STATE_DIR / "alert_hook_token").read_text().strip()}"\n'
        f'glm_lab_smtp: "{endpoints["mail"]}"\n'
        f'glm_lab_private_image: "{endpoints["private_image"]}"\n'
        f'glm_lab_registry_user: "{PRIVATE_USER}"\n'
        f'glm_lab_registry_password: "{(STATE_DIR / "registry_password").read_text().strip()}"\n'
        f'glm_lab_apt_key_fingerprint: "{aptrepo.fingerprint(WWW / "nvidia" / "gpgkey")}"\n'
        f"glm_lab_upstream_ca: {json.dumps((upstream_tls.DIR / 'ca.pem').read_text())}\n",
        mode=0o600,
    )
