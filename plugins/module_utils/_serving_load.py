# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Closed-loop load on an OpenAI-compatible chat endpoint: N clients, each sending its next
streamed request as soon as its last one ends, as SGLang's benchmark does with --max-concurrency.

Each request asks for a fixed output length (max_tokens with SGLang's `ignore_eos`) and the usage
of the stream (`stream_options.include_usage`), so token counts are the server's own. Prompts are
made of words in a random order per request, so that no two share a prefix the server could have
cached (SGLang's radix cache would otherwise skip their prefill), and sized from the server's own
count of two probe prompts. Standard library only: it runs on any host Ansible manages.
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Mapping, Sequence

WORDS = [
    "fleet",
    "server",
    "token",
    "model",
    "cache",
    "route",
    "batch",
    "decode",
    "prefill",
    "stream",
    "latency",
    "expert",
    "tensor",
    "kernel",
    "memory",
    "queue",
    "gateway",
    "request",
    "answer",
    "replica",
    "weight",
    "layer",
    "context",
    "budget",
    "signal",
    "window",
    "health",
    "report",
    "metric",
    "alert",
    "engine",
    "signal",
    "vector",
    "matrix",
    "buffer",
    "socket",
    "thread",
    "process",
    "driver",
    "device",
    "cluster",
    "region",
    "rack",
    "node",
    "link",
    "switch",
    "packet",
    "frame",
    "page",
    "block",
    "sector",
    "shard",
    "index",
    "table",
    "column",
]


class Target:
    """One endpoint: a base URL (http or https), the key it wants and the CA that signed it."""

    def __init__(self, url: str, api_key: str | None, ca_file: str | None, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.path = parts.path.rstrip("/") + "/v1/chat/completions"
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_file) if self.https else None

    def connection(self) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.context)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers


def prompt(words: int, seed: int) -> str:
    rng = random.Random(seed)  # noqa: S311 - prompt words, not secrets
    return " ".join(rng.choice(WORDS) for _word in range(max(words, 1)))


def body(model: str, messages: str | list[dict[str, str]], max_tokens: int) -> bytes:
    """A streamed chat completion's body: one user message (a text), or a conversation."""
    return json.dumps({
        "model": model,
        "messages": [{"role": "user", "content": messages}] if isinstance(messages, str) else messages,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }).encode()  # fmt: skip


def stream_chat(
    target: Target,
    model: str,
    messages: str | list[dict[str, str]],
    max_tokens: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """One streamed chat completion, timed: ok, error, input_tokens, cached_tokens (the input the
    server found in its prefix cache, SGLang's --enable-cache-report), output_tokens, ttft, latency,
    itl, and text (the answer's content, which a conversation's next turn sends back)."""
    sample: dict[str, Any] = {"ok": False, "error": None, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                              "ttft": 0.0, "latency": 0.0, "itl": [], "target": target.url, "text": ""}  # fmt: skip
    conn = target.connection()
    start = clock()
    sample["start"] = start
    try:
        conn.request("POST", target.path, body=body(model, messages, max_tokens), headers=target.headers())
        resp = conn.getresponse()
        if resp.status != 200:
            sample["error"] = f"HTTP {resp.status}: {resp.read(300).decode(errors='replace').strip()}"
            return sample
        last = 0.0
        chunks = 0
        usage: dict[str, Any] = {}
        text: list[str] = []
        while True:
            line = resp.readline()
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                sample["error"] = f"error event: {json.dumps(event['error'])[:300]}"
                return sample
            usage = event.get("usage") or usage
            choices = event.get("choices") or []
            delta = (choices[0].get("delta") or {}) if choices else {}
            text.append(delta.get("content") or "")
            # A thinking model (GLM-5.3 under --reasoning-parser) streams its first tokens as
            # reasoning_content: they are tokens, and the first of them is the time to first token.
            if delta.get("content") or delta.get("reasoning_content"):
                now = clock()
                if chunks == 0:
                    sample["ttft"] = now - start
                else:
                    sample["itl"].append(now - last)
                last = now
                chunks += 1
        sample["latency"] = clock() - start
        if not chunks:
            sample["error"] = "the stream ended without a token"
            return sample
        sample.update(_counts(usage, chunks), text="".join(text), ok=True)
        return sample
    except (OSError, http.client.HTTPException, ValueError) as err:
        sample["error"] = f"{type(err).__name__}: {err}"
        sample["latency"] = clock() - start
        return sample
    finally:
        conn.close()


def _counts(usage: dict[str, Any], chunks: int) -> dict[str, int]:
    """A stream's token counts from its usage (the chunks, when the server sent no usage)."""
    return {
        "output_tokens": int(usage.get("completion_tokens") or chunks),
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "cached_tokens": int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
    }


def words_for(targets: Sequence[Target], model: str, input_tokens: int) -> tuple[int, dict[str, float]]:
    """How many prompt words make input_tokens as the server counts them (chat template included):
    a line through two probe prompts' token counts."""
    counts = []
    for words in (32, 256):
        # Two tokens: a thinking model's first may be `</think>`, which its parser streams as nothing.
        sample = stream_chat(targets[0], model, prompt(words, seed=words), 2)
        if not sample["ok"]:
            raise RuntimeError(f"probe request to {targets[0].url} failed: {sample['error']}")
        counts.append(sample["input_tokens"])
    slope = (counts[1] - counts[0]) / (256 - 32)
    base = counts[0] - slope * 32
    if slope <= 0:
        raise RuntimeError(f"the server counted {counts} prompt tokens for 32 and 256 words")
    return max(1, round((input_tokens - base) / slope)), {
        "tokens_per_word": round(slope, 4),
        "template_tokens": round(base, 1),
    }


def closed_loop(
    concurrency: int, units: int, work: Callable[[int], list[dict[str, Any]]]
) -> tuple[list[dict[str, Any]], float, tuple[float, float]]:
    """`units` pieces of work (a request, or a conversation), `concurrency` clients each taking the
    next as soon as its last is done. Returns the samples, the level's duration (first request sent
    to last answer done) and the window in which every client was busy (from the start to the
    moment the first client found no work left)."""
    samples: list[dict[str, Any]] = []
    finished: list[float] = []
    lock = threading.Lock()
    counter = iter(range(units))

    def client() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                with lock:
                    finished.append(time.perf_counter())
                return
            results = work(index)
            with lock:
                samples.extend(results)

    threads = [threading.Thread(target=client, daemon=True) for _client in range(min(concurrency, units))]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples, time.perf_counter() - start, (start, min(finished, default=start))


def run_level(
    targets: Sequence[Target], model: str, *, concurrency: int, requests: int, words: int, max_tokens: int, seed: int
) -> tuple[list[dict[str, Any]], float, tuple[float, float]]:
    """`requests` requests, `concurrency` at a time, spread over the targets in turn (closed_loop)."""

    def request(index: int) -> list[dict[str, Any]]:
        result = stream_chat(targets[index % len(targets)], model, prompt(words, seed + index), max_tokens)
        result.pop("text")
        return [result]

    return closed_loop(concurrency, requests, request)


def conversation_opening(words: Mapping[str, int], session: int, seed: int) -> list[dict[str, str]]:
    """A Claude-Code-shaped session's first request: the system prompt every session shares (Claude
    Code's own, with its tools), the session's own context (the project's instructions, the first
    files read) and its first turn, each of `words[...]` words."""
    return [
        {"role": "system", "content": prompt(words["system"], seed=seed)},
        {"role": "user", "content": prompt(words["context"], seed=seed + 1 + 2 * session)},
        {"role": "user", "content": prompt(words["turn"], seed=seed + 2 + 2 * session)},
    ]


def run_sessions(
    targets: Sequence[Target],
    model: str,
    *,
    concurrency: int,
    sessions: int,
    turns: int,
    words: Mapping[str, int],
    max_tokens: int,
    seed: int,
) -> tuple[list[dict[str, Any]], float, tuple[float, float]]:
    """`sessions` conversations, `concurrency` at a time (closed_loop), each `turns` requests in
    order: every turn sends the whole conversation so far (the shared system prompt, the session's
    context, every earlier turn and the answers the server gave) plus a new turn of `words["turn"]`
    words, as Claude Code does. A session's requests go to one target (a conversation stays where its
    prefix is cached); sessions are spread over the targets in turn. Each sample has its `session`
    and `turn`."""

    def conversation(index: int) -> list[dict[str, Any]]:
        target = targets[index % len(targets)]
        messages = conversation_opening(words, index, seed)
        results = []
        for turn in range(turns):
            result = stream_chat(target, model, messages, max_tokens)
            result.update(session=index, turn=turn)
            results.append(result)
            if not result["ok"]:
                break  # a conversation does not go on past a failed turn
            messages = [
                *messages,
                {"role": "assistant", "content": result.pop("text")},
                {"role": "user", "content": prompt(words["turn"], seed=seed + 3 + 2 * sessions + index * turns + turn)},
            ]
        for result in results:
            result.pop("text", None)
        return results

    return closed_loop(concurrency, sessions, conversation)
