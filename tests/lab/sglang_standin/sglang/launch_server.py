"""Lab stand-in for `python3 -m sglang.launch_server` (no GPU can hold GLM-5.3-Flash here).

It speaks SGLang's HTTP surface with SGLang's response shapes and enforces SGLang's limits (rules
and their sources in `_protocol.py`), so that the roles, the health module and Claude Code are
exercised against what they meet in production:

- arguments: the deployment recipe's flags and a few more, parsed with argparse, which rejects an
  unknown flag (exit 2) as SGLang's does; `--config FILE` merges a YAML file of the same options
  (how the API key reaches the server without appearing on its command line);
- start-up: the weights must be in the Hugging Face cache at the pinned revision (it reads
  HF_HOME, default /root/.cache/huggingface); with HF_HUB_OFFLINE=1 and no snapshot it fails as
  SGLang does. The snapshot's `tokenizer.json` is loaded (start fails without it), and a
  `--context-length` above the model's `max_position_embeddings` is refused as SGLang refuses it.
  While "loading" (GLM_STANDIN_LOAD_SECONDS, default 3, then GLM_STANDIN_JIT_SECONDS of DeepGEMM JIT
  unless its kernels are in SGLANG_DG_CACHE_DIR already) the port is closed, as SGLang binds it only
  once its schedulers are ready; then /health answers 503 until the warm-up is done; at its first
  chat request (/v1/chat/completions or /v1/messages) a serving server compiles a Triton kernel into
  TRITON_CACHE_DIR, as SGLang's serving processes write their JIT caches while they serve;
- endpoints: /health, /health_generate, /v1/models, /v1/chat/completions and /v1/completions
  (JSON or SSE chunks), /v1/messages (Anthropic JSON or SSE events, text or tool_use blocks),
  /v1/messages/count_tokens, /generate, /get_server_info and /server_info, /get_model_info and
  /model_info, /v1/loads (the scheduler's running and waiting requests, what a drain waits on),
  /metrics (with --enable-metrics);
- limits: every generation request is counted with the snapshot's tokenizer and refused, with
  SGLang's message and envelope, when its input reaches the context length or input plus
  max_tokens exceeds it (unless --allow-auto-truncate); at most --max-running-requests generate at
  once, the others wait in the queue;
- API keys: with --api-key, `Authorization: Bearer <key>` on every path but /health*, /ready* and
  /metrics*, else 401 {"error": "Unauthorized"}; with --admin-api-key, the admin routes (/flush_cache
  here) take only that key;
- generation: a fixed answer, streamed a token a chunk (with --stream-interval N, as SGLang's
  scheduler sends it: the first token at once, then N at a time, and the rest at the end), each
  output token decoded in
  GLM_STANDIN_SECONDS_PER_TOKEN or 1/GLM_STANDIN_TOKENS_PER_SECOND (default 0; a file
  /tmp/glm-standin-seconds-per-token overrides it while it exists), and the server's decode capped
  at GLM_STANDIN_MAX_TOKENS_PER_SECOND over all running requests (each gets an equal share; the file
  /tmp/glm-standin-max-tokens-per-second overrides it), so that it saturates as a GPU server does:
  fleet throughput min(streams x rate, cap). Before its first token a request computes the part of
  its prompt not found in the prefix cache (whole 64-token pages a request on this server computed
  before), one prefill at a time, at GLM_STANDIN_PREFILL_TOKENS_PER_SECOND (default 0: at once; the
  file /tmp/glm-standin-prefill-tokens-per-second overrides it), so that a cached prefix shortens
  the time to first token as it does on a GPU. A chat completion stops at its max_tokens
  (finish_reason "length"); with SGLang's `ignore_eos` it generates exactly max_tokens tokens, the
  answer repeated, as benchmarks ask for fixed output lengths. A
  user message holding `[glm-lab tool NAME {JSON input}]` is answered with that tool call (a
  `tool_use` block, its input streamed as `input_json_delta`), the way a model asks a client to run
  a tool;
- its arguments on stdout at start, `api_key` and `admin_api_key` included, as SGLang logs them;
- one JSON line per request on stdout (path, status, model, input tokens, max_tokens, tool results
  in the request, whether and which bearer token: its sha256, never the token);
- faults, from GLM_STANDIN_FAULT or a file /tmp/glm-standin-fault holding the name:
  `hang_generation` (generation never answers while /health says 200), `crash_after_start`
  (exits 134 GLM_STANDIN_CRASH_AFTER seconds after becoming ready), `never_ready` (/health 503).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from sglang import _chat as chat_path
from sglang import _metrics as metrics
from sglang import _model as raw_model
from sglang import _protocol as protocol
from sglang.version import __version__ as VERSION  # the pinned wheel's: what /server_info reports

FAULT_FILE = Path("/tmp/glm-standin-fault")  # noqa: S108 - a switch inside the container
OUTPUT_LOCK = threading.Lock()
PACE_FILE = Path("/tmp/glm-standin-seconds-per-token")  # noqa: S108 - the same, for the generation speed
CAP_FILE = Path("/tmp/glm-standin-max-tokens-per-second")  # noqa: S108 - and for the server's decode cap
PREFILL_FILE = Path("/tmp/glm-standin-prefill-tokens-per-second")  # noqa: S108 - and for its prefill


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang.launch_server")
    p.add_argument("--config", type=str)
    p.add_argument("--model-path", type=str, required=True)
    p.add_argument("--tokenizer-path", type=str)
    p.add_argument("--revision", type=str)
    p.add_argument("--served-model-name", type=str)
    p.add_argument("--host", type=str, default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key", type=str)
    p.add_argument("--admin-api-key", type=str)
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--ep-size", type=int, default=1)
    p.add_argument("--dp-size", type=int, default=1)
    p.add_argument("--context-length", type=int)
    p.add_argument("--allow-auto-truncate", action="store_true")
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--dsa-prefill-backend", choices=["trtllm", "flashmla", "fa3"])
    p.add_argument("--dsa-decode-backend", choices=["trtllm", "flashmla", "fa3"])
    p.add_argument("--kv-cache-dtype", choices=["auto", "fp8_e4m3", "fp8_e5m2", "bf16"], default="auto")
    p.add_argument("--moe-runner-backend", choices=["auto", "deep_gemm", "triton", "flashinfer_trtllm", "cutlass"])
    p.add_argument("--reasoning-parser", type=str)
    p.add_argument("--tool-call-parser", type=str)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--enable-cache-report", action="store_true")
    p.add_argument("--tokenizer-metrics-custom-labels-header", type=str, default="x-custom-labels")
    p.add_argument("--tokenizer-metrics-allowed-custom-labels", type=str, nargs="+")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--log-level", type=str, default="info")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line first, then --config's YAML for options the command line left unset."""
    p = parser()
    args = p.parse_args(argv)
    if args.config:
        loaded = yaml.safe_load(Path(args.config).read_text()) or {}
        extra: list[str] = []
        for key, value in loaded.items():
            flag = "--" + str(key).replace("_", "-")
            if isinstance(value, bool):
                extra += [flag] if value else []
            else:
                extra += [flag, str(value)]
        from_file = p.parse_args([*extra, "--model-path", args.model_path])
        for key, value in vars(from_file).items():
            if getattr(args, key) in (None, p.get_default(key)):
                setattr(args, key, value)
    args.served_model_name = args.served_model_name or args.model_path
    # validation_hook.py 330-337: custom labels need the header that carries them
    if not args.tokenizer_metrics_custom_labels_header and args.tokenizer_metrics_allowed_custom_labels:
        raise SystemExit(
            "ValueError: Please set --tokenizer-metrics-custom-labels-header when setting "
            "--tokenizer-metrics-allowed-custom-labels."
        )
    return args


