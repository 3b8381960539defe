#!/usr/bin/env bash
# Install the Debian packages quicbench calls, only those missing. Idempotent.
#   scripts/install-deps.sh [GROUP...]      (no group: every group)
# Groups: core (what the default plan needs: `make setup`), servers, capture, browser, firefox,
# video, uml, ssh, slurm, ngtcp2, netty, quiche. `make setup-all` installs them all; a plan that needs one that
# is missing installs it on first use (src/quicbench/provision), through the Makefile.
set -euo pipefail
GROUPS_WANTED=("$@")
[ ${#GROUPS_WANTED[@]} -gt 0 ] || GROUPS_WANTED=(core servers capture browser firefox video uml ssh slurm ngtcp2 netty quiche)
PKGS=()
WANT_NGTCP2=0
for g in "${GROUPS_WANTED[@]}"; do
  case "$g" in
    # the lab (ip, tc), offloads, calibration (ping, iperf3), firewall rules; gcc: Rust's linker
    # and build/bin/uml-xstate.so
    core) PKGS+=(iproute2 ethtool iputils-ping iperf3 nftables procps curl ca-certificates gcc libc6-dev) ;;
    # servers nginx, apache and Debian's Caddy 2.6 ('caddy-2.6'); the default 'caddy' is built
    servers) PKGS+=(caddy nginx apache2) ;;
    capture) PKGS+=(tcpdump) ;;
    # Browser page loads (Playwright drives Debian's Chromium, never a downloaded browser)
    browser) PKGS+=(chromium) ;;
    # Firefox ESR driven by puppeteer-core; certutil puts the lab's CA into each profile
    firefox) PKGS+=(firefox-esr libnss3-tools); command -v npm >/dev/null 2>&1 || PKGS+=(npm) ;;
    # Video workloads: ffmpeg encodes the ladder locally; npm installs the pinned hls.js/dash.js
    video) PKGS+=(ffmpeg chromium); command -v npm >/dev/null 2>&1 || PKGS+=(npm) ;;
    # The kernel's netem, tbf and htb on any host: `--kernel uml` (User-Mode Linux and its insmod)
    uml) PKGS+=(user-mode-linux kmod) ;;
    # Lab backend ssh: the OpenSSH client reaches the hosts; its tests run Debian's sshd in lab
    # namespaces as the hosts (the host's own sshd service is not started, see policy-rc.d below)
    ssh) PKGS+=(openssh-client openssh-server) ;;
    # Scale-out test: a throw-away single-node Slurm cluster (tests/integration/test_scale.py); the
    # daemons are never started as services
    slurm) PKGS+=(slurm-wlm munge) ;;
    # HTTP/3 stack ngtcp2 (example server and client, 1.11): bookworm has only 0.12, so these two
    # come from bookworm-backports (docs/servers.md)
    ngtcp2) WANT_NGTCP2=1 ;;
    # HTTP/3 stack netty: Maven builds stacks/netty/ and Java 17 runs it (`make netty`)
    netty) PKGS+=(openjdk-17-jdk-headless maven) ;;
    # `make quiche` (server and client quiche): boring-sys builds BoringSSL with cmake and C++, and
    # its Rust bindings with bindgen, which loads libclang
    quiche) PKGS+=(cmake g++ libclang-dev) ;;
    *) echo "install-deps.sh: unknown group '$g'; accepted: core servers capture browser firefox video uml ssh slurm ngtcp2 netty quiche" >&2; exit 2 ;;
  esac
done
# the older switches still leave groups out
[ "${QB_NO_UML:-0}" != 1 ] || PKGS=("${PKGS[@]/#user-mode-linux/}")
[ "${QB_NO_NGTCP2:-0}" != 1 ] || WANT_NGTCP2=0
BACKPORTS_PKGS=()
if [ "$WANT_NGTCP2" = 1 ]; then
  for p in ngtcp2-server ngtcp2-client; do
    v=$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null || true)
    case "$v" in "install ok installed 1."*) ;; *) BACKPORTS_PKGS+=("$p") ;; esac
  done
fi
missing=()
for p in "${PKGS[@]}"; do
  [ -n "$p" ] || continue
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
# one update a day is enough (a fresh machine has no lists; a backports source just added has none)
lists=$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | wc -l)
if [ "$lists" = 0 ] || { [ ${#BACKPORTS_PKGS[@]} -gt 0 ] && ! ls /var/lib/apt/lists/*bookworm-backports*Packages* >/dev/null 2>&1; }; then
  apt-get update -qq
fi
# Services from the packages (caddy, ...) must not start on the host: quicbench starts its own.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
install() {
  [ ${#missing[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}" || return 1
  [ ${#BACKPORTS_PKGS[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BACKPORTS_PKGS[@]}"
}
# lists a day old may name versions the mirror no longer has: then update once and try again
install || { apt-get update -qq && install; }
