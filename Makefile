# glm.fleet: set-up, lab and checks. Two commands on a fresh Debian/Ubuntu machine, as root:
#   make lab    install what is needed, start the lab, run site.yml against it
#   make test   run every check (lint, sanity, unit, molecule, integration)
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The development venv's Python: the newest ansible-core (requirements.txt) needs 3.12 or newer on the
# controller. Found on PATH, in /usr/local/bin or under pyenv; PYTHON=... picks another.
PYTHON_VERSION := 3.13
PYTHON ?= $(shell tools/find_python.sh $(PYTHON_VERSION))
# X.Y of the venv's Python, for ansible-test's --python.
VENV_PYTHON = $(shell $(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_NOCOLOR := 1
export PY_COLORS := 0
GLM_LAB_GPU_NODES ?= 2
export GLM_LAB_GPU_NODES
DEBIAN_PACKAGES := debootstrap docker-registry apache2-utils busybox-static apt-utils gnupg openssh-client rsync git python3-venv
# The distribution's docker engine, unless an engine (docker-ce, docker.io) is installed already.
DOCKER_PACKAGE := $(if $(shell command -v dockerd),,docker.io)
SANITY_ROOT := build/sanity/ansible_collections/glm/fleet
# Scenarios run in this many lanes at once (tools/molecule_lanes.py): a scenario waits on systemd,
# docker and SSH as much as it computes, so three lanes finish sooner on two cores than two.
MOLECULE_LANES ?= 3
# Longest first (as measured on this machine), then any other scenario: the lanes finish close together.
MOLECULE_LONGEST_FIRST := sglang_server gateway nvidia_container_toolkit sglang_image model_weights monitoring claude_code preflight
MOLECULE_SCENARIOS := $(filter $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))),$(MOLECULE_LONGEST_FIRST)) \
  $(filter-out $(MOLECULE_LONGEST_FIRST),$(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))))

