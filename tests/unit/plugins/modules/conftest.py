"""What the modules' tests share: a module's main() run with its exit captured as a result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result)
        self.result = result


RunMain = Callable[..., dict[str, Any]]


@pytest.fixture
def run_main(mocker: Any) -> RunMain:
    """run_main(main, args, check_mode=False): the module's exit_json or fail_json as a dict, with
    `failed` set by which one it called."""

    def leave(_self: Any, **result: Any) -> None:
        raise ModuleExit({"failed": False, **result})

    def fail(_self: Any, **result: Any) -> None:
        raise ModuleExit({"failed": True, **result})

    mocker.patch.object(basic.AnsibleModule, "exit_json", leave)
    mocker.patch.object(basic.AnsibleModule, "fail_json", fail)

    def run(main: Callable[[], None], args: dict[str, Any], *, check_mode: bool = False) -> dict[str, Any]:
        with patch_module_args({**args, "_ansible_check_mode": check_mode}), pytest.raises(ModuleExit) as exc:
            main()
        return exc.value.result

    return run
