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
# and `tierlab trace-stats`' compiled pass over binary blktrace files
TRACE_LIBRARY := emulator/libtierlab-trace.so
# the tests also read traces with blkparse, measure with fio, build the device emulator (tierlab-emu) to run its
# model, render reports in headless Chromium and make btrfs file systems
# openssh-server and sudo: the integration tests' two hosts reached over SSH (tests/integration/hosts.py) run
# sshd processes of their own; the package's own service is not started (policy-rc.d below)
# fdisk (sfdisk), mariadb-server and postgresql-15: the instances the observation tests start themselves, outside
# tierlab's roles, on a partitioned disk (tests/integration/own_instances.py)
TEST_APT_PACKAGES := blktrace fio chromium fuse3 liburing-dev gcc make btrfs-progs openssh-server sudo \
  fdisk mariadb-server postgresql-15

export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

.PHONY: soak setup tpch tiers teardown findings findings-quick test test-long test-guest unit integration lint

setup: $(STAMP) $(MODEL_LIBRARY) $(TRACE_LIBRARY)

$(STAMP): pyproject.toml
	if command -v apt-get >/dev/null && ! dpkg -s $(APT_PACKAGES) >/dev/null 2>&1; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(APT_PACKAGES); fi
	/usr/bin/python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[playbooks,test]'
	touch $(STAMP)

$(MODEL_LIBRARY): $(STAMP) emulator/Makefile $(wildcard emulator/src/*)
	$(MAKE) -C emulator libtierlab-model.so

$(TRACE_LIBRARY): emulator/Makefile $(wildcard emulator/src/trace_*)
	$(MAKE) -C emulator libtierlab-trace.so

tpch: setup
	$(BIN)/ansible-playbook playbooks/tpch.yml -e layout=$(LAYOUT) -e scale_factor=$(SF) -e queries=$(QUERIES) -e engine=$(ENGINE)

tiers: setup
	$(BIN)/ansible-playbook playbooks/tiers.yml

teardown: setup
	$(BIN)/ansible-playbook playbooks/teardown.yml

# The study's experiments (docs/experiments.md), a study file each (docs/studies), each run into
# results/findings/<name>/, where a study stopped half-way resumes, one after another's failed points, and E6's
# device suite (playbooks/devices.yml) into results/findings/e6/ unless one is there; then
# published: docs/findings/ and docs/findings.md (`tierlab findings`). FINDINGS names the studies to run.
# findings-quick: a first look, the same studies smaller (TPC-H and SSB at SF 0.1, sysbench's tables of 100,000
# rows for 20 s, one repetition), in results/findings-quick/ with its page there (docs/findings.md is kept)
# FINDINGS_VARS: host variables for every study started (JSON, kept in its study.json for the chunks that resume
# it), e.g. '{"tiers_dilation": 6}', so that chunks on tiers brought up again are compared
FINDINGS_VARS ?= {}
FINDINGS ?= e1-tpch-engines ssb-engines validate-q3 validate-q10 validate-q16 e3-cache-admitting e3-cache-lru \
  e4-page-size e4-buffer-pool e4-compression e4-threads e5-plans e5-plans-mysql e5-subqueries e5-workers e5-corun
findings: FINDINGS_DIR := results/findings
findings: FINDINGS_OUT := docs
findings-quick: FINDINGS_DIR := results/findings-quick
findings-quick: FINDINGS_OUT := results/findings-quick
findings-quick: FINDINGS_QUICK := yes
findings-quick: DEVICE_SUITE := -e devices_runtime_s=0.3 -e devices_sustained_s=8
findings findings-quick: setup
	status=0; ls $(FINDINGS_DIR)/e6/devices_*/raw/devices.json > /dev/null 2>&1 || $(BIN)/ansible-playbook playbooks/devices.yml \
	  -e results_dir=$(CURDIR)/$(FINDINGS_DIR)/e6 $(DEVICE_SUITE) || status=1; \
	for name in $(FINDINGS); do \
	  smaller=; if [ -n "$(FINDINGS_QUICK)" ]; then \
	    if grep -q '^workload: sysbench' docs/studies/$$name.yml; then \
	      smaller="--set table_size=100000 --set duration_s=20 --set warmup_s=5"; else smaller="--set scale_factor=0.1"; fi; \
	    smaller="$$smaller --repetitions 1"; fi; \
	  $(BIN)/tierlab study docs/studies/$$name.yml --study-dir $(FINDINGS_DIR)/$$name $$smaller \
	    --extra-vars '$(FINDINGS_VARS)' || status=1; done; \
	suite=$$(ls -d $(FINDINGS_DIR)/e6/devices_*/raw 2>/dev/null | tail -1); \
	$(BIN)/tierlab findings --out $(FINDINGS_OUT) $${suite%/raw} $$(for name in $(FINDINGS); do \
	  test -f $(FINDINGS_DIR)/$$name/study.json && echo $(FINDINGS_DIR)/$$name; done) && exit $$status

lint: setup
	$(BIN)/ruff check --no-cache analysis tracing tests playbooks benchmarks

# the unit tests first: a failure there stops the suite before the integration tests' minutes
unit: setup $(VENV)/.test-deps
	$(BIN)/pytest -q -x tests/unit

# -rfEs: the failed and errored tests named with their error after the slowest, where the tail of CI's log shows
# them, and the skipped with why
integration: setup $(VENV)/.test-deps
	$(BIN)/pytest -q -rfEs -m "not long" tests/integration

# the heavy tests of later features (two hosts over SSH, the device suite), which CI does not run: run them before
# closing an issue that touches what they cover
test-long: setup $(VENV)/.test-deps
	$(BIN)/pytest -q -rfEs -m long tests/integration

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
