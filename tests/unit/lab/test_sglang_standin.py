"""Contract tests of the lab's SGLang stand-in (tests/lab/sglang_standin).

The stand-in runs here as a process, on the lab repository's real tokenizer. Its answers are
checked against what the real components define: SGLang's own pure functions and messages, read
from the pinned sglang wheel (it cannot be imported: it needs the CUDA stack), and the response
types of the `anthropic` and `openai` SDKs, which parse every JSON body and every SSE event.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import openai
import pytest
import standin_deps
from anthropic.types import Message, MessageTokensCount, RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse
from conftest import REPO
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from prometheus_client.parser import text_string_to_metric_families
from pydantic import TypeAdapter
from tokenizers import Tokenizer

from ansible_collections.glm.fleet.plugins.module_utils import _serving_load
from ansible_collections.glm.fleet.plugins.module_utils._bench_metrics import level_metrics

STANDIN = REPO / "tests" / "lab" / "sglang_standin"
STANDIN_CACHE = REPO / ".lab" / "cache" / "standin"  # the pinned wheels (tests/lab/standin_deps.py)
MODEL = "zai-org/GLM-5.3-Flash"
REVISION = "eb9eb208eb0d988989d07a6a12d0fdeb5f52574a"
KEY = "sk-contract-test-key"
CONTEXT = 4096
EVENTS = TypeAdapter(RawMessageStreamEvent)


def anthropic_event(data: dict[str, Any]) -> RawMessageStreamEvent:
    """An event as the SDK's types have it. SGLang starts a thinking block without `signature`
    (anthropic/serving.py: absent means unsigned thinking), which the SDK reads leniently but its
    strict type requires: the only field filled in before validating."""
    block = data.get("content_block") or {}
    if data.get("type") == "content_block_start" and block.get("type") == "thinking":
        assert "signature" not in block or block["signature"] is None
        data = {**data, "content_block": {**block, "signature": ""}}
    return EVENTS.validate_python(data)


def reasoning(delta: Any) -> str | None:
    """A chat delta's reasoning_content (SGLang's extension of OpenAI's delta)."""
    return (delta.model_extra or {}).get("reasoning_content")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hf_home(root: Path, tokenizer: Path, max_position: int = 1048576) -> Path:
    snapshot = root / "hub" / f"models--{MODEL.replace('/', '--')}" / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "config.json").write_text(json.dumps({"max_position_embeddings": max_position}))
    (snapshot / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    return root


# The recipe's parsers (docs/deployment: --reasoning-parser glm45 --tool-call-parser glm47).
PARSERS = ("--reasoning-parser", "glm45", "--tool-call-parser", "glm47")


def launch(
    home: Path, *args: str, env: dict[str, str] | None = None, parsers: tuple[str, ...] = PARSERS
) -> subprocess.Popen[str]:
    """The stand-in on its own Python, laid out as in the lab's image (SGLang's chat path beside it),
    with the recipe's parsers unless told otherwise."""
    environ = {
        **os.environ,
        "HF_HOME": str(home),
        "PYTHONPATH": standin_deps.standin_path(STANDIN_CACHE, STANDIN / "sglang", home / "standin"),
        "GLM_STANDIN_LOAD_SECONDS": "0",
        "NVIDIA_VISIBLE_DEVICES": "0,1,2,3",
    }
    argv = [standin_deps.standin_python(), "-s", "-m", "sglang.launch_server", "--model-path", MODEL,
            "--revision", REVISION, *parsers, *args]  # fmt: skip
    return subprocess.Popen(
        argv, env={**environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, lab_tokenizer: Path) -> Iterator[str]:
    home = hf_home(tmp_path_factory.mktemp("hf"), lab_tokenizer)
    port = free_port()
    args = ["--port", str(port), "--context-length", str(CONTEXT), "--api-key", KEY, "--max-running-requests", "1"]
    proc = launch(home, *args, "--enable-metrics", env={"GLM_STANDIN_SECONDS_PER_TOKEN": "0.02"})
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def wait_healthy(url: str, proc: subprocess.Popen[str]) -> None:
    """Until /health answers 200; a stand-in that exits fails at once. The deadline only guards
    against a hang: `make test` runs these tests while the lab comes up on the same two cores."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as resp:  # noqa: S310 - local test server
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"the stand-in did not start: {proc.communicate()[0]}")


def call(
    url: str, path: str, body: Any = None, token: str | None = KEY, header: str | None = None,
    *, headers: dict[str, str] | None = None,
) -> tuple[int, str]:  # fmt: skip
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method="POST" if data else "GET", headers=headers or {})  # noqa: S310
    if header is not None or token is not None:
        request.add_header("Authorization", header if header is not None else f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310 - local test server
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def sse_events(text: str) -> list[tuple[str | None, str]]:
    events = []
    for frame in text.strip().split("\n\n"):
        lines = frame.split("\n")
        name = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next(line[6:] for line in lines if line.startswith("data: "))
        events.append((name, data))
    return events


def claude(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, auth_token=KEY, api_key=None, max_retries=0)


def gpt(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


# --- SGLang's own rules, from the pinned wheel ---------------------------------------------------


@pytest.fixture(scope="module")
def sglang_auth() -> ModuleType:
    path = standin_deps.sglang_source(REPO / ".lab" / "cache" / "standin", "sglang/srt/utils/auth.py")
    spec = importlib.util.spec_from_file_location("sglang_auth_0_5_23", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ADMIN_KEY = "sk-contract-test-admin"
PATHS = ["/v1/messages", "/v1/models", "/health", "/health_generate", "/metrics", "/ready", "/flush_cache"]
HEADERS = [None, f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}", f"Bearer  {KEY}", f"Bearer {KEY}x", KEY, "Basic x",
           f"Bearer {ADMIN_KEY}"]  # fmt: skip


@pytest.fixture(scope="module")
def admin_server(tmp_path_factory: pytest.TempPathFactory, lab_tokenizer: Path) -> Iterator[str]:
    """The same stand-in with an admin key as well: the serving key no longer opens admin routes."""
    home = hf_home(tmp_path_factory.mktemp("hf-admin"), lab_tokenizer)
    port = free_port()
    proc = launch(home, "--port", str(port), "--api-key", KEY, "--admin-api-key", ADMIN_KEY)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.parametrize("admin", [False, True], ids=["api-key", "api-and-admin-key"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("header", HEADERS)
def test_api_key_decisions_are_sglangs(
    sglang_auth: ModuleType, request: pytest.FixtureRequest, admin: bool, path: str, header: str | None
) -> None:
    """The stand-in admits exactly the requests that SGLang's decide_request_auth admits, at the
    auth level SGLang gives the route (/flush_cache is ADMIN_OPTIONAL)."""
    url = request.getfixturevalue("admin_server" if admin else "server")
    level = sglang_auth.AuthLevel.ADMIN_OPTIONAL if path == "/flush_cache" else sglang_auth.AuthLevel.NORMAL
    decision = sglang_auth.decide_request_auth(
        method="GET", path=path, authorization_header=header, api_key=KEY,
        admin_api_key=ADMIN_KEY if admin else None, auth_level=level,
    )  # fmt: skip
    status, body = call(url, path, header=header if header is not None else "", token=None)
    assert (status != 401) == decision.allowed, (path, header, status, body)
    if status == 401:
        assert json.loads(body) == {"error": "Unauthorized"}


def test_context_messages_are_sglangs_word_for_word() -> None:
    source = standin_deps.sglang_source(
        REPO / ".lab" / "cache" / "standin", "sglang/srt/managers/tokenizer_manager.py"
    ).read_text()
    standin = (STANDIN / "sglang" / "_protocol.py").read_text()
    for fragment in (
        'is longer than the "\n                    f"model\'s context length',
        "Requested token count exceeds the model's maximum context length",
        "tokens: {input_token_num} tokens from the input messages and",
        "of tokens in the input messages or the completion to fit within the limit.",
    ):
        assert fragment in source, fragment
    for fragment in (
        "is longer than the model's context length",
        "Requested token count exceeds the model's maximum context length ",
        "tokens from the input messages and ",
        "of tokens in the input messages or the completion to fit within the limit.",
    ):
        assert fragment in standin, fragment


# --- Anthropic: /v1/messages and count_tokens ----------------------------------------------------


def test_messages_json_is_an_anthropic_message(server: str) -> None:
    message = claude(server).messages.create(model=MODEL, max_tokens=64, messages=user("hello"))
    assert isinstance(message, Message)
    assert [b.type for b in message.content] == ["thinking", "text"]  # GLM-5.3 thinks first, always
    assert "GLM-5.3-Flash" in message.content[1].text  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0
    assert message.usage.output_tokens > 0


def test_every_streamed_event_is_an_anthropic_event(server: str) -> None:
    status, text = call(
        server, "/v1/messages", {"model": MODEL, "max_tokens": 64, "stream": True, "messages": user("hi")}
    )
    assert status == 200
    events = sse_events(text)
    parsed = [anthropic_event(json.loads(data)) for _name, data in events]
    assert [name for name, _data in events] == [e.type for e in parsed]
    types = [e.type for e in parsed]
    assert types[0] == "message_start"
    assert types[-2:] == ["message_delta", "message_stop"]
    assert "ping" not in types  # SGLang's stream has none
    assert parsed[0].message.usage.input_tokens > 0  # type: ignore[union-attr]


def test_sdk_streams_a_tool_call_and_count_tokens_agrees(server: str) -> None:
    marker = '[glm-lab tool Write {"file_path": "/srv/out.txt", "content": "written by the lab"}]'
    tools = [{"name": "Write", "description": "Write a file", "input_schema": {"type": "object", "properties": {}}}]
    client = claude(server)
    with client.messages.stream(model=MODEL, max_tokens=256, messages=user(f"please {marker}"), tools=tools) as s:
        raw = [anthropic_event(event.model_dump()) for event in s if event.type in {
            "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
            "message_stop"}]  # fmt: skip
        final = s.get_final_message()
    assert any(e.type == "content_block_delta" and e.delta.type == "input_json_delta" for e in raw)  # type: ignore[union-attr]
    thinking, block = final.content
    assert thinking.type == "thinking"
    assert block.type == "tool_use"
    assert block.name == "Write"
    assert block.input == {"file_path": "/srv/out.txt", "content": "written by the lab"}
    assert final.stop_reason == "tool_use"
    counted = client.messages.count_tokens(model=MODEL, messages=user(f"please {marker}"), tools=tools)
    assert isinstance(counted, MessageTokensCount)
    assert counted.input_tokens == final.usage.input_tokens

    follow_up = [
        *user(f"please {marker}"),
        {"role": "assistant", "content": [block.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "ok"}]},
    ]
    after = client.messages.create(model=MODEL, max_tokens=256, messages=follow_up, tools=tools)
    assert after.content[1].type == "text"
    assert after.content[1].text.startswith("Done")


def test_tokens_are_counted_with_the_snapshots_tokenizer(server: str, lab_tokenizer: Path) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 20
    counted = claude(server).messages.count_tokens(model=MODEL, messages=user(text)).input_tokens
    alone = len(Tokenizer.from_file(str(lab_tokenizer)).encode(text, add_special_tokens=False).ids)
    assert alone < counted <= alone + 24  # the text plus the template's role markers
    assert counted < len(text) / 3  # a BPE count, far below one token per character


def test_messages_over_the_context_are_refused_as_sglang_refuses(server: str) -> None:
    client = claude(server)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model=MODEL, max_tokens=CONTEXT, messages=user("hello"))
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "BadRequestError"  # _convert_openai_error_response keeps the upstream type
    assert body["error"]["message"].startswith(
        f"Requested token count exceeds the model's maximum context length of {CONTEXT} tokens. "
    )
    long = "word " * CONTEXT
    with pytest.raises(anthropic.BadRequestError, match=r"The input \(\d+ tokens\) is longer than the model's context"):
        client.messages.create(model=MODEL, max_tokens=1, messages=user(long))


def test_a_streamed_request_over_the_context_ends_in_an_error_event(server: str) -> None:
    body = {"model": MODEL, "max_tokens": CONTEXT, "stream": True, "messages": user("hello")}
    status, text = call(server, "/v1/messages", body)
    assert status == 200  # SGLang opens the stream, then _flush_on_error
    events = sse_events(text)
    assert [name for name, _data in events] == ["message_start", "error", "message_stop"]
    EVENTS.validate_json(events[0][1])
    error = ErrorResponse.model_validate_json(events[1][1])
    assert error.error.type == "invalid_request_error"
    assert "exceeds the model's maximum context length" in error.error.message
    with (
        pytest.raises(anthropic.APIStatusError, match="maximum context length"),
        claude(server).messages.stream(model=MODEL, max_tokens=CONTEXT, messages=user("hello")) as s,
    ):
        s.get_final_message()


def test_max_tokens_is_required(server: str) -> None:
    status, text = call(server, "/v1/messages", {"model": MODEL, "messages": user("hello")})
    assert status == 400
    assert json.loads(text)["error"]["type"] == "invalid_request_error"


# --- OpenAI: chat completions and completions ----------------------------------------------------


def test_chat_completions_are_openai_types(server: str) -> None:
    client = gpt(server)
    completion = client.chat.completions.create(model=MODEL, max_tokens=64, messages=user("hello"))  # type: ignore[arg-type]
    assert isinstance(completion, ChatCompletion)
    assert completion.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model=MODEL, max_tokens=64, messages=user("hello"), stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == completion.choices[0].message.content
    )
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == completion.usage.prompt_tokens


def test_a_chat_answer_stops_at_max_tokens_and_ignore_eos_fills_it(server: str) -> None:
    """As SGLang samples: at most max_tokens tokens ("length" when cut); with its `ignore_eos`
    extension (a field of 0.5.23's ChatCompletionRequest) exactly max_tokens, as benchmarks ask."""
    protocol = standin_deps.sglang_source(
        REPO / ".lab" / "cache" / "standin", "sglang/srt/entrypoints/openai/protocol.py"
    )
    chat_request = protocol.read_text().split("class ChatCompletionRequest(", 1)[1].split("\nclass ", 1)[0]
    assert "    ignore_eos: bool = False" in chat_request
    client = gpt(server)

    def streamed(**extra: Any) -> tuple[int, int, str | None]:
        chunks = list(client.chat.completions.create(
            model=MODEL, messages=user("hello"), stream=True, stream_options={"include_usage": True}, **extra,
        ))  # fmt: skip
        pieces = [c for c in chunks if c.choices and (c.choices[0].delta.content or reasoning(c.choices[0].delta))]
        finish = next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason)
        assert chunks[-1].usage is not None
        return len(pieces), chunks[-1].usage.completion_tokens, finish

    # One token ends the model's thinking (</think>): SGLang's reasoning parser passes no chunk on.
    natural, natural_usage, finish = streamed(max_tokens=64)
    assert (natural + 1, finish) == (natural_usage, "stop")
    assert natural > 4
    assert streamed(max_tokens=3) == (3, 3, "length")  # three tokens of thinking
    many = natural * 3 + 1
    assert streamed(max_tokens=many, extra_body={"ignore_eos": True}) == (many - 1, many, "length")
    whole = client.chat.completions.create(model=MODEL, messages=user("hello"), max_tokens=2)  # type: ignore[arg-type]
    assert whole.usage is not None
    assert (whole.usage.completion_tokens, whole.choices[0].finish_reason) == (2, "length")


def test_openai_routes_refuse_over_the_context_with_sglangs_envelope(server: str) -> None:
    client = gpt(server)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=MODEL, max_tokens=CONTEXT, messages=user("hi"), stream=stream)  # type: ignore[call-overload]
        assert refused.value.body is not None
        assert refused.value.status_code == 400
    status, text = call(server, "/v1/chat/completions", {"model": MODEL, "max_tokens": CONTEXT, "messages": user("hi")})
    body = json.loads(text)
    assert status == 400
    assert body["object"] == "error"
    assert body["type"] == "BadRequestError"
    assert body["code"] == 400
    completion = client.completions.create(model=MODEL, prompt="hello", max_tokens=8)
    assert isinstance(completion, Completion)
    assert completion.choices[0].text
    with pytest.raises(openai.BadRequestError, match="longer than the model's context length"):
        client.completions.create(model=MODEL, prompt=list(range(CONTEXT)), max_tokens=1)


def test_generate_refuses_over_the_context_both_ways(server: str) -> None:
    status, text = call(
        server, "/generate", {"input_ids": list(range(CONTEXT)), "sampling_params": {"max_new_tokens": 1}}
    )
    assert status == 400
    assert json.loads(text) == {
        "error": {
            "message": f"The input ({CONTEXT} tokens) is longer than the model's context length ({CONTEXT} tokens)."
        }
    }
    body = {"text": "hello", "sampling_params": {"max_new_tokens": CONTEXT}, "stream": True}
    status, text = call(server, "/generate", body)
    first, done = sse_events(text)
    assert status == 200
    assert done[1] == "[DONE]"
    error = json.loads(first[1])["error"]
    assert error["type"] == "invalid_request_error"
    assert error["code"] == 400
    assert error["retryable"] is False
    status, text = call(server, "/generate", {"text": "hello", "sampling_params": {"max_new_tokens": 8}})
    assert status == 200
    assert json.loads(text)["meta_info"]["prompt_tokens"] > 0


# --- Scheduling and start-up ---------------------------------------------------------------------


def test_requests_past_max_running_requests_wait_in_the_queue(server: str) -> None:
    """--max-running-requests 1: the second request waits (the metrics show it queued) and succeeds."""
    results: list[int] = []
    body = {"model": MODEL, "max_tokens": 64, "messages": user("hello")}
    threads = [
        threading.Thread(target=lambda: results.append(call(server, "/v1/messages", body)[0])) for _thread in range(2)
    ]
    for t in threads:
        t.start()
    seen_queued = 0.0
    while any(t.is_alive() for t in threads):
        metrics = call(server, "/metrics", token=None)[1]
        running = next(line for line in metrics.splitlines() if line.startswith("sglang:num_running_reqs"))
        queued = next(line for line in metrics.splitlines() if line.startswith("sglang:num_queue_reqs"))
        assert float(running.rsplit(" ", 1)[1]) <= 1
        seen_queued = max(seen_queued, float(queued.rsplit(" ", 1)[1]))
        time.sleep(0.02)
    assert results == [200, 200]
    assert seen_queued == 1


def test_a_context_above_the_models_maximum_is_refused_at_start(tmp_path: Path, lab_tokenizer: Path) -> None:
    home = hf_home(tmp_path, lab_tokenizer, max_position=8192)
    proc = launch(home, "--port", str(free_port()), "--context-length", "16384")
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode != 0
    assert "User-specified context_length (16384) is greater than the derived context_length (8192)" in out


def test_a_snapshot_without_a_tokenizer_does_not_start(tmp_path: Path, lab_tokenizer: Path) -> None:
    home = hf_home(tmp_path, lab_tokenizer)
    next(home.rglob("tokenizer.json")).unlink()
    proc = launch(home, "--port", str(free_port()))
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode != 0
    assert "Can't load tokenizer" in out


@pytest.mark.parametrize(
    ("visible", "error"),
    [
        ("4,5", "RuntimeError: CUDA error: invalid device ordinal (tp_size 4, 2 GPU(s) visible"),
        ("", "RuntimeError: No CUDA GPUs are available"),
    ],
)
def test_fewer_gpus_than_the_tensor_parallel_size_do_not_start(
    tmp_path: Path, lab_tokenizer: Path, visible: str, error: str
) -> None:
    home = hf_home(tmp_path, lab_tokenizer)
    proc = launch(home, "--port", str(free_port()), "--tp-size", "4", env={"NVIDIA_VISIBLE_DEVICES": visible})
    out = proc.communicate(timeout=30)[0]
    assert proc.returncode != 0
    assert error in out


def test_model_info_has_sglangs_fields_under_both_routes(server: str) -> None:
    """What a router (SMG) reads from each worker at start: sglang 0.5.23's model_info() keys."""
    fields = {"model_path", "served_model_name", "tokenizer_path", "is_generation", "preferred_sampling_params",
              "weight_version", "load_format", "reasoning_parser", "tool_call_parser", "disaggregation_mode",
              "has_image_understanding", "has_audio_understanding", "model_type", "architectures"}  # fmt: skip
    for path in ("/model_info", "/get_model_info"):
        status, body = call(server, path)
        assert status == 200
        info = json.loads(body)
        assert set(info) == fields
        assert info["served_model_name"] == MODEL


# --- Metrics -------------------------------------------------------------------------------------


def scrape(url: str) -> dict[str, Any]:
    """The stand-in's /metrics as Prometheus' own parser reads it: family name -> family."""
    status, text = call(url, "/metrics", token=None)
    assert status == 200
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(families: dict[str, Any], name: str, **labels: str) -> float:
    """One series' value; 0 for a labelled counter no request has counted in yet (no series)."""
    samples = [s for family in families.values() for s in family.samples]
    values = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    assert len(values) <= 1, (name, labels, values)
    return values[0] if values else 0.0


def test_metrics_are_sglangs_names_labels_types_and_buckets(server: str) -> None:
    """Each family the stand-in exports is one SGLang 0.5.23 defines, with its type, labels and default
    buckets (read from the pinned wheel's metrics_collector.py)."""
    source = standin_deps.sglang_source(
        REPO / ".lab" / "cache" / "standin", "sglang/srt/observability/metrics_collector.py"
    ).read_text()
    found = re.findall(r'(Gauge|Counter|Histogram)\(\s*name="sglang:(\w+)"', source)
    defined = {name: kind.lower() for kind, name in found}
    call(server, "/v1/messages", {"model": MODEL, "max_tokens": 64, "stream": True, "messages": user("hi")})
    families = scrape(server)
    assert families, "no metrics"
    for name, family in families.items():
        bare = name.removeprefix("sglang:")
        kind = defined.get(bare) or defined.get(bare + "_total")
        assert kind == family.type, (name, family.type, kind)
    scheduler = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}
    assert set(families["sglang:num_running_reqs"].samples[0].labels) == scheduler
    assert set(families["sglang:prompt_tokens"].samples[0].labels) == {"model_name", "engine_type", "is_streaming"}
    ttft = families["sglang:time_to_first_token_seconds"].samples
    assert {s.labels["is_streaming"] for s in ttft} <= {"true", "false"}
    bounds = [float(s.labels["le"]) for s in ttft if s.name.endswith("_bucket") and s.labels["is_streaming"] == "true"]
    wheel = re.search(r"bucket_time_to_first_token = \[([^\]]*)\]", source)
    assert wheel, "the wheel's TTFT buckets moved"
    assert bounds[:-1] == [float(b) for b in wheel.group(1).replace(",", " ").split()]


