"""The glm.fleet lab: a fleet of systemd hosts on one machine, reached over SSH (this package;
`tests/lab/lab.py` is its command line and the names tests use).

    python tests/lab/lab.py up [--gpu-nodes N]    start (or restart) the lab, write inventories/lab/hosts.yml
    python tests/lab/lab.py down                  remove every container, volume, network and process it made
    python tests/lab/lab.py status                print the lab state as JSON
    python tests/lab/lab.py standin [--port P] [--script FILE] [-- ARGS]
                                                  the SGLang stand-in alone, answering with FILE's raw texts

Each node is a container whose PID 1 is systemd, built from a Debian 12 root bootstrapped on this
machine (no image can be pulled here) and started with least-privilege flags (privileged mode is
not available). Each node has its own docker volume for /var/lib/docker, so roles can install and
run a docker engine inside it. The controller reaches the nodes over SSH with a key generated for
the lab and host keys collected from the nodes (strict host key checking stays on).

Services on the lab network's gateway (172.30.253.1), started by `services` and by `up`:
- :5000, Debian's docker-registry, the site's Docker Hub mirror: nodes whose daemon.json lists it
  under registry-mirrors pull `lmsysorg/...@sha256:...` through it;
- :8080, a static HTTP server for the stand-ins of unreachable upstreams: /nvidia/ is a signed apt
  repository in the shape of NVIDIA's libnvidia-container repository (tests/lab/aptrepo.py), and
  /wheels/ the download client's wheels (from PyPI, which the nodes cannot reach);
- :5001, a second docker-registry that needs a login (htpasswd), a team's private registry, with a
  16 MB image; the nodes reach it through :5002, a 2 MB/s link (tests/lab/slowlink.py);
- :8090, the Hugging Face Hub stand-in (tests/lab/hub_standin.py) with the gated model repository,
  a per-lab token, byte counters and fault injection;
- :18099, the SGLang stand-in itself (one GPU, the lab's API key, metrics on), for the molecule
  scenarios that route to or scrape a server without a GPU node (gateway, monitoring).

Nodes: gpu-N (172.30.253.10+N), the site cache cache-1 (172.30.253.50; also the fleet's first
gateway and its monitoring), the second gateway gateway-2 (.51; the two share the floating address
.60, the laptops' front door) and laptop-1 (.100).

GPU nodes also get the lab's stand-in NVIDIA driver tools: an `nvidia-smi` that reports a 4x B200
half HGX system (gpu-2: a full 8x B200 board, which runs two servers) and a fabric manager unit, so
preflight sees the machines of the deployment recipe.

Modules: `config` (names, addresses, paths), `shell` (commands, daemons, the docker engine), `image`
(the node image and the images pushed to the registries), `gateway` (the services on the gateway),
`nodes` (the systemd nodes and their inventory), `cli` (up, down, status).
"""

from __future__ import annotations

USAGE = __doc__
