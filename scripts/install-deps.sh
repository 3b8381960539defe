#!/usr/bin/env bash
# Install the Debian packages quicbench calls, only those missing. Idempotent.
set -euo pipefail
PKGS=(caddy nginx apache2 iproute2 ethtool iputils-ping iperf3 tcpdump nftables procps curl ca-certificates)
# gcc: Rust's linker, and build/bin/uml-xstate.so (User-Mode Linux's FPU-state wrapper, `make build`)
PKGS+=(gcc libc6-dev)
# The kernel's netem, tbf and htb on any host: `--kernel uml` (User-Mode Linux and its insmod)
[ "${QB_NO_UML:-0}" = 1 ] || PKGS+=(user-mode-linux kmod)
# Lab backend ssh: the OpenSSH client reaches the hosts; its tests run Debian's sshd in lab
# namespaces as the hosts (the host's own sshd service is not started, see policy-rc.d below)
PKGS+=(openssh-client openssh-server)
# Browser page loads (Playwright drives Debian's Chromium, puppeteer-core Debian's Firefox ESR,
# never a downloaded browser); certutil puts the lab's CA into each Firefox profile
[ "${QB_NO_BROWSER:-0}" = 1 ] || PKGS+=(chromium firefox-esr libnss3-tools)
# Video workloads: ffmpeg encodes the ladder locally; npm installs the pinned hls.js/dash.js
if [ "${QB_NO_VIDEO:-0}" != 1 ]; then PKGS+=(ffmpeg); command -v npm >/dev/null 2>&1 || PKGS+=(npm); fi
# Scale-out test: a throw-away single-node Slurm cluster (tests/integration/test_scale.py). Nine small
# packages, about 6 s of `make setup` on a bare machine; the daemons are never started as services.
[ "${QB_NO_SLURM:-0}" = 1 ] || PKGS+=(slurm-wlm munge)
# HTTP/3 stack ngtcp2 (example server and client, 1.11): bookworm has only 0.12, so these two come
# from bookworm-backports. Nothing else is taken from backports (its default priority is 100 and
# only these two are installed with -t). About 10 s of `make setup` on a bare machine (docs/servers.md).
BACKPORTS_PKGS=()
if [ "${QB_NO_NGTCP2:-0}" != 1 ]; then
  for p in ngtcp2-server ngtcp2-client; do
    v=$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null || true)
    case "$v" in "install ok installed 1."*) ;; *) BACKPORTS_PKGS+=("$p") ;; esac
  done
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
need_tool() { command -v "$1" >/dev/null 2>&1 || { echo "missing toolchain: $1 ($2)" >&2; exit 2; }; }
need_tool go "install Go >= 1.22"
need_tool cargo "install Rust with rustup"
need_tool python3 "install Python >= 3.11"
if [ ${#missing[@]} -eq 0 ] && [ ${#BACKPORTS_PKGS[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]} ${BACKPORTS_PKGS[*]}; run as root (or: sudo apt-get install" \
       "${missing[*]}; sudo apt-get install -t bookworm-backports ${BACKPORTS_PKGS[*]})" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#BACKPORTS_PKGS[@]} -gt 0 ] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  # deb822, as Debian 12's own debian.sources; the same mirror and archive key
  echo "adding the apt source bookworm-backports (/etc/apt/sources.list.d/bookworm-backports.sources)"
  cat > /etc/apt/sources.list.d/bookworm-backports.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
echo "installing Debian packages: ${missing[*]} ${BACKPORTS_PKGS[*]}"
apt-get update -qq
# Services from the packages (caddy, ...) must not start on the host: quicbench starts its own.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
[ ${#missing[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}"
[ ${#BACKPORTS_PKGS[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BACKPORTS_PKGS[@]}"
