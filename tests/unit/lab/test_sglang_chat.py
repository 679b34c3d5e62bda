"""The stand-in's chat path is SGLang's: raw GLM-5.3 text in, what Claude Code and the OpenAI SDK
receive out, through SGLang 0.5.23's own template, reasoning parser, tool-call detector and
Anthropic adapter (tests/lab/sglang_standin/sglang/_chat.py).

Each test scripts the model's raw text (GLM_STANDIN_SCRIPT, docs/testing.md) and checks the answer
with the `anthropic` and `openai` SDKs' own types, streamed and not. The last tests keep the mirror
honest: the SGLang files the stand-in runs are the wheel's bytes, and every method of
serving_chat.py that the mirror cites is still at the cited line of the pinned wheel.
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
import standin_deps
from test_sglang_standin import (
    KEY,
    MODEL,
    PARSERS,
    STANDIN,
    STANDIN_CACHE,
    claude,
    free_port,
    gpt,
    hf_home,
    launch,
    user,
    wait_healthy,
)

from ansible_collections.glm.fleet.plugins.module_utils import _sglang_health

READ = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {
        "type": "object",
        "properties": {
            "file_path": {"type": "string"},
            "limit": {"type": "integer"},
            "ratio": {"type": "number"},
            "force": {"type": "boolean"},
            "lines": {"type": "array"},
            "options": {"type": "object"},
            "version": {"type": "string"},
        },
        "required": ["file_path"],
    },
}
GREP = {
    "name": "Grep",
    "description": "Search files",
    "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}},
}
BASH = {
    "name": "Bash",
    "description": "Run a command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}},
}
LIST = {"name": "List", "description": "List the directory", "input_schema": {"type": "object", "properties": {}}}
TOOLS = [READ, GREP, BASH, LIST]


def call(name: str, arguments: dict[str, str]) -> str:
    """One call in GLM-5.3's raw format, its values as the model writes them (raw text)."""
    pairs = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in arguments.items())
    return f"<tool_call>{name}{pairs}</tool_call>"


class Scripted:
    def __init__(self, url: str, script: Path) -> None:
        self.url, self.script = url, script

    def say(self, *raw: str) -> None:
        """The model's next raw texts, one per request (the last repeats)."""
        self.script.write_text(json.dumps(list(raw)))


def start(
    tmp: Path, lab_tokenizer: Path, *args: str, parsers: tuple[str, ...] = PARSERS
) -> tuple[subprocess.Popen[str], Scripted]:
    home = hf_home(tmp / "hf", lab_tokenizer)
    script = tmp / "script.json"
    script.write_text(json.dumps(["</think>ready"]))
    port = free_port()
    proc = launch(
        home, "--port", str(port), "--context-length", "8192", "--api-key", KEY, *args,
        env={"GLM_STANDIN_SCRIPT": str(script)}, parsers=parsers,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc)
    return proc, Scripted(url, script)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, lab_tokenizer: Path) -> Iterator[Scripted]:
    proc, scripted = start(tmp_path_factory.mktemp("chat"), lab_tokenizer)
    yield scripted
    proc.terminate()
    proc.wait(timeout=10)


def both(model: Scripted, raw: str, max_tokens: int = 1024) -> list[anthropic.types.Message]:
    """The same raw text answered as JSON and as a stream (read into a Message by the SDK)."""
    client = claude(model.url)
    model.say(raw, raw)
    whole = client.messages.create(model=MODEL, max_tokens=max_tokens, messages=user("go"), tools=TOOLS)
    with client.messages.stream(model=MODEL, max_tokens=max_tokens, messages=user("go"), tools=TOOLS) as s:
        streamed = s.get_final_message()
    return [whole, streamed]


def blocks(message: anthropic.types.Message) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for b in message.content:
        if b.type == "thinking":
            out.append(("thinking", b.thinking))
        elif b.type == "text":
            out.append(("text", b.text))
        elif b.type == "tool_use":
            out.append((b.name, b.input))
    return out


def test_thinking_then_text(model: Scripted) -> None:
    for message in both(model, "The user wants a greeting.</think>Hello, fleet."):
        assert blocks(message) == [("thinking", "The user wants a greeting."), ("text", "Hello, fleet.")]
        assert message.stop_reason == "end_turn"
    model.say("The user wants a greeting.</think>Hello, fleet.")
    completion = gpt(model.url).chat.completions.create(model=MODEL, max_tokens=64, messages=user("go"))  # type: ignore[arg-type]
    message = completion.choices[0].message
    assert (message.content, message.model_extra["reasoning_content"]) == (
        "Hello, fleet.",
        "The user wants a greeting.",
    )


