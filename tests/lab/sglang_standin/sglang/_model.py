"""The stand-in's model: the raw GLM-5.3 text it generates, before SGLang's parsers see it.

The GLM-5.3 template ends the prompt with `<|assistant|><think>`, so the model's text starts inside
its reasoning: `REASONING</think>ANSWER`, then any tool calls in GLM's own format,
`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`, one after another.
A value is raw text: a string as it is, anything else as JSON (glm53_chat_template.py renders a
call in a conversation's history the same way).

What it answers, first match wins:
1. a script: a JSON list of raw texts in the file named by GLM_STANDIN_SCRIPT (by default
   /tmp/glm-standin-script), while that file exists; each request takes the next text, the last one
   repeats; a file whose text changed starts again from its first text;
2. a request whose tool_choice forces a tool (a named tool, or "required": the first tool): a call
   of it with a value of each of its schema's properties, as SGLang's constrained decoding makes the
   model write: in GLM's format under `--tool-call-parser glm47`, else the JSON array that
   get_json_schema_constraint (function_call/utils.py) allows;
3. a first user message holding `[glm-lab turns ["RAW", ...]]`: the raw text of the list whose
   index is the number of assistant turns so far (the last one repeats), so that every server of a
   fleet answers a session's turn alike: a whole Claude Code loop scripted from its prompt;
4. a conversation whose last turn is a tool's result: TOOL_DONE;
5. a last user message holding `[glm-lab tool NAME {JSON input}]`: that tool call;
6. otherwise ANSWER.
Rules 2, 4, 5 and 6 think first, as GLM-5.3 always does (python_chat_template.py declares its reasoning
always on): REASONING, then `</think>`. A client that reads only the answer's text from a short
max_tokens gets none, as it would from the real model.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

REASONING = "A greeting; answer in kind."
ANSWER = "Hello from GLM-5.3-Flash, served by the glm.fleet lab stand-in."
TOOL_DONE = "Done: the tool ran and its result came back to the glm.fleet lab stand-in."
TOOL_MARKER = re.compile(r"\[glm-lab tool (\w+) (\{.*?\})\]", re.DOTALL)
TURNS_MARKER = re.compile(r"\[glm-lab turns (\[.*\])\]", re.DOTALL)
SCRIPT_FILE = Path("/tmp/glm-standin-script")  # noqa: S108 - a switch inside the container
END_OF_THINKING = "</think>"
# GLM's special tokens, each one token of its vocabulary (glm53_chat_template.py gives each of the
# template's as a segment of its own); the lab's tokenizer does not know them.
SPECIAL = re.compile(r"\[gMASK\]|<sop>|<\|[a-z]+\|>|</?think>")


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One call in GLM-5.3's raw format."""
    parts = [f"<tool_call>{name}"]
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"<arg_key>{key}</arg_key><arg_value>{text}</arg_value>")
    return "".join(parts) + "</tool_call>"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def schema_value(schema: Any) -> Any:
    """A value of a JSON schema's type, as constrained decoding would let the model write it."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if isinstance(schema, dict) and schema.get("enum"):
        return schema["enum"][0]
    values = {"integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}
    if kind == "object":
        return {key: schema_value(sub) for key, sub in (schema.get("properties") or {}).items()}
    return values.get(kind, "ok")


def forced_tool(request: dict[str, Any]) -> dict[str, Any] | None:
    """The function a request's tool_choice forces, or None (serving_chat.py: a ToolChoice names
    one; "required" takes any, the stand-in's model the first)."""
    tools = [t.get("function") or {} for t in request.get("tools") or []]
    choice = request.get("tool_choice")
    if not tools:
        return None
    if choice == "required":
        return tools[0]
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == name), None)
    return None


def default_reply(request: dict[str, Any], native_tool_calls: bool = True) -> str:
    """Rules 2 to 6 over the request as SGLang sees it (OpenAI roles: a tool's result is a `tool`
    message; Claude Code may put a `system` message after the user's)."""
    think = REASONING + END_OF_THINKING
    forced = forced_tool(request)
    if forced is not None:
        arguments = schema_value({"type": "object", **(forced.get("parameters") or {})})
        if native_tool_calls:
            return think + tool_call(forced.get("name", ""), arguments)
        return think + json.dumps([{"name": forced.get("name"), "parameters": arguments}])
    turns = [m for m in request.get("messages") or [] if m.get("role") != "system"]
    users = [m for m in turns if m.get("role") == "user"]
    scripted = TURNS_MARKER.search(_text(users[0].get("content"))) if users else None
    if scripted:
        texts = json.loads(scripted.group(1))
        done = sum(1 for m in turns if m.get("role") == "assistant")
        return str(texts[min(done, len(texts) - 1)])
    if turns and turns[-1].get("role") == "tool":
        return think + TOOL_DONE
    found = TOOL_MARKER.search(_text(users[-1].get("content"))) if users else None
    if found:
        return think + tool_call(found.group(1), json.loads(found.group(2)))
    return think + ANSWER


class Script:
    """Rule 1: the scripted raw replies, taken in turn by the requests (any thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: str | None = None
        self.replies: list[str] = []
        self.next = 0

    def path(self) -> Path | None:
        path = Path(os.environ.get("GLM_STANDIN_SCRIPT") or SCRIPT_FILE)
        return path if path.exists() else None

    def take(self) -> str | None:
        path = self.path()
        if path is None:
            return None
        with self.lock:
            key = path.read_text()
            if key != self.seen:
                replies = json.loads(key)
                if not isinstance(replies, list) or not replies or not all(isinstance(r, str) for r in replies):
                    raise ValueError(f"{path}: a script is a JSON list of raw model texts (strings)")
                self.seen, self.replies, self.next = key, replies, 0
            reply = self.replies[min(self.next, len(self.replies) - 1)]
            self.next += 1
            return reply


SCRIPT = Script()


def reply(request: dict[str, Any], native_tool_calls: bool = True) -> str:
    scripted = SCRIPT.take()
    return scripted if scripted is not None else default_reply(request, native_tool_calls)
