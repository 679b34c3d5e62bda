from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The lab's helpers, and this checkout as the glm.fleet collection (collections/ links back here).
sys.path.insert(0, str(REPO / "tests" / "lab"))
sys.path.insert(0, str(REPO / "collections"))

import standin_deps  # noqa: E402 - from tests/lab, put on the path above


def load_file(path: Path) -> ModuleType:
    """A Python file that is not a module of a package (a role's program, a template's helper), loaded."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def lab_tokenizer() -> Path:
    """The lab repository's tokenizer.json (tests/lab/standin_deps.py), cached under .lab/."""
    return standin_deps.tokenizer_json(REPO / ".lab" / "cache" / "standin")


SINGLE = re.compile(r"\{\{ *([A-Za-z_][A-Za-z0-9_]*) *\}\}")


def native(rendered: str) -> Any:
    """A rendered list, mapping or whole number keeps its type, as Ansible's native templating gives it."""
    if rendered.strip().isdigit():
        return int(rendered)
    try:
        return ast.literal_eval(rendered) if rendered.strip()[:1] in ("[", "{") else rendered
    except (ValueError, SyntaxError):
        return rendered


def role_vars(role: str, **inventory: object) -> dict[str, Any]:
    """The variables a role sees, as Ansible gives them: its dependency glm.fleet.deployment's
    defaults, then its own, then what an inventory sets (`inventory`); each default that is a
    template over another variable is resolved (a lone `{{ name }}` keeps the value's type, as
    Ansible's native templating does)."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)  # noqa: S701 - not HTML
    values: dict[str, Any] = {}
    for path in (
        REPO / "roles" / "deployment" / "defaults" / "main.yml",
        REPO / "roles" / role / "defaults" / "main.yml",
    ):
        values.update(yaml.safe_load(path.read_text()) or {})
    values.update(inventory)
    context = {"groups": {"all": []}, "hostvars": {}, **values}  # a one-host play's magic variables

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if not isinstance(value, str) or "{{" not in value:
            return value
        lone = SINGLE.fullmatch(value.strip())
        if lone and lone.group(1) in values:
            return resolve(values[lone.group(1)])
        try:
            return native(env.from_string(value).render(**context))
        except jinja2.UndefinedError:
            return value  # refers to something only a play defines (facts, other hosts)

    return {name: resolve(value) for name, value in values.items()}


# A module's main() run with its exit captured as a result (the modules' tests, tests/unit/plugins/modules/).
class ModuleExit(Exception):
    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result)
        self.result = result


RunMain = Callable[..., dict[str, Any]]


@pytest.fixture
def run_main(mocker: Any) -> RunMain:
    """run_main(main, args, check_mode=False, diff=False): the module's exit_json or fail_json as a
    dict, with `failed` set by which one it called."""

    def leave(_self: Any, **result: Any) -> None:
        raise ModuleExit({"failed": False, **result})

    def fail(_self: Any, **result: Any) -> None:
        raise ModuleExit({"failed": True, **result})

    mocker.patch.object(basic.AnsibleModule, "exit_json", leave)
    mocker.patch.object(basic.AnsibleModule, "fail_json", fail)

    def run(
        main: Callable[[], None], args: dict[str, Any], *, check_mode: bool = False, diff: bool = False
    ) -> dict[str, Any]:
        internal = {"_ansible_check_mode": check_mode, "_ansible_diff": diff}
        with patch_module_args({**args, **internal}), pytest.raises(ModuleExit) as exc:
            main()
        return exc.value.result

    return run
