"""A server's name may not take a unit or a container the role does not own (security review N13)."""

from __future__ import annotations

from ansible_collections.glm.fleet.plugins.filter.server_name_clashes import server_name_clashes

# systemctl show --property=Id,LoadState,FragmentPath,Description, as systemd 252 prints it.
UNITS = """Id=glm-0.service
Description=SGLang server glm-0 for zai-org/GLM-5.3-Flash (glm.fleet)
LoadState=loaded
FragmentPath=/etc/systemd/system/glm-0.service

Id=docker.service
Description=Docker Application Container Engine
LoadState=loaded
FragmentPath=/lib/systemd/system/docker.service

Id=glm-1.service
Description=glm-1.service
LoadState=not-found
FragmentPath=

Id=web.service
Description=Our web site
LoadState=loaded
FragmentPath=/etc/systemd/system/web.service

Id=masked.service
Description=masked.service
LoadState=masked
FragmentPath=/dev/null
"""


def test_the_roles_own_servers_and_free_names_pass() -> None:
    assert server_name_clashes(["glm-0", "glm-1"], UNITS, ["glm-0", "glm-dcgm-exporter"]) == []


def test_a_unit_of_a_package_or_of_the_site_is_not_taken() -> None:
    problems = server_name_clashes(["docker", "web", "masked"], UNITS, [])
    assert len(problems) == 3
    assert problems[0] == (
        'sglang_server_instances: the server "docker" would replace the unit docker.service, which is not a server of '
        "this role (Docker Application Container Engine, /lib/systemd/system/docker.service): choose another name"
    )
    assert "(Our web site, /etc/systemd/system/web.service)" in problems[1]
    assert "(masked.service, /dev/null)" in problems[2]


def test_a_container_no_server_runs_is_not_removed() -> None:
    (problem,) = server_name_clashes(["glm-1"], UNITS, ["glm-1", "glm-0"])
    assert problem == (
        'sglang_server_instances: the server "glm-1" would remove the container "glm-1", which no server of this role '
        "runs: choose another name, or remove that container if it is a server's left behind"
    )
    # The fleet's own DCGM exporter is a container no server runs, too.
    assert len(server_name_clashes(["glm-dcgm-exporter"], "", ["glm-dcgm-exporter"])) == 1
