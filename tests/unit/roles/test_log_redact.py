"""The sglang_server unit's log redactor keeps the keys SGLang logs at start out of the journal."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO

REDACTOR = REPO / "roles" / "sglang_server" / "files" / "sglang_log_redact.py"


@pytest.fixture(scope="module")
def redactor() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("sglang_log_redact", str(REDACTOR))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def config(tmp_path: Path, **keys: str) -> Path:
    path = tmp_path / "server.yaml"
    path.write_text("# Ansible managed\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in keys.items()))
    return path


def test_keys_are_read_from_the_config_the_role_writes(redactor: ModuleType, tmp_path: Path) -> None:
    path = config(tmp_path, **{"api-key": "sk-serve", "admin-api-key": "sk-admin-longer"})
    assert redactor.read_keys(str(path)) == [b"sk-admin-longer", b"sk-serve"]
    assert redactor.read_keys(str(tmp_path / "absent.yaml")) == []


def test_the_command_runs_with_its_output_redacted_and_its_status_kept(tmp_path: Path) -> None:
    path = config(tmp_path, **{"api-key": "sk-serve", "admin-api-key": "sk-admin"})
    script = (
        "import sys; args = {'api_key': 'sk-serve', 'admin_api_key': 'sk-admin', 'port': 18080};"
        "print(f'server_args={args}', flush=True);"
        "print('Bearer sk-serve', file=sys.stderr, flush=True); sys.exit(3)"
    )
    run = subprocess.run(
        [sys.executable, str(REDACTOR), str(path), "--", sys.executable, "-c", script],
        capture_output=True, check=False, timeout=30,
    )  # fmt: skip
    assert run.returncode == 3
    out = run.stdout.decode()
    assert "sk-serve" not in out
    assert "sk-admin" not in out
    assert "'api_key': '<redacted>', 'admin_api_key': '<redacted>', 'port': 18080" in out
    assert "Bearer <redacted>" in out  # stderr too, in order
