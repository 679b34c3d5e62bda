"""Stand-in for the Hugging Face Hub, for the lab only (the Hub is not reachable here).

    python tests/lab/hub_standin.py --bind 172.30.253.1 --port 8090 --token-file .lab/hf_token

It serves one gated model repository, `zai-org/GLM-5.3-Flash` at the pinned 40-hex revision, over the
part of the Hub's HTTP API that huggingface_hub uses to download a snapshot:

- GET  /api/models/{repo}/tree/{revision}?recursive=true   the file list (size, git oid, LFS sha256)
- GET  /api/models/{repo}/revision/{revision}              model info with siblings
- HEAD/GET /{repo}/resolve/{revision}/{path}                the file, with X-Repo-Commit, ETag,
  X-Linked-Etag and X-Linked-Size for LFS files, and Range requests answered with 206

and fails the way the Hub fails: 401 with X-Error-Code GatedRepo without a token, 401 "Invalid
credentials in Authorization header" with a wrong one, 404 RevisionNotFound / EntryNotFound /
RepositoryNotFound. The files are made on start from a fixed seed (config.json, tokenizer files,
valid safetensors shards of a few MB each), so every run serves the same bytes. `tokenizer.json`
is a real byte-level BPE tokenizer given with --tokenizer-json (tests/lab/standin_deps.py says
which), so that the SGLang stand-in counts tokens with the snapshot's tokenizer as SGLang does.

For the tests and the benchmark it also counts the bytes of file content it serves (GET /_lab/stats,
POST /_lab/reset), lists the sha256 of its files (GET /_lab/files) and injects faults (POST
/_lab/fault with JSON {"kind": "drop"|"flip"|"stall", "path": FILE, "count": N, "stall_seconds": S}):
drop closes the connection half way through the file, flip changes one byte of the content it
sends, stall sends half the file and then nothing for stall_seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO_ID = "zai-org/GLM-5.3-Flash"
REVISION = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
LFS_EXTENSIONS = (".safetensors",)
CHUNK = 256 * 1024

CONFIG = {
    "architectures": ["Glm5NextForConditionalGeneration"],
    "model_type": "glm5_next",
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"},
    "max_position_embeddings": 1048576,
    "n_routed_experts": 288,
    "num_experts_per_tok": 8,
}


@dataclass
class RepoFile:
    path: str
    content: bytes
    git_oid: str = ""
    sha256: str = ""

    def __post_init__(self) -> None:
        self.git_oid = hashlib.sha1(b"blob %d\0" % len(self.content) + self.content).hexdigest()  # noqa: S324 - git's object id
        self.sha256 = hashlib.sha256(self.content).hexdigest()

    @property
    def is_lfs(self) -> bool:
        return self.path.endswith(LFS_EXTENSIONS)

    @property
    def etag(self) -> str:
        return self.sha256 if self.is_lfs else self.git_oid


def safetensors(name: str, size: int, rng: random.Random) -> bytes:
    """A valid safetensors file holding one FP8 (F8_E4M3) tensor of about `size` bytes."""
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, name: {"dtype": "F8_E4M3", "shape": [size], "data_offsets": [0, size]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    piece = 16 * 1024 * 1024  # randbytes takes at most 2**31 bits at a time
    data = b"".join(rng.randbytes(min(piece, size - offset)) for offset in range(0, size, piece))
    return struct.pack("<Q", len(header)) + header + data


def make_repo(shards: int, shard_bytes: int, tokenizer: bytes) -> dict[str, RepoFile]:
    rng = random.Random(REVISION)  # noqa: S311 - fixed test content, not a secret
    files = [
        RepoFile("config.json", (json.dumps(CONFIG, indent=2) + "\n").encode()),
        RepoFile("generation_config.json", b'{"eos_token_id": [151329, 151336, 151338], "temperature": 1.0}\n'),
        RepoFile("tokenizer_config.json", b'{"model_max_length": 1048576, "tokenizer_class": "PreTrainedTokenizer"}\n'),
        RepoFile("tokenizer.json", tokenizer),
    ]
    weight_map = {}
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        tensor = f"model.layers.{i - 1}.mlp.experts.weight"
        files.append(RepoFile(name, safetensors(tensor, shard_bytes, rng)))
        weight_map[tensor] = name
    index = {"metadata": {"total_size": shards * shard_bytes}, "weight_map": weight_map}
    files.append(RepoFile("model.safetensors.index.json", (json.dumps(index, indent=2) + "\n").encode()))
    return {f.path: f for f in files}


@dataclass
class Fault:
    kind: str
    path: str
    count: int = 1
    stall_seconds: float = 30.0


@dataclass
class HubState:
    files: dict[str, RepoFile]
    token: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    bytes_served: int = 0
    per_file: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    faults: list[Fault] = field(default_factory=list)
    faults_fired: list[str] = field(default_factory=list)

    def count(self, path: str, n: int) -> None:
        with self.lock:
            self.bytes_served += n
            self.per_file[path] = self.per_file.get(path, 0) + n

    def take_fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.path == path and fault.count > 0:
                    fault.count -= 1
                    self.faults_fired.append(f"{fault.kind}:{path}")
                    return fault
        return None

    def stats(self) -> dict[str, object]:
        with self.lock:
            return {
                "bytes_served": self.bytes_served,
                "per_file": dict(self.per_file),
                "requests": self.requests,
                "repo_bytes": sum(len(f.content) for f in self.files.values()),
                "faults_fired": list(self.faults_fired),
            }


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "glm-lab-hub/1"
    state: HubState

    def log_message(self, format: str, *args: object) -> None:
        print(f"{self.address_string()} {format % args}", flush=True)

    # --- helpers ---------------------------------------------------------------------------------

    def send_json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def hub_error(self, status: int, code: str, message: str) -> None:
        self.send_json(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def authorized(self) -> bool:
        auth = self.headers.get("Authorization", "")
        if not auth:
            self.hub_error(
                401,
                "GatedRepo",
                f"Access to model {REPO_ID} is restricted. You must have access to it and be authenticated "
                "to access it. Please log in.",
            )
            return False
        if auth != f"Bearer {self.state.token}":
            self.send_json(
                401,
                {"error": "Invalid credentials in Authorization header"},
                {"X-Error-Message": "Invalid credentials in Authorization header"},
            )
            return False
        return True

    def check_repo_revision(self, repo: str, revision: str) -> bool:
        if repo != REPO_ID:
            self.hub_error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
            return False
        if unquote(revision) not in (REVISION, "main"):
            self.hub_error(404, "RevisionNotFound", f"Invalid rev id: {unquote(revision)}")
            return False
        return True

    # --- routes ----------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self.route()

    def do_HEAD(self) -> None:
        self.route()

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if url.path == "/_lab/reset":
            with self.state.lock:
                self.state.bytes_served, self.state.per_file, self.state.requests = 0, {}, 0
                self.state.faults, self.state.faults_fired = [], []
            self.send_json(200, {"reset": True})
        elif url.path == "/_lab/fault":
            if body.get("kind") not in ("drop", "flip", "stall") or body.get("path") not in self.state.files:
                self.send_json(400, {"error": f"bad fault: {body}"})
                return
            with self.state.lock:
                self.state.faults.append(Fault(**body))
            self.send_json(200, {"armed": body})
        else:
            self.send_json(404, {"error": "not found"})

    def route(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path == "/_lab/stats":
            self.send_json(200, self.state.stats())
            return
        if path == "/_lab/files":
            files = [{"path": f.path, "size": len(f.content), "sha256": f.sha256} for f in self.state.files.values()]
            self.send_json(200, {"files": files})
            return
        with self.state.lock:
            self.state.requests += 1
        tree = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path)
        info = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/([^/]+)", path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if tree or info:
            match = tree or info
            assert match is not None
            if not self.authorized() or not self.check_repo_revision(match.group(1), match.group(2)):
                return
            self.send_json(200, self.tree() if tree else self.model_info())
        elif resolve:
            if not self.authorized() or not self.check_repo_revision(resolve.group(1), resolve.group(2)):
                return
            self.send_file(unquote(resolve.group(3)))
        else:
            self.send_json(404, {"error": "Sorry, we can't find the page you are looking for."})

    def tree(self) -> list[dict[str, object]]:
        entries = []
        for f in self.state.files.values():
            entry: dict[str, object] = {"type": "file", "path": f.path, "size": len(f.content), "oid": f.git_oid}
            if f.is_lfs:
                entry["lfs"] = {"oid": f.sha256, "size": len(f.content), "pointerSize": 134}
            entries.append(entry)
        return entries

    def model_info(self) -> dict[str, object]:
        siblings = []
        for f in self.state.files.values():
            sibling: dict[str, object] = {"rfilename": f.path, "size": len(f.content), "blobId": f.git_oid}
            if f.is_lfs:
                sibling["lfs"] = {"sha256": f.sha256, "size": len(f.content), "pointerSize": 134}
            siblings.append(sibling)
        return {
            "id": REPO_ID,
            "modelId": REPO_ID,
            "sha": REVISION,
            "gated": "manual",
            "private": False,
            "siblings": siblings,
        }

    def send_file(self, name: str) -> None:
        repo_file = self.state.files.get(name)
        if repo_file is None:
            self.hub_error(404, "EntryNotFound", f"{name} does not exist on revision {REVISION}")
            return
        content = repo_file.content
        start = 0
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if ranged:
            start = int(ranged.group(1))
            end = int(ranged.group(2)) + 1 if ranged.group(2) else len(content)
            if start >= len(content):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(content)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = content[start:end]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{start + len(body) - 1}/{len(content)}")
        else:
            body = content
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("X-Repo-Commit", REVISION)
        self.send_header("ETag", f'"{repo_file.etag}"')
        if repo_file.is_lfs:
            self.send_header("X-Linked-Etag", f'"{repo_file.sha256}"')
            self.send_header("X-Linked-Size", str(len(content)))
        self.end_headers()
        if self.command == "HEAD":
            return
        fault = self.state.take_fault(name)
        if fault is not None and fault.kind == "flip":
            flipped = bytearray(body)
            flipped[len(flipped) // 2] ^= 0xFF
            body = bytes(flipped)
        half = len(body) // 2
        for offset in range(0, len(body), CHUNK):
            chunk = body[offset : offset + CHUNK]
            if fault is not None and fault.kind in ("drop", "stall") and offset + len(chunk) > half:
                chunk = chunk[: max(0, half - offset)]
                self.state.count(name, len(chunk))
                self.wfile.write(chunk)
                self.wfile.flush()
                if fault.kind == "stall":
                    time.sleep(fault.stall_seconds)
                self.close_connection = True
                return
            # Counted before it is written: a client that has read the last byte finds it counted.
            self.state.count(name, len(chunk))
            self.wfile.write(chunk)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--token-file", type=Path, required=True, help="file holding the token that grants access")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard-mib", type=float, default=4.0)
    parser.add_argument("--tokenizer-json", type=Path, required=True, help="the repository's tokenizer.json")
    args = parser.parse_args(argv)
    files = make_repo(args.shards, int(args.shard_mib * 1024 * 1024), args.tokenizer_json.read_bytes())
    HubHandler.state = HubState(files=files, token=args.token_file.read_text().strip())
    server = ThreadingHTTPServer((args.bind, args.port), HubHandler)
    server.daemon_threads = True
    print(f"hub stand-in: {REPO_ID}@{REVISION}, {len(files)} files on {args.bind}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
