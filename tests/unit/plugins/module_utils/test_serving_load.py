"""The benchmark client's view of a stream (module_utils/_serving_load.stream_chat)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ansible_collections.glm.fleet.plugins.module_utils import _serving_load


def chunk(**delta: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode() + b"\n\n"


# What SGLang sends for a thinking model under --reasoning-parser: the role, reasoning tokens,
# then the answer, then the usage.
THINKING = [
    chunk(role="assistant", content=""),
    chunk(reasoning_content="The user"),
    chunk(reasoning_content=" asks."),
    chunk(content="Hello"),
    b'data: {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 4}}\n\n',
    b"data: [DONE]\n\n",
]
ONLY_THINKING = [chunk(role="assistant", content=""), chunk(reasoning_content="Hmm"), b"data: [DONE]\n\n"]
Server = tuple[str, list[list[bytes]]]  # the URL, and the replies still to send
NOTHING = [chunk(role="assistant", content=""), b"data: [DONE]\n\n"]


@pytest.fixture
def server() -> Iterator[Server]:
    replies: list[list[bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            return

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for frame in replies.pop(0):
                self.wfile.write(frame)
                self.wfile.flush()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", replies
    httpd.shutdown()


def run(url: str, replies: list[list[bytes]], frames: list[bytes]) -> dict[str, Any]:
    replies.append(frames)
    ticks = iter(range(100))
    return _serving_load.stream_chat(
        _serving_load.Target(url, None, None, 5), "m", "hi", 4, clock=lambda: float(next(ticks))
    )


def test_reasoning_tokens_count_and_the_first_one_is_the_time_to_first_token(server: Server) -> None:
    url, replies = server
    sample = run(url, replies, THINKING)
    assert sample["ok"], sample
    # clock: 0 at the start, 1 at the first reasoning chunk, 2 and 3 at the next tokens, 4 at the end
    assert sample["ttft"] == 1.0
    assert sample["itl"] == [1.0, 1.0]
    assert (sample["input_tokens"], sample["output_tokens"]) == (12, 4)


def test_a_stream_of_reasoning_only_is_a_stream_of_tokens(server: Server) -> None:
    url, replies = server
    sample = run(url, replies, ONLY_THINKING)
    assert sample["ok"], sample
    assert sample["output_tokens"] == 1


def test_a_stream_without_any_token_is_an_error(server: Server) -> None:
    url, replies = server
    sample = run(url, replies, NOTHING)
    assert not sample["ok"]
    assert sample["error"] == "the stream ended without a token"
