# quicbench: `make run` and `make test` do everything on a fresh Debian 12 machine (as root).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
QB    := $(VENV)/bin/quicbench
BIN   := build/bin
# the default server: a current Caddy, built from the Go module proxy (its own go.sum pins every
# dependency, quic-go included); Debian's 2.6.2 stays as server 'caddy-2.6'. Keep in step with
# CADDY_VERSION in src/quicbench/servers/caddy.py.
CADDY_VERSION := v2.11.9

.PHONY: setup setup-all deps deps-all venv venv-all build build-all player firefox run test test-py test-go \
        test-rust bench clean servers capture browser video uml ssh slurm ngtcp2 quinn aioquic replay stacks netty quiche

# `make setup` (and `make run`): only what the default plan needs (caddy, qb-load, linkem); a plan
# that needs more installs it on first use (src/quicbench/provision runs the target below that
# provides it, with one progress line). `make setup-all` (and `make test`): everything at once.
setup: deps
	@$(MAKE) --no-print-directory -j4 venv $(BIN)/qb-load $(BIN)/linkem $(BIN)/caddy

setup-all: setup deps-all venv-all build-all stacks player firefox

deps:
	@scripts/install-deps.sh core

deps-all:
	@scripts/install-deps.sh

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

# the optional Python packages: Playwright (browser page loads), curl_cffi (the command client
# example's HTTP/3 stack) and aioquic (the aioquic server and client drivers)
$(VENV)/.installed-all: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,browser,stacks,aioquic]'
	@touch $@

venv-all: $(VENV)/.installed-all

$(VENV)/.installed-browser: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,browser]'
	@touch $@

$(VENV)/.installed-aioquic: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[test,aioquic]'
	@touch $@

# the three binaries of the default plan, built side by side (Go and Rust each use every core,
# but the downloads and the linkers' waits overlap); `setup` builds them beside the venv's install
build:
	@$(MAKE) --no-print-directory -j3 $(BIN)/qb-load $(BIN)/linkem $(BIN)/caddy

build-all: build $(BIN)/quicbench-h3server $(BIN)/qb-replay $(BIN)/uml-xstate.so

# -- installed on first use by a plan that needs it (src/quicbench/provision), or by setup-all ----
servers:                     # nginx, Apache, Debian's Caddy 2.6
	@scripts/install-deps.sh servers
capture:                     # tcpdump
	@scripts/install-deps.sh capture
browser: $(VENV)/.installed-browser    # Debian's Chromium and Playwright
	@scripts/install-deps.sh browser
video: browser player        # ffmpeg, the player's hls.js/dash.js
	@scripts/install-deps.sh video
uml: $(BIN)/uml-xstate.so    # User-Mode Linux (its netem) and its FPU-state wrapper
	@scripts/install-deps.sh uml
ssh:                         # OpenSSH client and server (lab backend ssh, its tests)
	@scripts/install-deps.sh ssh
slurm:                       # Slurm and munge (the scale-out test)
	@scripts/install-deps.sh slurm
ngtcp2:                      # ngtcp2's server and client 1.11 (bookworm-backports)
	@scripts/install-deps.sh ngtcp2
quinn: $(BIN)/quicbench-h3server $(BIN)/quicbench-quinn-client   # the quinn HTTP/3 server and client
aioquic: $(VENV)/.installed-aioquic   # the aioquic server and client drivers (PyPI, pure Python)
replay: $(BIN)/qb-replay      # the replay server of recorded pages (docs/pages.md)
# the HTTP/3 stacks no default plan uses, all at once (setup-all, so test, builds them)
stacks: netty quiche quinn
netty:                       # Netty's HTTP/3 server and client (Java 17, Maven)
	@scripts/install-deps.sh netty
	@$(MAKE) --no-print-directory $(BIN)/quicbench-netty
# server and client 'quiche' (stacks/quiche/, pinned in its Cargo.lock; BoringSSL built with
# cmake, its bindings with libclang: minutes); the clients quiche and quinn share stacks/qbfetch
# (qb-load's command line, records and summary)
quiche:
	@scripts/install-deps.sh quiche
	@$(MAKE) --no-print-directory $(BIN)/quicbench-quiche-server $(BIN)/quicbench-quiche-client

# hls.js and dash.js, pinned in player/package-lock.json, served from the lab's server (no CDN)
player: player/node_modules/.installed

player/node_modules/.installed: player/package.json player/package-lock.json
	@command -v npm >/dev/null 2>&1 || scripts/install-deps.sh video
	cd player && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

# puppeteer-core, pinned in firefox/package-lock.json: drives Debian's Firefox ESR over WebDriver
# BiDi (firefox/bridge.mjs; no browser is downloaded: --ignore-scripts). Skipped with QB_NO_BROWSER=1.
firefox: firefox/node_modules/.installed

firefox/node_modules/.installed: firefox/package.json firefox/package-lock.json
	@if [ "$${QB_NO_BROWSER:-0}" = 1 ]; then echo "QB_NO_BROWSER=1: no Firefox (Firefox clients unavailable)"; \
	else scripts/install-deps.sh firefox && cd firefox && npm ci --ignore-scripts --no-audit --no-fund \
	&& touch node_modules/.installed; fi