.PHONY: help deps venv engine lab lab-up lab-down lab-status site test check lint collection-copy sanity unit matrix molecule molecule-scenarios integration integration-tests build clean bench client-lock docs dashboards ee

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## Debian packages for the lab (docker engine, debootstrap, registry)
	@missing=$$(for p in $(DEBIAN_PACKAGES) $(DOCKER_PACKAGE); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; apt-get update -q; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: requirements.txt
	@test -n "$(PYTHON)" || { echo "make: no working Python $(PYTHON_VERSION) (with venv) found; install one or set PYTHON=" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	touch $@

venv: $(VENV)/.installed ## Python venv with the pinned controller packages

engine: deps venv ## a running docker engine on this machine
	$(BIN)/python tests/lab/lab.py engine

lab-up: engine ## start (or restart) the lab fleet
	$(BIN)/python tests/lab/lab.py up --gpu-nodes $(GLM_LAB_GPU_NODES)

lab-down: venv ## remove every container, volume, network and process of the lab
	$(BIN)/python tests/lab/lab.py down

lab-status: venv
	$(BIN)/python tests/lab/lab.py status

site: venv ## run site.yml against the running lab
	ansible-playbook site.yml -i inventories/lab

lab: lab-up site ## install everything, start the lab and run site.yml against it

check: lint sanity unit ## fast lane: lint, sanity and unit tests

lint: venv
	yamllint --strict .
	ruff format --check .
	ruff check .
	ansible-lint --profile production --strict

collection-copy: venv ## a clean copy of the collection under build/, where ansible-test runs
	rm -rf build/sanity && mkdir -p $(SANITY_ROOT)
	git ls-files -z --cached --others --exclude-standard | grep -zvE '^collections/' \
	  | rsync -a --from0 --files-from=- ./ $(SANITY_ROOT)/
	cd $(SANITY_ROOT) && git init -q && git add -A  # its own repository: build/ is ignored by ours

sanity: collection-copy ## ansible-test sanity and antsibull-docs' lint on a clean copy of the collection
	$(BIN)/python tests/sanity_bootstrap.py
	start=$$(date +%s); cd $(SANITY_ROOT) && ansible-test sanity --local --python $(VENV_PYTHON) --color no; \
	  echo "make: sanity took $$(( $$(date +%s) - start )) s"
	cd $(SANITY_ROOT) && antsibull-docs lint-collection-docs --plugin-docs .

# Every unit test once: the plugins' (tests/unit/plugins/, laid out as plugins/) with ansible-test
# units, as the collection's users and Ansible's tooling run them; the others with pytest.
unit: collection-copy
	pytest -n 2 tests/unit --ignore=tests/unit/plugins
	cd $(SANITY_ROOT) && ansible-test units --local --python $(VENV_PYTHON) --color no tests/unit/plugins/

# The older ansible-core releases of the support matrix (tests/ansible-core-matrix.txt), each in a venv
# of its own: sanity and unit tests as `make sanity unit` runs them on requirements.txt's, the newest.
matrix: venv ## sanity and unit tests on every other ansible-core of the support matrix
	$(BESIDE_NICE) $(BIN)/python tools/core_matrix.py

molecule: engine ## every molecule scenario (systemd containers from the lab image)
	$(BIN)/python tests/lab/lab.py image
	$(BIN)/python tests/lab/lab.py services
	$(MAKE) --no-print-directory molecule-scenarios

# Scenarios (SCENARIOS, default all) on the lab's services as they run (`lab.py services` restarts them).
SCENARIOS ?= $(MOLECULE_SCENARIOS)
molecule-scenarios: venv
	$(BESIDE_NICE) $(BIN)/python tools/molecule_lanes.py --lanes $(MOLECULE_LANES) $(SCENARIOS)

# In fleet order: the lab itself, refusals on fresh nodes, site.yml from scratch, then what runs on it;
# the benchmark last (it leaves the gateway on round-robin routing).
INTEGRATION_FLEET := test_lab test_refusals test_site
INTEGRATION_SERVING := test_server test_gateway
INTEGRATION_REST := test_monitoring test_artifacts test_faults test_claude_code test_bench
INTEGRATION_TESTS := $(INTEGRATION_FLEET) $(INTEGRATION_SERVING) $(INTEGRATION_REST)
PYTEST_INTEGRATION = pytest --durations=25 $(foreach t,$(1),tests/integration/$(t).py)

# The integration tests run on the shape of a real site: 2 GPU nodes (gpu-1 a 4-GPU board, gpu-2 an
# 8-GPU board with two servers: 3 servers behind the gateway), a site cache that is also the
# gateway, a laptop.
integration: GLM_LAB_GPU_NODES = 2
integration: lab-up ## the lab-level tests, driven by ansible-runner
	$(call PYTEST_INTEGRATION,$(INTEGRATION_TESTS))

# Integration tests (TESTS) on the running lab.
TESTS ?= $(INTEGRATION_TESTS)
integration-tests: venv
	$(call PYTEST_INTEGRATION,$(TESTS))

# `make test` keeps both cores busy: the fast lane's three parts run at once, with the lab coming
# up beside them (lab.py writes the inventory whole and shares the stand-in's pinned wheels with
# the unit tests under a lock); then molecule's scenarios run beside the integration tests, which
# wait on servers and networks as much as they compute. The scenarios that touch neither the Hub
# stand-in nor the Grafana stand-in run beside the fleet's tests (test_site counts what the Hub
# stand-in served, and what the registry sent to the lab's own hosts only; site.yml provisions
# Grafana); `monitoring`, which finds the fleet's dashboard in the Grafana stand-in as
# site.yml left it and changes nothing there, beside the tests that follow the serving tests (they
# inject faults into the Hub stand-in and read Grafana's dashboards); the others beside the serving
# tests (which read no state of the lab's shared services). The older ansible-core releases' sanity
# and unit tests (`make matrix`) run beside the last stage, the lightest. The benchmark runs alone,
# last. A part's output is printed whole when it ends.
MOLECULE_BESIDE_FLEET := $(filter nvidia_container_toolkit gateway claude_code preflight,$(MOLECULE_SCENARIOS))
MOLECULE_BESIDE_REST := $(filter monitoring,$(MOLECULE_SCENARIOS))
MOLECULE_BESIDE_SERVING := $(filter-out $(MOLECULE_BESIDE_FLEET) $(MOLECULE_BESIDE_REST),$(MOLECULE_SCENARIOS))
# Beside the integration tests, two lanes: the longest scenario of each stage takes as long as the
# others together, and a third lane would only slow the servers' restarts that the tests wait on.
# What runs beside them (molecule's controller side, the matrix) runs niced: the integration tests wait
# on servers, health gates and timers that CPU contention stretches, while the work beside them only
# has to finish before they do, in the CPU they leave idle.
BESIDE_NICE ?=
BESIDE := $(MAKE) --no-print-directory --jobs 2 --output-sync=target molecule-scenarios integration-tests \
  MOLECULE_LANES=2 BESIDE_NICE="nice -n 10"

test: GLM_LAB_GPU_NODES = 2
test: deps venv ## every check (CI runs this)
	$(MAKE) --no-print-directory --jobs 4 --output-sync=target check lab-up
	$(BESIDE) SCENARIOS="$(MOLECULE_BESIDE_FLEET)" TESTS="$(INTEGRATION_FLEET)"
	$(BESIDE) SCENARIOS="$(MOLECULE_BESIDE_SERVING)" TESTS="$(INTEGRATION_SERVING)"
	$(MAKE) --no-print-directory --jobs 3 --output-sync=target molecule-scenarios integration-tests matrix \
	  BESIDE_NICE="nice -n 10" SCENARIOS="$(MOLECULE_BESIDE_REST)" TESTS="$(filter-out test_bench,$(INTEGRATION_REST))"
	$(call PYTEST_INTEGRATION,test_bench)
	$(BIN)/python tests/lab/lab.py down

build: venv ## the collection tarball
	ansible-galaxy collection build --force --output-path build/

ee: build ## the execution environment's build context (build/ee/context), for AWX / Automation Platform
	mkdir -p build/ee && cp build/glm-fleet-$$(sed -n 's/^version: //p' galaxy.yml).tar.gz build/ee/glm-fleet.tar.gz
	ansible-builder create --file execution-environment.yml --context build/ee/context --output-filename Containerfile

clean: lab-down
	rm -rf build .ansible tests/output

bench: venv engine ## benchmark tables on fresh labs (fleet, gateway, ready-detection lag on 4 GPU nodes; no-op cost at 2, 4, 8)
	$(BIN)/python bench/fleet.py --gpu-nodes 4 --shard-mib 256
	$(BIN)/python bench/gateway.py
	$(BIN)/python bench/ready_lag.py --rounds 5
	$(BIN)/python bench/scale.py --sizes 2 4 8 --profile --mitogen

docs: venv ## regenerate docs/variables.md from the roles' argument specs
	$(BIN)/python tools/variables_doc.py

dashboards: venv ## rebuild glm.fleet.monitoring's Grafana dashboard (grafana-foundation-sdk)
	$(BIN)/python tools/dashboards.py

client-lock: venv ## recompile the hash-pinned requirements of the download client, the router and AIPerf
	$(BIN)/pip install -q uv==0.13.9
	cd roles/model_weights/files && $(BIN)/uv pip compile --quiet --universal --generate-hashes \
	  --python-version 3.10 --custom-compile-command "make client-lock" \
	  client-requirements.in -o client-requirements.txt
	cd roles/gateway/files && $(BIN)/uv pip compile --quiet --universal --generate-hashes \
	  --python-version 3.10 --custom-compile-command "make client-lock" \
	  router-requirements.in -o router-requirements.txt
	cd roles/bench_serving/files && $(BIN)/uv pip compile --quiet --universal --generate-hashes \
	  --python-version 3.11 --custom-compile-command "make client-lock" \
	  aiperf-requirements.in -o aiperf-requirements.txt
