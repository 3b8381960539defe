#!/usr/bin/env bash
# Install the Debian packages quicbench calls, only those missing. Idempotent.
set -euo pipefail
PKGS=(caddy nginx apache2 iproute2 ethtool iputils-ping iperf3 tcpdump nftables procps curl ca-certificates)
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
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
need_tool() { command -v "$1" >/dev/null 2>&1 || { echo "missing toolchain: $1 ($2)" >&2; exit 2; }; }
need_tool go "install Go >= 1.22"
need_tool cargo "install Rust with rustup"
need_tool python3 "install Python >= 3.11"
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 2
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Services from the packages (caddy, ...) must not start on the host: quicbench starts its own.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
apt-get install -y -qq --no-install-recommends "${missing[@]}"