class PrefixCache:
    """The radix cache's prefix matching, by pages: a request reuses the KV of the longest run of
    whole pages that an earlier request on this server computed (its prompt and its answer), up to
    all but its last token (one token must be computed for the first output); pages least recently
    used leave first once they exceed the KV pool. The page size is SGLang's for DSA attention,
    64 tokens (arg_groups/model_overrides/deepseek_v2.py 170-173)."""

    def __init__(self, capacity_tokens: int, page_size: int = 64) -> None:
        self.page_size = page_size
        self.capacity = max(capacity_tokens // page_size, 1)
        self.pages: dict[int, None] = {}  # chained page hashes, least recently used first
        self.lock = threading.Lock()

    def _chain(self, tokens: list[str], pages: int) -> list[int]:
        chain, parent = [], 0
        for i in range(pages):
            parent = hash((parent, tuple(tokens[i * self.page_size : (i + 1) * self.page_size])))
            chain.append(parent)
        return chain

    def match(self, tokens: list[str]) -> int:
        found = 0
        with self.lock:
            for page in self._chain(tokens, max(len(tokens) - 1, 0) // self.page_size):
                if page not in self.pages:
                    break
                self.pages[page] = self.pages.pop(page)  # recently used
                found += 1
        return found * self.page_size

    def insert(self, tokens: list[str]) -> None:
        with self.lock:
            for page in self._chain(tokens, len(tokens) // self.page_size):
                self.pages.pop(page, None)
                self.pages[page] = None
            while len(self.pages) > self.capacity:
                del self.pages[next(iter(self.pages))]


def snapshot_dir(model_path: str, revision: str | None) -> Path:
    home = Path(os.environ.get("HF_HOME", "/root/.cache/huggingface"))
    repo = home / "hub" / ("models--" + model_path.replace("/", "--"))
    if revision is None:
        ref = repo / "refs" / "main"
        revision = ref.read_text().strip() if ref.exists() else "main"
    return repo / "snapshots" / revision


def say(line: str) -> None:
    """One whole line on stdout, whichever threads (handlers, the loader) print at once."""
    with OUTPUT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def fault() -> str:
    if FAULT_FILE.exists():
        return FAULT_FILE.read_text().strip()
    return os.environ.get("GLM_STANDIN_FAULT", "")


class State:
    def __init__(self, args: argparse.Namespace, tokenizer: protocol.Tokenizer, context_len: int) -> None:
        self.args = args
        self.tokenizer = tokenizer
        self.context_len = context_len
        self.ready = False
        self.running = 0
        self.queued = 0
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(args.max_running_requests or 1 << 30)
        # Decode speed: a stream's own rate (seconds per token, or tokens per second), and the whole
        # server's cap in tokens per second, shared by the requests running, as a GPU's decode is.
        per_stream = float(os.environ.get("GLM_STANDIN_TOKENS_PER_SECOND", "0"))
        self.seconds_per_token = float(os.environ.get("GLM_STANDIN_SECONDS_PER_TOKEN", "0")) or (
            1 / per_stream if per_stream > 0 else 0.0
        )
        self.max_tokens_per_second = float(os.environ.get("GLM_STANDIN_MAX_TOKENS_PER_SECOND", "0"))
        self.prefill_tokens_per_second = float(os.environ.get("GLM_STANDIN_PREFILL_TOKENS_PER_SECOND", "0"))
        self.prefilling = threading.Lock()  # one prefill at a time: the server's prefill throughput
        kv_tokens = int(os.environ.get("GLM_STANDIN_MAX_TOTAL_TOKENS", str(4 * context_len)))
        self.metrics = metrics.Metrics(
            args.served_model_name, context_len, kv_tokens, args.tokenizer_metrics_allowed_custom_labels
        )
        self.cache = PrefixCache(kv_tokens, int(os.environ.get("GLM_STANDIN_PAGE_SIZE", "64")))
        self.current = threading.local()  # the request this handler thread is generating for

    def count(self, prompt: int, generated: int, cached: int = 0) -> None:
        """The running request's prompt and answer sizes (its prompt now occupies KV cache)."""
        request = getattr(self.current, "request", None)
        if request is not None:
            request.tokens(prompt, generated, cached)

    @contextlib.contextmanager
    def slot(self, streaming: bool = False) -> Iterator[None]:
        """--max-running-requests: a request past the limit waits in the queue for a slot."""
        with self.lock:
            self.queued += 1
        self.slots.acquire()
        with self.lock:
            self.queued -= 1
            self.running += 1
        self.current.request = self.metrics.request(streaming)
        self.current.due = time.monotonic()  # the first token is one decode step after the start
        aborted = True
        try:
            yield
            aborted = False
        finally:
            self.current.request.finish(aborted)
            self.current.request = None
            with self.lock:
                self.running -= 1
            self.slots.release()

    def prompt(self, segments: list[str]) -> int:
        """A rendered prompt's tokens (SGLang's chat path calls this through ServingChat): the
        template gives each of GLM's special tokens ([gMASK], <|user|>, ...) as a segment of its
        own, one token in GLM's vocabulary; the rest is counted with the snapshot's tokenizer."""
        pieces = [
            piece
            for segment in segments
            if segment
            for piece in ([segment] if raw_model.SPECIAL.fullmatch(segment) else self.tokenizer.pieces(segment))
            if piece  # a text of no token is [""]
        ]
        self.current.prompt_pieces = pieces
        self.current.input_tokens = len(pieces)
        return len(pieces)

    def generate(self, request: Any, prompt: int, custom_labels: dict[str, str] | None = None) -> Iterator[Any]:
        """tokenizer_manager.generate_request for one chat request: the context check (SGLang's
        ValueError), then a running slot; yields the tokens it will decode and the finish reason,
        then each token at the decode pace. The raw text is the model's (_model.py), stopped at
        max_tokens ("length"), or with SGLang's ignore_eos exactly max_tokens tokens (its answer
        repeated), as benchmarks ask for fixed output lengths."""
        limit = request.max_completion_tokens or request.max_tokens
        try:
            limit = protocol.validate_context(prompt, limit, self.context_len, self.args.allow_auto_truncate)
        except protocol.ContextError:
            self.current.error = "context_length"
            raise
        if fault() == "hang_generation":
            time.sleep(3600)
            raise ValueError("generation did not answer")
        pieces, finish = self.cut(
            raw_model.reply(request.model_dump(), self.args.tool_call_parser == "glm47"), limit, request.ignore_eos
        )
        prompt_pieces = getattr(self.current, "prompt_pieces", None) or []
        with self.slot(bool(request.stream)):
            cached = self.cache.match(prompt_pieces)
            self.current.request.label(custom_labels)
            self.count(prompt, len(pieces), cached)
            self.prefill(prompt - cached)
            yield pieces, finish, cached
            for piece in pieces:
                self.pace()
                yield piece
            self.cache.insert(prompt_pieces + pieces)  # what the request computed stays for the next

    def cut(self, raw: str, limit: int | None, ignore_eos: bool) -> tuple[list[str], str]:
        thinking, end, answer = raw.partition(raw_model.END_OF_THINKING)
        if not end:
            thinking, answer = "", raw
        head = [*(self.tokenizer.pieces(thinking) if thinking else []), end] if end else []  # </think>: one token
        body = self.tokenizer.pieces(answer)
        if not isinstance(limit, int) or limit <= 0:
            return head + body, "stop"
        if ignore_eos and body:
            return (head + body * (limit // len(body) + 1))[:limit], "length"
        pieces = head + body
        return (pieces[:limit], "length") if limit < len(pieces) else (pieces, "stop")

    def prefill(self, tokens: int) -> None:
        """The prompt's tokens not found in the cache, computed before the first output token at the
        server's prefill rate, one request's prefill after another."""
        rate = self.prefill_tokens_per_second
        if PREFILL_FILE.exists():
            with contextlib.suppress(OSError, ValueError):
                rate = float(PREFILL_FILE.read_text().strip())
        if rate > 0 and tokens > 0:
            with self.prefilling:
                time.sleep(tokens / rate)
        self.current.due = time.monotonic()  # the first token is one decode step after the prefill

    def decode(self, tokens: int) -> None:
        """An answer returned whole: its tokens are decoded at the same pace as a stream's."""
        for _token in range(tokens):
            self.pace()

    def pace(self) -> None:
        """One output token's decode time: the stream's rate, slowed to an equal share of the
        server's cap when the running requests together would exceed it. Paced against a deadline
        per request, so that sleeping's overhead does not add up over a long answer."""
        seconds = self.seconds_per_token
        if PACE_FILE.exists():
            with contextlib.suppress(OSError, ValueError):
                seconds = float(PACE_FILE.read_text().strip())
        cap = self.max_tokens_per_second
        if CAP_FILE.exists():
            with contextlib.suppress(OSError, ValueError):
                cap = float(CAP_FILE.read_text().strip())
        if cap > 0:
            seconds = max(seconds, max(self.running, 1) / cap)
        request = getattr(self.current, "request", None)
        if seconds:
            now = time.monotonic()
            due = max(getattr(self.current, "due", 0.0), now - seconds) + seconds
            self.current.due = due
            if due > now:
                time.sleep(due - now)
        if request is not None:
            request.tick()


def tool_results(messages: Any) -> int:
    return sum(
        1
        for m in messages or []
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )


class Handler(BaseHTTPRequestHandler):
    server_version = "uvicorn"
    sys_version = ""
    state: State

    def log_message(self, format: str, *args: Any) -> None:
        return

    # --- plumbing ---

    def record(self, status: int, model: str | None = None, **extra: Any) -> None:
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        entry = {
            "method": self.command,
            "path": self.path,
            "status": status,
            "model": model,
            "authorization": "bearer" if token else ("other" if auth else "none"),
            "token_sha256": hashlib.sha256(token.encode()).hexdigest() if token else None,
            "x_api_key": bool(self.headers.get("x-api-key")),
            **extra,
        }
        say(json.dumps(entry))

    def send_json(self, status: int, body: Any, model: str | None = None, **extra: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.record(status, model, **extra)

    def send_empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.record(status)

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def sse(self, data: Any, event: str | None = None) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        prefix = f"event: {event}\n" if event else ""
        self.wfile.write(f"{prefix}data: {payload}\n\n".encode())
        self.wfile.flush()

    def authorized(self) -> bool:
        path = self.path.split("?")[0]
        args = self.state.args
        status = protocol.auth_status(
            self.command, path, self.headers.get("Authorization"), args.api_key, args.admin_api_key
        )
        if status == 200:
            return True
        self.send_json(status, {"error": "Unauthorized"})
        return False

    def body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length", "0") or "0")
        raw = self.rfile.read(length) if length else b"{}"
        return json.loads(raw or b"{}")

    def generating(self) -> bool:
        """False (after blocking) when generation hangs: the client gives up, as it would."""
        if fault() == "hang_generation":
            time.sleep(3600)
            return False
        return True

    def validate(self, input_tokens: int, max_new_tokens: int | None) -> int | None:
        return protocol.validate_context(
            input_tokens, max_new_tokens, self.state.context_len, self.state.args.allow_auto_truncate
        )

    # --- routes ---

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if not self.authorized():
            return
        args = self.state.args
        if path == "/health":
            self.send_empty(200 if self.state.ready and fault() != "never_ready" else 503)
        elif path == "/health_generate":
            if not self.state.ready:
                self.send_empty(503)
            elif self.generating():
                self.send_empty(200)
        elif path == "/v1/models":
            model = {
                "id": args.served_model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "sglang",
                "root": args.served_model_name,
                "max_model_len": self.state.context_len,
            }
            self.send_json(200, {"object": "list", "data": [model]})
        elif path == "/flush_cache":
            self.flush_cache()
        elif path in ("/get_model_info", "/model_info"):
            # sglang 0.5.23 entrypoints/http_server.py model_info(): what a router reads at start
            self.send_json(200, {
                "model_path": args.model_path, "served_model_name": args.served_model_name,
                "tokenizer_path": args.model_path, "is_generation": True, "preferred_sampling_params": None,
                "weight_version": "default", "load_format": "auto", "reasoning_parser": args.reasoning_parser,
                "tool_call_parser": args.tool_call_parser, "disaggregation_mode": "null",
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"],
            })  # fmt: skip
        elif path in ("/get_server_info", "/server_info"):
            info = {k: v for k, v in vars(args).items() if k not in ("api_key", "admin_api_key", "config")}
            with self.state.lock:
                load = {"num_running_reqs": self.state.running, "num_queue_reqs": self.state.queued}
            self.send_json(200, {**info, "version": VERSION, "internal_states": [load]})
        elif path == "/v1/loads":
            self.loads()
        elif path == "/metrics" and args.enable_metrics:
            with self.state.lock:
                running, queued = self.state.running, self.state.queued
            text = self.state.metrics.render(running, queued).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            self.record(200)
        else:
            self.send_json(404, {"detail": "Not Found"})

    def loads(self) -> None:
        """sglang 0.5.23 entrypoints/v1_loads.py get_loads(): one snapshot per DP rank (one here);
        an unknown section is a 400 with LoadSnapshot.to_dict's message; a dp_rank out of range
        gives no snapshot."""
        query = urllib.parse.parse_qs(self.path.partition("?")[2])
        include = [s.strip() for s in query["include"][0].split(",")] if "include" in query else None
        unknown = set(include or ()) - metrics.LOAD_SECTIONS
        if unknown:
            detail = f"Invalid include sections: {unknown}. Valid options: {sorted(metrics.LOAD_SECTIONS)}"
            self.send_json(400, {"detail": detail})
            return
        with self.state.lock:
            running, queued = self.state.running, self.state.queued
        snapshot = self.state.metrics.load(running, queued, self.state.args.max_running_requests or 0)
        dp_rank = query.get("dp_rank", [None])[0]
        loads = [snapshot] if dp_rank is None or dp_rank == "0" else []
        self.send_json(200, {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), "version": VERSION,
            "accelerator": "NVIDIA B200", "num_accelerators": self.state.args.tp_size, "loads": loads,
        })  # fmt: skip

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        if not self.authorized():
            return
        if not self.state.ready:
            self.send_json(503, {"error": {"message": "The server is not ready", "type": "ServiceUnavailable"}})
            return
        request = self.body()
        if path == "/flush_cache":
            self.flush_cache()
            return
        routes = {
            "/v1/chat/completions": self.chat,
            "/v1/completions": self.completions,
            "/v1/messages": self.messages,
            "/v1/messages/count_tokens": self.count_tokens,
            "/generate": self.generate,
        }
        if path not in routes:
            self.send_json(404, {"detail": "Not Found"})
            return
        if path in ("/v1/chat/completions", "/v1/messages"):
            lazy_kernel(self.state.args)
        routes[path](request)

    def flush_cache(self) -> None:
        """An admin route (ADMIN_OPTIONAL in SGLang): answers as SGLang's /flush_cache does."""
        text = (
            b"Cache flushed.\nPlease check backend logs for more details. "
            b"(When there are running or waiting requests, the operation will not be performed.)\n"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)
        self.record(200)

    # --- SGLang's chat path (_chat.py): /v1/messages, count_tokens, /v1/chat/completions ---

    def via_chat(self, route: str, request: dict[str, Any]) -> None:
        """Answer with SGLang's own code and log the request as the other routes do."""
        self.state.current.input_tokens = None
        self.state.current.error = None
        status, media_type, chunks = getattr(self.state.chat, route)(request, self)  # the raw request: its headers
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        if media_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        else:
            data = b"".join(chunks)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        extra: dict[str, Any] = {"input_tokens": self.state.current.input_tokens}
        if route == "messages":
            extra |= {"max_tokens": request.get("max_tokens"), "tool_results": tool_results(request.get("messages"))}
            thinking = request.get("thinking")
            extra["thinking"] = thinking.get("type") if isinstance(thinking, dict) else None
            extra["request_bytes"] = int(self.headers.get("Content-Length", "0") or "0")
        if self.state.current.error:
            extra["error"] = self.state.current.error
        self.record(status, request.get("model"), **extra)

    def count_tokens(self, request: dict[str, Any]) -> None:
        self.via_chat("count_tokens", request)

    def messages(self, request: dict[str, Any]) -> None:
        self.via_chat("messages", request)

    def chat(self, request: dict[str, Any]) -> None:
        self.via_chat("chat_completions", request)

    # --- OpenAI completions ---

    def openai_refused(self, model: str | None, prompt: int, max_new: int | None) -> bool:
        """serving_completions: a context error is HTTP 400 before any chunk."""
        try:
            self.validate(prompt, max_new)
        except protocol.ContextError as e:
            self.send_json(400, protocol.openai_error(str(e)), model, input_tokens=prompt, error="context_length")
            return True
        return False

    def completions(self, request: dict[str, Any]) -> None:
        model = self.state.args.served_model_name
        prompt = self.state.tokenizer.count_prompt(request.get("prompt", ""))
        max_new = request.get("max_tokens", 16)  # CompletionRequest.max_tokens defaults to 16
        if self.openai_refused(request.get("model"), prompt, max_new) or not self.generating():
            return
        with self.state.slot():
            completion = self.state.tokenizer.count(raw_model.ANSWER)
            self.state.count(prompt, completion)
            self.state.decode(completion)
            ident, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
            usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
            choice = {
                "index": 0,
                "text": raw_model.ANSWER,
                "logprobs": None,
                "finish_reason": "stop",
                "matched_stop": None,
            }
            body = {"id": ident, "object": "text_completion", "created": created, "model": model}
            self.send_json(
                200, {**body, "choices": [choice], "usage": usage}, request.get("model"), input_tokens=prompt
            )

    # --- SGLang's native API ---

    def generate(self, request: dict[str, Any]) -> None:
        prompt_in = request.get("input_ids") if request.get("input_ids") is not None else request.get("text", "")
        prompt = self.state.tokenizer.count_prompt(prompt_in)
        max_new = (request.get("sampling_params") or {}).get("max_new_tokens")
        try:
            self.validate(prompt, max_new)
        except protocol.ContextError as e:
            if request.get("stream"):
                self.start_sse()
                self.sse(protocol.generate_stream_error(str(e)))
                self.sse("[DONE]")
                self.record(200, None, input_tokens=prompt, error="context_length")
            else:
                self.send_json(400, protocol.generate_error(str(e)), None, input_tokens=prompt, error="context_length")
            return
        if not self.generating():
            return
        with self.state.slot():
            completion = self.state.tokenizer.count(raw_model.ANSWER)
            self.state.count(prompt, completion)
            self.state.decode(completion)
            meta = {
                "id": uuid.uuid4().hex,
                "finish_reason": {"type": "stop", "matched": None},
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "cached_tokens": 0,
            }
            self.send_json(200, {"text": raw_model.ANSWER, "meta_info": meta}, None, input_tokens=prompt)


def load_tokenizer(args: argparse.Namespace, snapshot: Path) -> protocol.Tokenizer:
    path = Path(args.tokenizer_path or snapshot) / "tokenizer.json"
    try:
        return protocol.Tokenizer.from_file(str(path))
    except Exception as e:
        raise SystemExit(f"OSError: Can't load tokenizer for '{args.model_path}' from {path}: {e}") from e


def context_length(args: argparse.Namespace, snapshot: Path) -> int:
    """sglang/srt/configs/model_config.py, _derive_context_length."""
    derived = int(json.loads((snapshot / "config.json").read_text()).get("max_position_embeddings", 2048))
    if args.context_length is None:
        return derived
    if args.context_length > derived and os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") != "1":
        raise SystemExit(
            f"ValueError: Warning: User-specified context_length ({args.context_length}) is greater than the derived "
            f"context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. "
            "Note that the derived context_length may differ from max_position_embeddings in the model's config. "
            "To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
        )
    return args.context_length


def compile_kernels(args: argparse.Namespace) -> None:
    """DeepGEMM's JIT at start-up: GLM_STANDIN_JIT_SECONDS (default 0) of compiling, unless the
    kernels for this configuration are in the cache already. The cache is where SGLang 0.5.23 puts
    it (SGLANG_DG_CACHE_DIR, by default SGLANG_CACHE_DIR/deep_gemm, by default ~/.cache/sglang), so a
    restart compiles again unless that directory outlives the container."""
    seconds = float(os.environ.get("GLM_STANDIN_JIT_SECONDS", "0"))
    forced = os.environ.get("SGLANG_ENABLE_JIT_DEEPGEMM", "").lower() in ("1", "true")  # compile_deep_gemm
    if seconds <= 0 or (args.moe_runner_backend != "deep_gemm" and not forced):
        return
    base = os.environ.get("SGLANG_CACHE_DIR", os.path.expanduser("~/.cache/sglang"))
    cache = Path(os.environ.get("SGLANG_DG_CACHE_DIR", os.path.join(base, "deep_gemm")))
    key = hashlib.sha256(f"{VERSION} {args.model_path} {args.tp_size} {args.ep_size}".encode()).hexdigest()[:16]
    kernels = cache / f"glm-standin-kernels-{key}.cubin"
    if kernels.is_file():
        say(f"DeepGEMM: {kernels.name} from the JIT cache at {cache}")
        return
    started = time.monotonic()
    time.sleep(seconds)
    cache.mkdir(parents=True, exist_ok=True)
    kernels.write_bytes(key.encode())
    say(f"DeepGEMM: compiled {kernels.name} in {time.monotonic() - started:.1f} s into {cache}")


LAZY: list[Path] = []  # the kernel this process compiled at its first chat request


def lazy_kernel(args: argparse.Namespace) -> None:
    """A serving server's Triton JIT: at its first chat request (the shapes a chat template and
    sampling bring, which start-up and compile_deep_gemm's one /generate request do not), it
    compiles a kernel into TRITON_CACHE_DIR, as a serving SGLang writes its cache while it serves."""
    cache = os.environ.get("TRITON_CACHE_DIR")
    if LAZY or not cache:
        return
    key = hashlib.sha256(f"{VERSION} {args.model_path} chat".encode()).hexdigest()[:16]
    kernel = Path(cache) / f"glm-standin-lazy-{key}" / "kernel.json"
    with contextlib.suppress(OSError):
        kernel.parent.mkdir(parents=True, exist_ok=True)
        kernel.write_text(json.dumps({"name": "glm_standin_chat_kernel", "key": key}))
        say(f"Triton: compiled {kernel.parent.name} at the first chat request into {cache}")
    LAZY.append(kernel)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    snapshot = snapshot_dir(args.model_path, args.revision)
    if not (snapshot / "config.json").is_file():
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        print(
            f"OSError: {args.model_path} (revision {args.revision}) is not in the local cache at {snapshot}"
            + (" and HF_HUB_OFFLINE=1 forbids downloading it." if offline else "; downloading is disabled."),
            file=sys.stderr,
            flush=True,
        )
        return 1
    # The GPUs docker gave the container (`--gpus '"device=..."'` sets NVIDIA_VISIBLE_DEVICES); torch
    # fails on the first rank whose device ordinal is not among them.
    visible = [d for d in os.environ.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if d and d != "void"]
    if len(visible) < args.tp_size and "all" not in visible:
        error = (
            f"RuntimeError: CUDA error: invalid device ordinal (tp_size {args.tp_size}, {len(visible)} GPU(s)"
            f" visible: NVIDIA_VISIBLE_DEVICES={os.environ['NVIDIA_VISIBLE_DEVICES']})"
            if visible
            else "RuntimeError: No CUDA GPUs are available"
        )
        print(error, file=sys.stderr, flush=True)
        return 1
    if args.ep_size not in (1, args.tp_size):
        print(f"AssertionError: ep_size ({args.ep_size}) must be 1 or equal tp_size ({args.tp_size})", file=sys.stderr)
        return 1
    state = State(args, load_tokenizer(args, snapshot), context_length(args, snapshot))
    state.chat = chat_path.ChatPath(args, state, state.context_len)
    Handler.state = state
    server = ThreadingHTTPServer((args.host, args.port), Handler, bind_and_activate=False)
    server.daemon_threads = True
    print(f"[glm.fleet lab stand-in] sglang {VERSION}: loading {args.model_path} from {snapshot}", flush=True)
    # sglang 0.5.23 entrypoints/engine.py: logger.info(f"server_args={...}"), keys included
    shown = {k: v for k, v in vars(args).items() if k != "config"}
    print(f"server_args={shown}", flush=True)

    def stop(_signum: int, _frame: object) -> None:
        print("Received SIGTERM, shutting down.", flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    # sglang 0.5.23 http_server.launch_server: the HTTP server starts only once the schedulers have
    # loaded the weights and compiled their kernels (Engine._launch_subprocesses blocks until then);
    # until that moment a connection to the port is refused.
    time.sleep(float(os.environ.get("GLM_STANDIN_LOAD_SECONDS", "3")))
    compile_kernels(args)
    server.server_bind()
    server.server_activate()

    def warm_up() -> None:
        state.ready = True
        say("The server is fired up and ready to roll!")
        if fault() == "crash_after_start":
            time.sleep(float(os.environ.get("GLM_STANDIN_CRASH_AFTER", "2")))
            print("Fatal Python error: Aborted (crash_after_start fault)", file=sys.stderr, flush=True)
            os._exit(134)

    threading.Thread(target=warm_up, daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
