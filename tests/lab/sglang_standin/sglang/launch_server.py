"""Lab stand-in for `python3 -m sglang.launch_server` (no GPU can hold GLM-5.3-Flash here).

It speaks SGLang's HTTP surface with SGLang's response shapes, so that the roles, the health module
and Claude Code are exercised against the protocol they meet in production:

- arguments: the deployment recipe's flags and a few more, parsed with argparse, which rejects an
  unknown flag (exit 2) as SGLang's does; `--config FILE` merges a YAML file of the same options
  (how the API key reaches the server without appearing on its command line);
- start-up: the weights must be in the Hugging Face cache at the pinned revision (it reads
  HF_HOME, default /root/.cache/huggingface); with HF_HUB_OFFLINE=1 and no snapshot it fails as
  SGLang does. While "loading" (GLM_STANDIN_LOAD_SECONDS, default 3) /health answers 503;
- endpoints: /health, /health_generate, /v1/models, /v1/chat/completions (JSON or SSE chunks),
  /v1/messages (Anthropic JSON or SSE events) and /v1/messages/count_tokens, /get_server_info and
  /server_info (the parsed arguments), /metrics (with --enable-metrics);
- API key: with --api-key, every path but /health, /health_generate and /metrics needs
  `Authorization: Bearer <key>`, else 401;
- one JSON line per request on stdout (path, model, whether and which bearer token: its sha256,
  never the token);
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
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

VERSION = "0.0.0+glm-fleet-lab-standin"
ANSWER = "Hello from GLM-5.3-Flash, served by the glm.fleet lab stand-in."
UNAUTHENTICATED = ("/health", "/health_generate", "/metrics")
FAULT_FILE = Path("/tmp/glm-standin-fault")  # noqa: S108 - a switch inside the container


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
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--ep-size", type=int, default=1)
    p.add_argument("--dp-size", type=int, default=1)
    p.add_argument("--context-length", type=int)
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--dsa-prefill-backend", choices=["trtllm", "flashmla", "fa3"])
    p.add_argument("--dsa-decode-backend", choices=["trtllm", "flashmla", "fa3"])
    p.add_argument("--kv-cache-dtype", choices=["auto", "fp8_e4m3", "fp8_e5m2", "bf16"], default="auto")
    p.add_argument("--moe-runner-backend", choices=["auto", "deep_gemm", "triton", "flashinfer_trtllm", "cutlass"])
    p.add_argument("--reasoning-parser", type=str)
    p.add_argument("--tool-call-parser", type=str)
    p.add_argument("--enable-metrics", action="store_true")
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
    return args


def snapshot_dir(model_path: str, revision: str | None) -> Path:
    home = Path(os.environ.get("HF_HOME", "/root/.cache/huggingface"))
    repo = home / "hub" / ("models--" + model_path.replace("/", "--"))
    if revision is None:
        ref = repo / "refs" / "main"
        revision = ref.read_text().strip() if ref.exists() else "main"
    return repo / "snapshots" / revision


def fault() -> str:
    if FAULT_FILE.exists():
        return FAULT_FILE.read_text().strip()
    return os.environ.get("GLM_STANDIN_FAULT", "")


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ready = False
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.lock = threading.Lock()

    def count(self, prompt: int, generated: int) -> None:
        with self.lock:
            self.prompt_tokens += prompt
            self.generation_tokens += generated


def tokens(text: str) -> int:
    return max(1, len(text.split()))


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class Handler(BaseHTTPRequestHandler):
    server_version = "uvicorn"
    sys_version = ""
    state: State

    def log_message(self, format: str, *args: Any) -> None:
        return

    # --- plumbing ---

    def record(self, status: int, model: str | None = None) -> None:
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
        }
        print(json.dumps(entry), flush=True)

    def send_json(self, status: int, body: Any, model: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.record(status, model)

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
        key = self.state.args.api_key
        if not key or self.path.split("?")[0] in UNAUTHENTICATED:
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self.send_json(401, {"error": "Unauthorized"})
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
                self.state.count(1, 1)
                self.send_empty(200)
        elif path == "/v1/models":
            model = {
                "id": args.served_model_name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "sglang",
                "root": args.served_model_name,
                "max_model_len": args.context_length,
            }
            self.send_json(200, {"object": "list", "data": [model]})
        elif path in ("/get_server_info", "/server_info"):
            info = {k: v for k, v in vars(args).items() if k not in ("api_key", "config")}
            self.send_json(200, {**info, "version": VERSION, "internal_states": [{"load": 0}]})
        elif path == "/metrics" and args.enable_metrics:
            name = args.served_model_name
            text = (
                f'sglang:num_running_reqs{{model_name="{name}"}} 0.0\n'
                f'sglang:prompt_tokens_total{{model_name="{name}"}} {self.state.prompt_tokens}.0\n'
                f'sglang:generation_tokens_total{{model_name="{name}"}} {self.state.generation_tokens}.0\n'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            self.record(200)
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        if not self.authorized():
            return
        if not self.state.ready:
            self.send_json(503, {"error": {"message": "The server is not ready", "type": "ServiceUnavailable"}})
            return
        request = self.body()
        if path == "/v1/chat/completions":
            self.chat(request)
        elif path == "/v1/messages":
            self.messages(request)
        elif path == "/v1/messages/count_tokens":
            prompt = " ".join(text_of(m.get("content")) for m in request.get("messages", []))
            self.send_json(200, {"input_tokens": tokens(prompt)}, request.get("model"))
        else:
            self.send_json(404, {"detail": "Not Found"})

    def chat(self, request: dict[str, Any]) -> None:
        if not self.generating():
            return
        model = self.state.args.served_model_name
        prompt = tokens(" ".join(text_of(m.get("content")) for m in request.get("messages", [])))
        completion = tokens(ANSWER)
        self.state.count(prompt, completion)
        ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if not request.get("stream"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER, "reasoning_content": None, "tool_calls": None},
                "logprobs": None,
                "finish_reason": "stop",
                "matched_stop": None,
            }
            body = {"id": ident, "object": "chat.completion", "created": created, "model": model}
            self.send_json(200, {**body, "choices": [choice], "usage": usage}, request.get("model"))
            return
        self.start_sse()
        base = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        self.sse({**base, "choices": [first]})
        for word in ANSWER.split(" "):
            delta = {"index": 0, "delta": {"content": word + " "}, "finish_reason": None}
            self.sse({**base, "choices": [delta]})
        self.sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (request.get("stream_options") or {}).get("include_usage"):
            self.sse({**base, "choices": [], "usage": usage})
        self.sse("[DONE]")
        self.record(200, request.get("model"))

    def messages(self, request: dict[str, Any]) -> None:
        if not self.generating():
            return
        model = request.get("model") or self.state.args.served_model_name
        prompt = tokens(" ".join(text_of(m.get("content")) for m in request.get("messages", [])))
        completion = tokens(ANSWER)
        self.state.count(prompt, completion)
        ident = f"msg_{uuid.uuid4().hex[:24]}"
        if not request.get("stream"):
            body = {
                "id": ident,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": ANSWER}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": completion},
            }
            self.send_json(200, body, request.get("model"))
            return
        self.start_sse()
        message = {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 1},
        }
        self.sse({"type": "message_start", "message": message}, "message_start")
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        self.sse(block, "content_block_start")
        self.sse({"type": "ping"}, "ping")
        for word in ANSWER.split(" "):
            delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word + " "}}
            self.sse(delta, "content_block_delta")
        self.sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        end = {"stop_reason": "end_turn", "stop_sequence": None}
        self.sse({"type": "message_delta", "delta": end, "usage": {"output_tokens": completion}}, "message_delta")
        self.sse({"type": "message_stop"}, "message_stop")
        self.record(200, request.get("model"))


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
    if args.ep_size not in (1, args.tp_size):
        print(f"AssertionError: ep_size ({args.ep_size}) must be 1 or equal tp_size ({args.tp_size})", file=sys.stderr)
        return 1
    state = State(args)
    Handler.state = state
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"[glm.fleet lab stand-in] sglang {VERSION}: loading {args.model_path} from {snapshot}", flush=True)

    def load() -> None:
        time.sleep(float(os.environ.get("GLM_STANDIN_LOAD_SECONDS", "3")))
        state.ready = True
        print("The server is fired up and ready to roll!", flush=True)
        if fault() == "crash_after_start":
            time.sleep(float(os.environ.get("GLM_STANDIN_CRASH_AFTER", "2")))
            print("Fatal Python error: Aborted (crash_after_start fault)", file=sys.stderr, flush=True)
            os._exit(134)

    def stop(_signum: int, _frame: object) -> None:
        print("Received SIGTERM, shutting down.", flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=load, daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
