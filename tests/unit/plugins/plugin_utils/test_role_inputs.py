"""The inputs of a role, as the digest its receipt is compared by: code, settings, distribution."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from ansible_collections.glm.fleet.plugins.plugin_utils import _role_inputs

ROOT = _role_inputs.collection_root()
SECRET = re.compile(r"(token|password|api_key|_tls_key)$")


def test_a_role_brings_the_roles_it_depends_on() -> None:
    assert _role_inputs.closure(ROOT, "sglang_image") == ["sglang_image", "deployment"]
    assert _role_inputs.closure(ROOT, "nvidia_container_toolkit") == ["nvidia_container_toolkit"]


def test_every_entry_points_options_count(tmp_path: Path) -> None:
    meta = tmp_path / "roles" / "r" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      r_a: {type: str}\n"
        "  other:\n    options:\n      r_b: {type: int}\n"
    )
    assert set(_role_inputs.options(tmp_path, "r")) == {"r_a", "r_b"}


def test_a_role_says_whether_its_receipt_covers_its_secrets() -> None:
    assert _role_inputs.receipt_secrets(ROOT, "sglang_server") is True
    assert _role_inputs.receipt_secrets(ROOT, "model_weights") is False


def test_secrets_are_marked_no_log_and_left_out_of_the_settings() -> None:
    for spec_path in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_path.parts[-3]
        for name, spec in _role_inputs.options(ROOT, role).items():
            if SECRET.search(name):
                assert spec.get("no_log") is True, f"{role}: {name} holds a secret and is not no_log"
    values = _role_inputs.settings(ROOT, ["sglang_image", "model_weights"], lambda name, default: default)
    assert "sglang_image_registry_password" not in values
    assert "model_weights_hf_token" not in values
    assert values["sglang_image_keep_previous"] == 1


def test_a_role_that_writes_its_secrets_into_files_asks_for_them() -> None:
    values = _role_inputs.settings(ROOT, ["sglang_server"], lambda name, default: default, secrets=True)
    assert {"sglang_server_api_key", "sglang_server_admin_api_key"} <= set(values)


def test_the_host_value_wins_over_the_default() -> None:
    def value(name: str, default: object) -> object:
        return "9.9.9-1" if name == "nvidia_container_toolkit_version" else default

    values = _role_inputs.settings(ROOT, ["nvidia_container_toolkit"], value)
    assert values["nvidia_container_toolkit_version"] == "9.9.9-1"
    assert values["nvidia_container_toolkit_default_runtime"] is False


def copy(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    for part in ("roles/deployment", "roles/sglang_image", "roles/nvidia_container_toolkit", "plugins"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_code_digest_follows_the_roles_and_plugins_files(tmp_path: Path) -> None:
    root = copy(tmp_path)
    base = _role_inputs.code_digest(root, ["sglang_image", "deployment"])
    assert base == _role_inputs.code_digest(root, ["sglang_image", "deployment"])
    other_role = root / "roles" / "nvidia_container_toolkit" / "tasks" / "main.yml"
    other_role.write_text(other_role.read_text() + "\n")
    assert _role_inputs.code_digest(root, ["sglang_image", "deployment"]) == base
    for changed in (root / "roles" / "deployment" / "defaults" / "main.yml", root / "plugins" / "filter" / "disk.py"):
        original = changed.read_text()
        changed.write_text(original + "\n# changed\n")
        assert _role_inputs.code_digest(root, ["sglang_image", "deployment"]) != base, changed
        changed.write_text(original)
    assert _role_inputs.code_digest(root, ["sglang_image", "deployment"]) == base


def test_the_inputs_digest_follows_code_and_settings() -> None:
    base = _role_inputs.inputs_digest("c", {"a": 1, "b": [1]})
    assert _role_inputs.inputs_digest("c", {"b": [1], "a": 1}) == base
    assert _role_inputs.inputs_digest("c", {"a": 2, "b": [1]}) != base
    assert _role_inputs.inputs_digest("d", {"a": 1, "b": [1]}) != base


def test_a_role_that_does_not_exist_is_named() -> None:
    with pytest.raises(ValueError, match=r"glm\.fleet has no role 'no_such_role'"):
        _role_inputs.closure(ROOT, "no_such_role")


def test_the_receipts_roles_argument_specs_equal_their_defaults() -> None:
    # The plan reads defaults from argument_specs; a role that records a receipt must not differ.
    for role in ("nvidia_container_toolkit", "sglang_image", "model_weights", "monitoring", "deployment"):
        defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
        for name, spec in _role_inputs.options(ROOT, role).items():
            if "default" in spec:
                assert spec["default"] == defaults.get(name), f"{role}: {name}"


def test_a_default_the_spec_describes_in_words_comes_from_the_defaults_file() -> None:
    """A number derived from another variable has no typed default in the spec (antsibull-docs refuses
    a template there); the receipt's read, outside the role, takes it from defaults/main.yml, as the
    role itself does, so the digest read equals the digest recorded."""
    spec = _role_inputs.options(ROOT, "sglang_server")["sglang_server_tp_size"]
    assert "default" not in spec
    values = _role_inputs.settings(ROOT, ["sglang_server"], lambda name, default: default)
    assert values["sglang_server_tp_size"] == "{{ deployment_tp_size }}"
    assert values["sglang_server_context_length"] == "{{ deployment_context_length }}"