$(BIN)/qb-load: $(wildcard loadclient/*.go) loadclient/go.mod loadclient/go.sum
	@mkdir -p $(BIN)
	cd loadclient && go build -trimpath -o ../$(BIN)/qb-load .

# server 'replay': recorded page archives over h1, h2 and h3 (loadclient's module, quic-go's http3)
$(BIN)/qb-replay: $(wildcard loadclient/cmd/qb-replay/*.go loadclient/internal/replay/*.go) loadclient/go.mod loadclient/go.sum
	@mkdir -p $(BIN)
	cd loadclient && go build -trimpath -o ../$(BIN)/qb-replay ./cmd/qb-replay

# Caddy's own main package with every standard module. A main importing only the modules quicbench
# configures (HTTP app, headers, file_server, TLS, file storage and log) still compiles 959 of its
# 1013 packages (Caddy's command and HTTP app import the rest), so it is not faster to build. No
# symbol table or DWARF (-s -w): a shorter link; `caddy build-info` and Go's tracebacks keep working.
$(BIN)/caddy: Makefile
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN)) GOFLAGS=-trimpath go install -ldflags='-s -w' github.com/caddyserver/caddy/v2/cmd/caddy@$(CADDY_VERSION)
	@touch $@

# replaced by a rename: a linkem still running keeps its file (cp would fail: text file busy)
$(BIN)/linkem: $(shell find linkem/src -name '*.rs' 2>/dev/null) linkem/Cargo.toml linkem/schema.json
	@mkdir -p $(BIN)
	cd linkem && cargo build --release --quiet
	cp linkem/target/release/linkem $(BIN)/linkem.tmp && mv -f $(BIN)/linkem.tmp $(BIN)/linkem

# preloaded into User-Mode Linux: hands the host a guest task's whole FPU state (AVX-512, AMX hosts)
$(BIN)/uml-xstate.so: src/quicbench/kernels/uml_xstate.c
	@mkdir -p $(BIN)
	gcc -O2 -Wall -Wextra -shared -fPIC -o $@ $< -ldl

# server 'quinn': HTTP/3 on quinn + h3 (crates.io, pinned in h3server/Cargo.lock)
$(BIN)/quicbench-h3server: $(shell find h3server/src -name '*.rs' 2>/dev/null) h3server/build.rs h3server/Cargo.toml h3server/Cargo.lock
	@mkdir -p $(BIN)
	cd h3server && cargo build --release --locked --quiet --bin quicbench-h3server
	cp h3server/target/release/quicbench-h3server $(BIN)/quicbench-h3server

# server and client 'netty': HTTP/3 on Netty's QUIC codec (quiche inside) on Java 17, from Maven
# Central (pinned in stacks/netty/pom.xml): one jar and its launcher (both executable: a lab on
# other hosts copies its drivers' binaries from build/bin)
$(BIN)/quicbench-netty: stacks/netty/quicbench-netty $(BIN)/quicbench-netty.jar
	install -m 755 $< $@

$(BIN)/quicbench-netty.jar: $(shell find stacks/netty/src -name '*.java' 2>/dev/null) stacks/netty/pom.xml
	@mkdir -p $(BIN)
	cd stacks/netty && mvn -q -B package
	install -m 755 stacks/netty/target/quicbench-netty-all.jar $@

QBFETCH_SRC := $(shell find stacks/qbfetch/src -name '*.rs' 2>/dev/null) stacks/qbfetch/Cargo.toml

$(BIN)/quicbench-quiche-server $(BIN)/quicbench-quiche-client &: $(shell find stacks/quiche/src -name '*.rs' 2>/dev/null) \
		stacks/quiche/build.rs stacks/quiche/Cargo.toml stacks/quiche/Cargo.lock h3server/src/files.rs $(QBFETCH_SRC)
	@mkdir -p $(BIN)
	cd stacks/quiche && cargo build --release --locked --quiet
	cp stacks/quiche/target/release/quicbench-quiche-server stacks/quiche/target/release/quicbench-quiche-client $(BIN)/

$(BIN)/quicbench-quinn-client: $(shell find h3server/src -name '*.rs' 2>/dev/null) h3server/build.rs h3server/Cargo.toml \
		h3server/Cargo.lock $(QBFETCH_SRC)
	@mkdir -p $(BIN)
	cd h3server && cargo build --release --locked --quiet --bin quicbench-quinn-client
	cp h3server/target/release/quicbench-quinn-client $(BIN)/quicbench-quinn-client

run: setup
	$(QB) run

test: setup-all test-go test-rust test-py

test-py:
	# pure logic on every core (pytest-xdist); then the integration tests marked parallel_safe two at
	# a time (each file on one worker; tests/conftest.py says which qualify), then the others one at
	# a time: they measure timing, rates and CPU, or act on every lab of the machine. Every phase
	# runs whatever an earlier one found; the target fails if any did.
	@rc=0; \
	$(PY) -m pytest -q -ra --durations=10 -n auto tests/unit || rc=1; \
	$(PY) -m pytest -q -ra --durations=10 -n 2 --dist loadfile -m parallel_safe tests/integration || rc=1; \
	$(PY) -m pytest -q -ra --durations=15 -m "not parallel_safe" tests/integration || rc=1; \
	exit $$rc

test-go:
	cd loadclient && go test -count=1 ./...

test-rust:
	cd linkem && cargo test --release --quiet
	cd h3server && cargo test --release --locked --quiet
	cd stacks/qbfetch && cargo test --release --locked --quiet

bench: setup
	$(PY) tools/bench/bench.py

clean:
	rm -rf build $(VENV) linkem/target h3server/target stacks/netty/target stacks/quiche/target stacks/qbfetch/target \
		player/node_modules firefox/node_modules