@pytest.mark.parametrize("count", [2, 3])
def test_parallel_tool_calls_stay_separate(model: Scripted, count: int) -> None:
    """SGLang #39782 merged parallel calls in the Anthropic stream; #33901 lost a second complete
    call in one increment. Each call is its own tool_use block with its own id, in order."""
    calls = [
        ("Read", {"file_path": "/src/app.py"}, {"file_path": "/src/app.py"}),
        ("Grep", {"pattern": "TODO", "path": "/src"}, {"pattern": "TODO", "path": "/src"}),
        ("Bash", {"command": "ls -la", "timeout": "30"}, {"command": "ls -la", "timeout": 30}),
    ][:count]
    raw = "I need to look around.</think>" + "".join(call(name, args) for name, args, _typed in calls)
    for message in both(model, raw):
        assert blocks(message) == [("thinking", "I need to look around."), *((n, t) for n, _a, t in calls)]
        ids = [b.id for b in message.content if b.type == "tool_use"]
        assert len(set(ids)) == count
        assert message.stop_reason == "tool_use"
    model.say(raw)
    completion = gpt(model.url).chat.completions.create(
        model=MODEL, max_tokens=256, messages=user("go"),  # type: ignore[arg-type]
        tools=[{"type": "function", "function": {"name": t["name"], "parameters": t["input_schema"]}} for t in TOOLS],
    )  # fmt: skip
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    got = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
    assert got == [(n, t) for n, _a, t in calls]


def test_two_whole_calls_in_the_last_streamed_output_lose_the_second(tmp_path: Path, lab_tokenizer: Path) -> None:
    """SGLang #33901, still in 0.5.23: the glm47 detector parses one call per increment and keeps
    the rest in its buffer, which nothing reads once the stream ends. At SGLang's default
    --stream-interval 1 (the fleet's) an increment is one token and never holds a whole call
    (test_parallel_tool_calls_stay_separate); at 128 the scheduler sends this reply's first token,
    then the other 67 as one output, and the second call in it never reaches a streaming client,
    while the JSON answer has both (docs/testing.md)."""
    proc, model = start(tmp_path, lab_tokenizer, "--stream-interval", "128")
    try:
        raw = "Two things.</think>" + call("Read", {"file_path": "/a"}) + call("Grep", {"pattern": "b"})
        whole, streamed = both(model, raw)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    read, grep = ("Read", {"file_path": "/a"}), ("Grep", {"pattern": "b"})
    assert blocks(whole) == [("thinking", "Two things."), read, grep]
    assert blocks(streamed) == [("thinking", "Two things."), read]
    assert streamed.stop_reason == "tool_use"


def test_arguments_are_typed_by_the_tools_schema(model: Scripted) -> None:
    """SGLang #35564 streamed integers as strings. Values are raw text typed by the schema: a
    string that looks like a number stays a string."""
    raw = "</think>" + call("Read", {
        "file_path": "/etc/hosts", "limit": "10", "ratio": "0.5", "force": "true", "lines": '[1, "two"]',
        "options": '{"follow": false, "depth": 2}', "version": "42",
    })  # fmt: skip
    typed = {
        "file_path": "/etc/hosts", "limit": 10, "ratio": 0.5, "force": True, "lines": [1, "two"],
        "options": {"follow": False, "depth": 2}, "version": "42",
    }  # fmt: skip
    for message in both(model, raw):
        assert blocks(message) == [("Read", typed)]


def test_a_call_without_arguments(model: Scripted) -> None:
    for message in both(model, "</think>" + call("List", {})):
        assert blocks(message) == [("List", {})]
        assert message.stop_reason == "tool_use"


def test_an_argument_with_quotes_newlines_and_markup_comes_back_whole(model: Scripted) -> None:
    command = 'printf "%s\\n" \'a "quoted" word\'\necho "</arg_val>" <arg_key done'
    for message in both(model, "</think>" + call("Bash", {"command": command})):
        assert blocks(message) == [("Bash", {"command": command})]


