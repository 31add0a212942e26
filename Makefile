# The two set-up commands of the README: `make tpch` and `make test`.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAYOUT ?= C+O
SF ?= 0.1
QUERIES ?= all
ENGINE ?= mariadb
# gcc: the device model's library, which tierlab's cost model loads (emulator/libtierlab-model.so)
APT_PACKAGES := python3 python3-venv python3-pip gcc make
MODEL_LIBRARY := emulator/libtierlab-model.so
# the tests also read traces with blkparse, measure with fio, build the device emulator (tierlab-emu) to run its
# model, render reports in headless Chromium and make btrfs file systems
# openssh-server and sudo: the integration tests' two hosts reached over SSH (tests/integration/hosts.py) run
# sshd processes of their own; the package's own service is not started (policy-rc.d below)
# fdisk (sfdisk), mariadb-server and postgresql-15: the instances the observation tests start themselves, outside
# tierlab's roles, on a partitioned disk (tests/integration/own_instances.py)
TEST_APT_PACKAGES := blktrace fio chromium fuse3 libfuse3-dev gcc make pkg-config btrfs-progs openssh-server sudo \
  fdisk mariadb-server postgresql-15

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: soak setup tpch tiers teardown e5 test test-long test-guest unit integration lint

setup: $(STAMP) $(MODEL_LIBRARY)

$(STAMP): pyproject.toml
	if command -v apt-get >/dev/null && ! dpkg -s $(APT_PACKAGES) >/dev/null 2>&1; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(APT_PACKAGES); fi
	/usr/bin/python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[playbooks,test]'
	touch $(STAMP)

$(MODEL_LIBRARY): $(STAMP) emulator/Makefile $(wildcard emulator/src/*)
	$(MAKE) -C emulator libtierlab-model.so

tpch: setup
	$(BIN)/ansible-playbook playbooks/tpch.yml -e layout=$(LAYOUT) -e scale_factor=$(SF) -e queries=$(QUERIES) -e engine=$(ENGINE)

tiers: setup
	$(BIN)/ansible-playbook playbooks/tiers.yml

teardown: setup
	$(BIN)/ansible-playbook playbooks/teardown.yml

# Experiment E5 (docs/experiments.md) on SSB SF 1: plans, subqueries, PostgreSQL's workers, co-running queries;
# each study goes on after another's failed points (hours: the MySQL family's index plans take most of them)
e5: setup
	status=0; for study in docs/studies/e5-*.yml; do $(BIN)/tierlab study $$study || status=1; done; exit $$status

lint: setup
	$(BIN)/ruff check analysis tracing tests playbooks benchmarks

# the unit tests first: a failure there stops the suite before the integration tests' minutes
unit: setup $(VENV)/.test-deps
	$(BIN)/pytest -q -x tests/unit

integration: setup $(VENV)/.test-deps
	$(BIN)/pytest -q -rs -m "not long" tests/integration

# the heavy tests of later features (two hosts over SSH, the device suite), which CI does not run: run them before
# closing an issue that touches what they cover
test-long: setup $(VENV)/.test-deps
	$(BIN)/pytest -q -rs -m long tests/integration

# a study of 30 tiny points with faults injected at random (server, emulator, Ctrl-C, a full tier), resumed until
# done, under a root of its own (tests/soak/soak.py; about half an hour): outside make test
soak: setup $(VENV)/.test-deps
	$(BIN)/python tests/soak/soak.py

# the host agent on a host that boots with cgroup v2 only, under systemd: a Debian 12 guest in qemu (tests/guest).
# The first run makes the guest's image with debootstrap (minutes), kept in /var/cache/tierlab-guest
GUEST_APT_PACKAGES := qemu-system-x86 debootstrap
test-guest: setup
	if ! dpkg -s $(GUEST_APT_PACKAGES) >/dev/null 2>&1; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(GUEST_APT_PACKAGES); fi
	$(BIN)/pytest -q tests/guest

# where no policy-rc.d says otherwise, one that starts no service is in place while the packages install, so that
# installing openssh-server does not start the host's sshd; it is removed again
$(VENV)/.test-deps: $(STAMP)
	if ! dpkg -s $(TEST_APT_PACKAGES) >/dev/null 2>&1; then \
	  policy=/usr/sbin/policy-rc.d; made=; \
	  if [ ! -e $$policy ]; then printf '#!/bin/sh\nexit 101\n' > $$policy && chmod 755 $$policy && made=1; fi; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(TEST_APT_PACKAGES); status=$$?; \
	  if [ -n "$$made" ]; then rm -f $$policy; fi; exit $$status; fi
	touch $@

test: lint unit integration
