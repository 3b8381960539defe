#!/usr/bin/env bash
# Install the Debian packages quicbench calls, only those missing. Idempotent.
set -euo pipefail
PKGS=(caddy nginx apache2 iproute2 ethtool iputils-ping iperf3 tcpdump nftables procps curl ca-certificates)
# Browser page loads (Playwright drives Debian's Chromium, never a downloaded browser)
[ "${QB_NO_BROWSER:-0}" = 1 ] || PKGS+=(chromium)
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