def test_a_reply_cut_inside_a_tool_call_is_what_sglang_makes_of_it(model: Scripted) -> None:
    """max_tokens ends the text inside a call. SGLang 0.5.23 answers "max_tokens" both ways: as
    JSON with the unfinished call as text, as a stream with a tool_use block whose input is `{}`:
    glm47 streams a value only once it is whole, and _check_for_unstreamed_tool_args closes the
    object at the end. docs/testing.md says how a site avoids it: an output budget that a tool call
    fits (CLAUDE_CODE_MAX_OUTPUT_TOKENS from the fleet's profile)."""
    raw = "</think>" + call("Read", {"file_path": "/a/long/path/to/a/file.txt", "limit": "10"})
    model.say(raw, raw)
    client = claude(model.url)
    whole = client.messages.create(model=MODEL, max_tokens=16, messages=user("go"), tools=TOOLS)
    assert whole.stop_reason == "max_tokens"
    assert [b.type for b in whole.content] == ["text"]
    assert whole.content[0].text.startswith("<tool_call>Read")  # type: ignore[union-attr]
    with client.messages.stream(model=MODEL, max_tokens=16, messages=user("go"), tools=TOOLS) as s:
        events = list(s)
    assert [e.type for e in events if e.type == "content_block_start"] == ["content_block_start"]
    partial = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta")  # type: ignore[union-attr]
    assert partial == "{}"  # the name arrives, its arguments do not
    assert next(e for e in events if e.type == "message_delta").delta.stop_reason == "max_tokens"  # type: ignore[union-attr]


def test_without_the_tool_parser_a_call_reaches_the_client_as_text(tmp_path: Path, lab_tokenizer: Path) -> None:
    """A server started without `--tool-call-parser glm47` hands the model's raw call to the client:
    no tool_use, so Claude Code cannot run a tool (what the health gate must catch)."""
    proc, scripted = start(tmp_path, lab_tokenizer, parsers=("--reasoning-parser", "glm45"))
    try:
        raw = "</think>" + call("Read", {"file_path": "/etc/hosts"})
        scripted.say(raw)
        message = claude(scripted.url).messages.create(model=MODEL, max_tokens=256, messages=user("go"), tools=TOOLS)
        assert [b.type for b in message.content] == ["text"]
        assert message.content[0].text == raw.removeprefix("</think>")  # type: ignore[union-attr]
        assert message.stop_reason == "end_turn"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_thinking_can_be_asked_for_but_not_turned_off(model: Scripted) -> None:
    """Claude Code with MAX_THINKING_TOKENS sends `thinking`; GLM-5.3's reasoning is always on, so
    SGLang accepts "enabled" and refuses "disabled" (serving_chat.py apply_reasoning_enabled)."""
    client = claude(model.url)
    model.say("Think.</think>Thought.")
    message = client.messages.create(
        model=MODEL, max_tokens=2048, messages=user("go"), thinking={"type": "enabled", "budget_tokens": 1024}
    )
    assert blocks(message) == [("thinking", "Think."), ("text", "Thought.")]
    with pytest.raises(anthropic.BadRequestError, match="always-on and cannot be disabled"):
        client.messages.create(model=MODEL, max_tokens=64, messages=user("go"), thinking={"type": "disabled"})


def test_a_forced_tool_is_called_with_values_of_its_schema(model: Scripted) -> None:
    """tool_choice naming a tool: SGLang constrains the model to call it (rule 2 of _model.py)."""
    model.script.unlink(missing_ok=True)
    try:
        message = claude(model.url).messages.create(
            model=MODEL, max_tokens=256, messages=user("go"), tools=TOOLS, tool_choice={"type": "tool", "name": "Bash"}
        )
    finally:
        model.say("</think>ready")
    assert [(b.type, getattr(b, "name", None)) for b in message.content] == [("thinking", None), ("tool_use", "Bash")]
    assert message.content[1].input == {"command": "ok", "timeout": 1}  # type: ignore[union-attr]


def test_a_session_scripted_in_its_prompt_takes_the_turn_its_history_has_reached(model: Scripted) -> None:
    """Rule 3 of _model.py: any server of a fleet answers a session's nth turn with the nth text."""
    model.script.unlink(missing_ok=True)
    turns = ["Look.</think>" + call("List", {}), "Seen.</think>Finished."]
    prompt = f"work [glm-lab turns {json.dumps(turns)}]"
    client = claude(model.url)
    try:
        first = client.messages.create(model=MODEL, max_tokens=256, messages=user(prompt), tools=TOOLS)
        (listed,) = [b for b in first.content if b.type == "tool_use"]
        history = [
            *user(prompt),
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": listed.id, "content": "a b"}]},
        ]
        second = client.messages.create(model=MODEL, max_tokens=256, messages=history, tools=TOOLS)
    finally:
        model.say("</think>ready")
    assert blocks(first) == [("thinking", "Look."), ("List", {})]
    assert blocks(second) == [("thinking", "Seen."), ("text", "Finished.")]


def health(url: str) -> dict[str, Any]:
    port = int(url.rsplit(":", 1)[1])
    params = {"host": "127.0.0.1", "api_key": KEY, "served_model_name": MODEL, "timeout": 0, "request_timeout": 10}
    return _sglang_health.probe(params, port)