def test_metrics_follow_the_load(server: str) -> None:
    """Counters grow by what the server answered (the usage it reported), the TTFT histogram by one
    per request, and generation throughput is above zero right after generating."""
    before = scrape(server)
    body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": user("hello there")}
    status, text = call(server, "/v1/messages", body)
    assert status == 200
    events = [json.loads(data) for _name, data in sse_events(text)]
    prompt = next(e for e in events if e["type"] == "message_start")["message"]["usage"]["input_tokens"]
    output = next(e for e in events if e["type"] == "message_delta")["usage"]["output_tokens"]
    after = scrape(server)

    def grew(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert grew("sglang:prompt_tokens_total", is_streaming="true") == prompt
    assert grew("sglang:generation_tokens_total", is_streaming="true") == output
    assert grew("sglang:num_requests_total", is_streaming="true") == 1
    assert grew("sglang:time_to_first_token_seconds_count", is_streaming="true") == 1
    assert grew("sglang:e2e_request_latency_seconds_count", is_streaming="true") == 1
    assert grew("sglang:inter_token_latency_seconds_count") >= 1
    # 0.02 s per output token: the first came at least one token's decode after the start
    assert grew("sglang:time_to_first_token_seconds_sum", is_streaming="true") >= 0.02
    assert sample(after, "sglang:gen_throughput") > 0
    assert sample(after, "sglang:num_running_reqs") == 0
    assert sample(after, "sglang:token_usage") == 0
    assert sample(after, "sglang:context_len") == CONTEXT


def test_each_requests_custom_labels_and_cached_prefix_are_counted_as_its_usage_says(
    tmp_path: Path, lab_tokenizer: Path
) -> None:
    """With --tokenizer-metrics-allowed-custom-labels developer and --enable-cache-report, as the fleet
    runs: the counters of each developer (the custom-labels header's value) grow by the usage their
    answers reported, cached input included; a label not allowed is dropped; a conversation's second
    turn finds its first turn's whole pages in the cache (64 tokens each)."""
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    port = free_port()
    proc = launch(home, "--port", str(port), "--context-length", str(CONTEXT), "--enable-metrics",
                  "--enable-cache-report", "--tokenizer-metrics-allowed-custom-labels", "developer")  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        system = "You are a careful coding agent working in a large repository. " * 30
        sent: dict[str, dict[str, int]] = {}

        def turn(
            developer: str, messages: list[dict[str, Any]], stream: bool, labels: dict[str, str]
        ) -> dict[str, int]:
            body = {"model": MODEL, "max_tokens": 32, "stream": stream, "system": system, "messages": messages}
            status, text = call(url, "/v1/messages", body, token=None, headers={"x-custom-labels": json.dumps(labels)})
            assert status == 200, text
            if stream:
                events = [json.loads(data) for _name, data in sse_events(text)]
                usage = next(e for e in events if e["type"] == "message_start")["message"]["usage"]
                usage |= next(e for e in events if e["type"] == "message_delta")["usage"]
            else:
                usage = json.loads(text)["usage"]
            mine = sent.setdefault(developer, {"input": 0, "cached": 0, "output": 0})
            mine["input"] += usage["input_tokens"] + usage.get("cache_read_input_tokens", 0)
            mine["cached"] += usage.get("cache_read_input_tokens", 0)
            mine["output"] += usage["output_tokens"]
            return usage

        first = turn("alice", user("read the README"), True, {"developer": "alice"})
        assert "cache_read_input_tokens" not in first  # nothing cached yet
        history = [*user("read the README"), {"role": "assistant", "content": "Done."}, *user("now the tests")]
        second = turn("alice", history, False, {"developer": "alice"})
        assert second["cache_read_input_tokens"] >= 64, second
        assert second["cache_read_input_tokens"] % 64 == 0, second
        turn("bob", user("hi"), True, {"developer": "bob", "team": "platform"})  # team: not an allowed label
        turn("", user("hi"), False, {})  # no label: the empty value
        families = scrape(url)
        for developer, mine in sent.items():
            both = [sample(families, "sglang:prompt_tokens_total", developer=developer, is_streaming=flag)
                    for flag in ("true", "false")]  # fmt: skip
            assert sum(both) == mine["input"], (developer, both, mine)
            assert (
                sum(
                    sample(families, "sglang:generation_tokens_total", developer=developer, is_streaming=flag)
                    for flag in ("true", "false")
                )
                == mine["output"]
            )
            assert (
                sample(families, "sglang:cached_tokens_total", developer=developer, cache_source="device")
                == mine["cached"]
            )
        labels = {key for f in families.values() for smp in f.samples for key in smp.labels}
        assert "developer" in labels
        assert "team" not in labels
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_custom_labels_without_their_header_are_refused_at_start(tmp_path: Path, lab_tokenizer: Path) -> None:
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    proc = launch(home, "--port", str(free_port()), "--tokenizer-metrics-custom-labels-header", "",
                  "--tokenizer-metrics-allowed-custom-labels", "developer")  # fmt: skip
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0
    assert (
        "Please set --tokenizer-metrics-custom-labels-header when setting --tokenizer-metrics-allowed-custom-labels."
        in out
    )


# --- Decode speed ----------------------------------------------------------------------------------


def timed_streams(url: str, streams: int) -> tuple[int, float, list[float]]:
    """`streams` concurrent streamed answers: output tokens in all, wall time, each one's tokens/s
    after its first token (how a benchmark measures a user's speed)."""
    results: list[tuple[int, float, float, float]] = []

    def one() -> None:
        body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": user("hello")}
        request = urllib.request.Request(  # noqa: S310 - local test server
            url + "/v1/messages", data=json.dumps(body).encode(), method="POST"
        )
        request.add_header("Authorization", f"Bearer {KEY}")
        start, first, tokens = time.monotonic(), 0.0, 0
        with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310 - local test server
            for raw in resp:
                line = raw.decode()
                if '"content_block_delta"' in line and line.startswith("data: "):
                    first = first or time.monotonic()
                if '"message_delta"' in line and line.startswith("data: "):
                    tokens = json.loads(line[6:])["usage"]["output_tokens"]
        results.append((tokens, start, first, time.monotonic()))

    threads = [threading.Thread(target=one) for _stream in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = max(r[3] for r in results) - min(r[1] for r in results)
    return sum(r[0] for r in results), wall, [(r[0] - 1) / (r[3] - r[2]) for r in results]


@pytest.fixture(scope="module")
def paced_server(tmp_path_factory: pytest.TempPathFactory, lab_tokenizer: Path) -> Iterator[str]:
    """40 tokens/s per stream, 120 tokens/s for the whole server."""
    home = hf_home(tmp_path_factory.mktemp("hf"), lab_tokenizer)
    port = free_port()
    env = {"GLM_STANDIN_TOKENS_PER_SECOND": "40", "GLM_STANDIN_MAX_TOKENS_PER_SECOND": "120"}
    proc = launch(home, "--port", str(port), "--context-length", str(CONTEXT), "--api-key", KEY, env=env)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_a_stream_is_decoded_at_its_rate_until_the_server_saturates(paced_server: str) -> None:
    """One stream gets its own rate (40 tokens/s); six together share the cap (120 tokens/s: 20 each)."""
    _tokens, _wall, alone = timed_streams(paced_server, 1)
    assert alone[0] == pytest.approx(40, rel=0.1)
    tokens, wall, speeds = timed_streams(paced_server, 6)
    assert tokens / wall == pytest.approx(120, rel=0.15)
    for speed in speeds:
        assert speed == pytest.approx(20, rel=0.15)


def test_the_fleets_benchmark_client_measures_the_rate_and_the_cap(paced_server: str) -> None:
    """glm.fleet.serving_bench's client against a server of known speed: one user gets the stream's
    40 tok/s, six saturate the 120 tok/s cap; prompts come out at the asked length as counted by the
    server, outputs at exactly the asked length."""
    target = _serving_load.Target(paced_server, KEY, None, 30)
    words, calibration = _serving_load.words_for([target], MODEL, 300)
    assert calibration["tokens_per_word"] > 0
    alone = level_metrics(
        1, *_serving_load.run_level([target], MODEL, concurrency=1, requests=2, words=words, max_tokens=40, seed=1)
    )
    busy = level_metrics(
        6, *_serving_load.run_level([target], MODEL, concurrency=6, requests=12, words=words, max_tokens=40, seed=2)
    )
    assert busy["busy_output_throughput"] == pytest.approx(120, rel=0.05)
    for level in (alone, busy):
        assert (level["failed"], level["mean_output_tokens"]) == (0, 40.0), level
        assert level["mean_input_tokens"] == pytest.approx(300, abs=3)
    assert alone["per_user_tps"] == pytest.approx(40, rel=0.05)
    assert busy["per_user_tps"] == pytest.approx(20, rel=0.05)
    assert busy["output_throughput"] == pytest.approx(120, rel=0.05)


def test_the_benchmarks_conversations_grow_a_prefix_that_the_server_finds_cached(
    tmp_path: Path, lab_tokenizer: Path
) -> None:
    """glm.fleet.serving_bench's Claude Code profile (its built-in client) against a server with
    --enable-cache-report: each turn sends the whole conversation with the server's answers, so the
    server finds every earlier turn's whole pages cached; a conversation's first request finds the
    system prompt that another conversation sent before it. The part not cached is computed before
    the first token (2,000 tokens/s here: slow enough that a cached turn's first token comes in a
    fraction of the first turn's, with room for a busy machine), so a cached prefix shortens it."""
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    port = free_port()
    proc = launch(home, "--port", str(port), "--context-length", str(CONTEXT), "--api-key", KEY,
                  "--enable-cache-report", env={"GLM_STANDIN_PREFILL_TOKENS_PER_SECOND": "2000"})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        target = _serving_load.Target(url, KEY, None, 30)
        _words, calibration = _serving_load.words_for([target], MODEL, 300)
        per_word = calibration["tokens_per_word"]
        parts = {"system": round(1200 / per_word), "context": round(400 / per_word), "turn": round(200 / per_word)}
        samples, duration, window = _serving_load.run_sessions(
            [target], MODEL, concurrency=1, sessions=2, turns=4, words=parts, max_tokens=16, seed=5
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    level = level_metrics(1, samples, duration, window)
    assert (level["requests"], level["failed"], level["mean_output_tokens"]) == (8, 0, 16.0), level
    by = {(s["session"], s["turn"]): s for s in samples}
    for session in (0, 1):
        for turn in range(1, 4):
            now, before = by[(session, turn)], by[(session, turn - 1)]
            # The new turn (about 200 tokens) and the server's answer before it (16) on top of the last
            # prompt (without the answer it would grow by about 200).
            assert now["input_tokens"] - before["input_tokens"] == pytest.approx(216, abs=8), (session, turn)
            # Every whole page (64 tokens) of the last prompt is found cached.
            assert now["cached_tokens"] >= before["input_tokens"] // 64 * 64 - 64, (session, turn, now, before)
    assert by[(0, 0)]["cached_tokens"] == 0
    first = by[(0, 0)]
    assert first["ttft"] >= first["input_tokens"] / 2000  # about 2,100 tokens computed: 1.05 s at least
    for turn in range(1, 4):  # about 300 tokens computed each: 150 ms
        assert by[(0, turn)]["ttft"] < first["ttft"] / 2, (by[(0, turn)]["ttft"], first["ttft"])
    # The second conversation's first request shares the system prompt (about 1,200 tokens) only.
    assert 1100 <= by[(1, 0)]["cached_tokens"] <= 1300, by[(1, 0)]
    assert level["cached_input_share"] > 0.6
    assert [t["turn"] for t in level["turns"]] == [0, 1, 2, 3]


def test_a_streamed_answer_is_one_token_a_chunk(server: str, lab_tokenizer: Path) -> None:
    status, text = call(
        server, "/v1/messages", {"model": MODEL, "max_tokens": 64, "stream": True, "messages": user("x")}
    )
    assert status == 200
    events = [json.loads(data) for _name, data in sse_events(text)]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    output = next(e for e in events if e["type"] == "message_delta")["usage"]["output_tokens"]
    # One token is the end of the model's thinking (</think>), which the reasoning parser consumes.
    assert len(deltas) == output - 1
    tokenizer = Tokenizer.from_file(str(lab_tokenizer))
    thinking = "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta")
    text = "".join(d["text"] for d in deltas if d["type"] == "text_delta")
    assert thinking
    assert text
    counted = [len(tokenizer.encode(part, add_special_tokens=False).ids) for part in (thinking, text)]
    assert sum(counted) == output - 1


def test_deepgemm_kernels_are_compiled_once_into_the_named_cache(tmp_path: Path, lab_tokenizer: Path) -> None:
    """With SGLANG_DG_CACHE_DIR on a directory that outlives the process, the second start loads
    the kernels the first compiled; without it they would go to ~/.cache/sglang/deep_gemm."""
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    cache = tmp_path / "jit" / "deep_gemm"
    env = {"GLM_STANDIN_JIT_SECONDS": "0.5", "SGLANG_DG_CACHE_DIR": str(cache)}
    outputs = []
    for _start in range(2):
        port = free_port()
        proc = launch(home, "--port", str(port), "--moe-runner-backend", "deep_gemm", env=env)
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        proc.terminate()
        outputs.append(proc.communicate(timeout=10)[0])
    assert "DeepGEMM: compiled glm-standin-kernels-" in outputs[0]
    assert f"into {cache}" in outputs[0]
    assert f"from the JIT cache at {cache}" in outputs[1]
    assert len(list(cache.glob("glm-standin-kernels-*.cubin"))) == 1


def test_a_serving_server_writes_its_triton_cache_at_its_first_chat_request(
    tmp_path: Path, lab_tokenizer: Path
) -> None:
    """As a serving SGLang compiles Triton kernels for shapes it meets while it serves: nothing in
    TRITON_CACHE_DIR after start-up or a /generate request (compile_deep_gemm's), a kernel after the
    first chat request, and no other after the second."""
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    triton = tmp_path / "jit" / "triton"
    port = free_port()
    proc = launch(home, "--port", str(port), "--api-key", KEY, env={"TRITON_CACHE_DIR": str(triton)})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        generate = {"sampling_params": {"max_new_tokens": 4}, "input_ids": [0, 1, 2, 3]}
        assert call(url, "/generate", generate)[0] == 200
        assert not triton.exists()
        chat = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
        for _turn in range(2):
            assert call(url, "/v1/chat/completions", chat)[0] == 200
        assert [p.relative_to(triton).parts[1] for p in triton.glob("glm-standin-lazy-*/*")] == ["kernel.json"]
    finally:
        proc.terminate()
        output = proc.communicate(timeout=10)[0]
    assert output.count("Triton: compiled glm-standin-lazy-") == 1, output[-2000:]


def test_loads_are_sglangs_snapshot_and_count_the_requests_in_flight(server: str) -> None:
    """/v1/loads, what a drain waits on: LoadSnapshot's core fields (read from the pinned wheel's
    load_snapshot.py), the running and waiting requests as they are, the key required, a bad section
    refused with SGLang's message."""
    source = standin_deps.sglang_source(REPO / ".lab" / "cache" / "standin", "sglang/srt/managers/load_snapshot.py")
    struct = re.search(r"class LoadSnapshot\(.*?\n(.*?)\n    VALID_SECTIONS", source.read_text(), re.S)
    assert struct, "the wheel's LoadSnapshot moved"
    fields = re.findall(r"^    (\w+): ", struct.group(1), re.M)
    sections = {"memory", "speculative", "lora", "disaggregation", "queues"}
    status, text = call(server, "/v1/loads?include=core")
    assert status == 200, text
    (load,) = json.loads(text)["loads"]
    assert list(load) == [f for f in fields if f not in sections]
    assert (load["num_running_reqs"], load["num_waiting_reqs"]) == (0, 0)
    assert call(server, "/v1/loads", token=None)[0] == 401
    status, text = call(server, "/v1/loads?include=core,gpu")
    assert status == 400
    assert "Invalid include sections: {'gpu'}" in json.loads(text)["detail"]
    assert json.loads(call(server, "/v1/loads?dp_rank=1")[1])["loads"] == []
    # Two streams on a server that runs one request at a time: one running, one waiting.
    body = {"model": MODEL, "max_tokens": 40, "stream": True, "ignore_eos": True, "messages": user("hi")}
    streams = [threading.Thread(target=call, args=(server, "/v1/chat/completions", body)) for _stream in range(2)]
    for thread in streams:
        thread.start()
    time.sleep(0.3)
    (busy,) = json.loads(call(server, "/v1/loads")[1])["loads"]
    for thread in streams:
        thread.join()
    (idle,) = json.loads(call(server, "/v1/loads")[1])["loads"]
    assert (busy["num_running_reqs"], busy["num_waiting_reqs"]) == (1, 1)
    assert (idle["num_running_reqs"], idle["num_waiting_reqs"]) == (0, 0)


def test_the_port_opens_only_once_the_weights_are_loaded_and_compiled(tmp_path: Path, lab_tokenizer: Path) -> None:
    """SGLang binds its HTTP port after Engine._launch_subprocesses returns (weights loaded, kernels
    compiled): before that a client's connection is refused, not answered with a 503."""
    source = standin_deps.sglang_source(STANDIN_CACHE, "sglang/srt/entrypoints/http_server.py").read_text()
    launch_fn = source[source.index("def launch_server(") :]
    assert launch_fn.index("Engine._launch_subprocesses(") < launch_fn.index("_setup_and_run_http_server(")
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    port = free_port()
    proc = launch(home, "--port", str(port), env={"GLM_STANDIN_LOAD_SECONDS": "2"})
    try:
        time.sleep(0.8)
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        wait_healthy(f"http://127.0.0.1:{port}", proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def precompile(home: Path, cache: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "HF_HOME": str(home),
        "PYTHONPATH": standin_deps.standin_path(STANDIN_CACHE, STANDIN / "sglang", home / "standin"),
        "GLM_STANDIN_LOAD_SECONDS": "0.3",
        "GLM_STANDIN_JIT_SECONDS": "0.5",
        "GLM_STANDIN_COMPILE_POLL_SECONDS": "0.2",
        "GLM_STANDIN_COMPILE_SAFETY_SECONDS": "0.2",
        "NVIDIA_VISIBLE_DEVICES": "0,1,2,3",
        "SGLANG_DG_CACHE_DIR": str(cache),
    }
    argv = [standin_deps.standin_python(), "-s", "-m", "sglang.compile_deep_gemm", "--model-path", MODEL,
            "--revision", REVISION, *args]  # fmt: skip
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_compile_deep_gemm_is_sglangs_script(tmp_path: Path) -> None:
    """The stand-in's constants and messages are the pinned script's: `--timeout` 3600 by default, 10 s
    between polls of an unauthenticated /v1/models, one /generate, the timeout's message."""
    real = standin_deps.sglang_source(STANDIN_CACHE, "sglang/compile_deep_gemm.py").read_text()
    ours = (STANDIN / "sglang" / "compile_deep_gemm.py").read_text()
    assert "timeout: int = 3600" in real
    assert 'os.environ.get("GLM_STANDIN_COMPILE_POLL_SECONDS", "10")' in ours
    assert real.count("time.sleep(10)") == 3  # between polls, waiting for rank 0, after the sync request
    assert 'requests.get(f"{base_url}/v1/models", headers=headers)' in real
    assert '"Content-Type": "application/json; charset=utf-8",\n            }' in real  # no Authorization
    assert 'f"{base_url}/generate"' in real
    assert "timeout=600" in real
    message = "DeepGEMM Kernels compilation timeout.\\n\\nFeel free and please restart the command."
    assert re.sub(r'"\s*"', "", real).count(message) == 1
    assert message in ours
    assert 'multiprocessing.set_start_method("spawn", force=True)' in real  # a non-daemon child, joined at exit
    assert "daemon=True" not in real


def test_compile_deep_gemm_fills_the_cache_the_server_then_loads(tmp_path: Path, lab_tokenizer: Path) -> None:
    """Run with the server's arguments, it compiles the kernels into the named cache and exits 0; the
    server started afterwards with the same arguments loads them instead of compiling."""
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    cache = tmp_path / "jit" / "deep_gemm"
    args = ["--port", str(free_port()), "--tp-size", "4", "--ep-size", "4", "--moe-runner-backend", "deep_gemm"]
    out = precompile(home, cache, *args, "--timeout", "60").communicate(timeout=60)[0]
    assert "DeepGEMM: compiled glm-standin-kernels-" in out, out
    assert "DeepGEMM Kernels compilation finished successfully." in out
    port = free_port()
    env = {"GLM_STANDIN_JIT_SECONDS": "0.5", "SGLANG_DG_CACHE_DIR": str(cache)}
    proc = launch(home, *args[2:], "--port", str(port), env=env)
    wait_healthy(f"http://127.0.0.1:{port}", proc)
    proc.terminate()
    assert f"from the JIT cache at {cache}" in proc.communicate(timeout=10)[0]


def test_compile_deep_gemm_with_an_api_key_polls_until_its_timeout_and_does_not_exit(
    tmp_path: Path, lab_tokenizer: Path
) -> None:
    """The script polls /v1/models without a key: a server with --api-key answers 401 until the
    timeout, and then the script prints its TimeoutError but hangs on its server child."""
    home = hf_home(tmp_path / "hf", lab_tokenizer)
    port = free_port()
    # The 401s need the server up before the timeout: its start takes seconds while `make test`
    # brings the lab up on the same two cores.
    proc = precompile(home, tmp_path / "dg", "--port", str(port), "--api-key", KEY, "--timeout", "12")
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a timing: the machine may be busy
        lines: list[str] = []
        while not any("TimeoutError: DeepGEMM Kernels compilation timeout." in line for line in lines):
            assert time.monotonic() < deadline, lines
            lines.append(proc.stdout.readline() if proc.stdout else "")
        assert any('"status": 401' in line and '"/v1/models"' in line for line in lines), lines
        time.sleep(1)
        assert proc.poll() is None, "the script exited although its server child still runs"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        subprocess.run(["pkill", "-f", "--", f"--port {port}"], check=False)