def test_the_health_gate_passes_a_server_with_the_recipes_parsers(model: Scripted) -> None:
    model.script.unlink(missing_ok=True)
    try:
        report = health(model.url)
    finally:
        model.say("</think>ready")
    assert report["ready"], report.get("msg")
    assert report["checks"]["tool_use"]["detail"] == (
        'JSON: glm_fleet_health({"ready": true, "requests": 1}); '
        'stream: glm_fleet_health({"ready": true, "requests": 1})'
    )
    assert report["checks"]["messages"]["detail"] == "streamed: A greeting; answer in kind."  # 8 tokens: no answer yet


@pytest.mark.parametrize(
    ("parsers", "says"),
    [
        (
            ("--reasoning-parser", "glm45"),
            "came back as text, not tool_use (.*): start the server with --tool-call-parser glm47",
        ),
        (
            ("--tool-call-parser", "glm47"),
            "thinking came back as text (.*): start the server with --reasoning-parser glm45",
        ),
    ],
)
def test_the_health_gate_fails_a_server_without_the_recipes_parsers(
    tmp_path: Path, lab_tokenizer: Path, parsers: tuple[str, ...], says: str
) -> None:
    proc, scripted = start(tmp_path, lab_tokenizer, parsers=parsers)
    scripted.script.unlink()
    try:
        report = health(scripted.url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert report["failed_check"] == "tool_use"
    assert re.search("check tool_use failed: JSON: .*" + says, report["msg"]), report["msg"]


def test_the_prompt_is_the_glm53_template(model: Scripted) -> None:
    """count_tokens follows the template: the tools' JSON in the system turn counts."""
    client = claude(model.url)
    bare = client.messages.count_tokens(model=MODEL, messages=user("go")).input_tokens
    with_tools = client.messages.count_tokens(model=MODEL, messages=user("go"), tools=TOOLS).input_tokens  # type: ignore[arg-type]
    assert with_tools - bare > len(json.dumps(TOOLS)) / 8  # the schemas are in the prompt


# --- the mirror and the wheel -------------------------------------------------------------------

CHAT = STANDIN / "sglang" / "_chat.py"


def test_the_stand_in_runs_sglangs_files_as_the_wheel_has_them() -> None:
    site = standin_deps.chat_site(STANDIN_CACHE)
    with zipfile.ZipFile(STANDIN_CACHE / standin_deps.SGLANG_WHEEL.filename) as wheel:
        for member in standin_deps.SGLANG_CHAT_FILES:
            assert (site / member).read_bytes() == wheel.read(member), member
    follows = re.search(r'^FOLLOWS = "([^"]+)"', CHAT.read_text(), re.MULTILINE)
    assert follows is not None
    # One version: the pinned wheel's. A new pin fails here until the mirror follows it.
    assert standin_deps.SGLANG_WHEEL.requirement == f"sglang=={follows.group(1)}"


def test_every_cited_method_is_at_its_line_in_the_wheel() -> None:
    """`serving_chat.py 641-650 _effective_tools`: line 641 of the pinned wheel's file defines it."""
    sources = {
        "serving_chat.py": "sglang/srt/entrypoints/openai/serving_chat.py",
        "serving_base.py": "sglang/srt/entrypoints/openai/serving_base.py",
        "http_server.py": "sglang/srt/entrypoints/http_server.py",
        "utils.py": "sglang/srt/entrypoints/openai/utils.py",
        "output_streamer.py": "sglang/srt/managers/scheduler_components/output_streamer.py",
    }
    text = CHAT.read_text()
    files = "|".join(re.escape(name) for name in sources)
    cited = re.findall(rf"({files}) (\d+)(?:-\d+)? (\w+)", text)
    assert len(cited) >= 15
    for name, line, method in cited:
        lines = standin_deps.sglang_source(STANDIN_CACHE, sources[name]).read_text().splitlines()
        assert re.search(rf"def {method}\(", lines[int(line) - 1]), (
            f"{name}:{line} is not {method}: {lines[int(line) - 1]!r}"
        )


def test_the_image_and_the_tests_run_the_same_stand_in(tmp_path: Path) -> None:
    """standin_path lays the stand-in's modules beside SGLang's files as the image does."""
    path = standin_deps.standin_path(STANDIN_CACHE, STANDIN / "sglang", tmp_path)
    package = tmp_path / "sglang"
    assert {p.name for p in package.iterdir()} >= {"launch_server.py", "_chat.py", "_model.py", "srt", "version.py"}
    assert path.split(":")[1] == str(standin_deps.chat_site(STANDIN_CACHE))
    assert PARSERS == ("--reasoning-parser", "glm45", "--tool-call-parser", "glm47")
