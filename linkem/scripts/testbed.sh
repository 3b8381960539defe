#!/usr/bin/env bash
# linkem dev testbed:  qb-lkdev-client -- qb-lkdev-router -- qb-lkdev-server
#
#   testbed.sh up       build the three namespaces (left in place for manual use)
#   testbed.sh down     remove them (and any linkem/iperf3 this script started)
#   testbed.sh bench    up + measurements + table + down (always cleaned up)
#
# Addresses: client c0 198.18.200.2/24 -- r0 198.18.200.1 [router] r1 198.18.201.1
#            -- s0 198.18.201.2/24 server. Offloads TSO/GSO/GRO off, router
#            ip_forward=0 while linkem runs (=1 only for the kernel baseline).
# Env knobs: DUR (iperf3 seconds, default 8), LINKEM_ARGS (extra linkem flags),
#            ONLY (comma list of bench sections: base,fwd0,fwd10,rtt,rate),
#            PINGS (probes per RTT point, default 200).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BIN="$ROOT/target/release/linkem"
C=qb-lkdev-client
R=qb-lkdev-router
S=qb-lkdev-server
C_IP=198.18.200.2
RA_IP=198.18.200.1
RB_IP=198.18.201.1
S_IP=198.18.201.2
C_MAC=02:00:c6:12:c8:02
RA_MAC=02:00:c6:12:c8:01
RB_MAC=02:00:c6:12:c9:01
S_MAC=02:00:c6:12:c9:02
DUR=${DUR:-8}
PINGS=${PINGS:-200}
ONLY=${ONLY:-base,fwd0,fwd10,rtt,rate}
LINKEM_ARGS=${LINKEM_ARGS:-}
WORK=$(mktemp -d /tmp/qb-lkdev.XXXXXX)
PIDS=()

log() { echo "[testbed] $*" >&2; }

kill_started() {
    local p
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] || continue
        if kill -0 "$p" 2>/dev/null; then
            kill -TERM "$p" 2>/dev/null || true
            for _ in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
    PIDS=()
}

down() {
    kill_started
    local ns
    for ns in $C $R $S; do
        if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
            # only processes still inside our own namespaces
            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
            ip netns del "$ns" 2>/dev/null || true
        fi
    done
}

up() {
    down
    ip netns add $C
    ip netns add $R
    ip netns add $S
    ip link add c0 netns $C address $C_MAC type veth peer name r0 netns $R address $RA_MAC
    ip link add s0 netns $S address $S_MAC type veth peer name r1 netns $R address $RB_MAC
    local ns dev
    for ns in $C $R $S; do ip -n $ns link set lo up; done
    ip -n $C addr add $C_IP/24 dev c0
    ip -n $R addr add $RA_IP/24 dev r0
    ip -n $R addr add $RB_IP/24 dev r1
    ip -n $S addr add $S_IP/24 dev s0
    for pair in $C:c0 $R:r0 $R:r1 $S:s0; do
        ns=${pair%%:*}; dev=${pair#*:}
        ip netns exec $ns ethtool -K $dev tso off gso off gro off >/dev/null 2>&1 || true
        ip -n $ns link set $dev mtu 1500 up
    done
    ip -n $C route add default via $RA_IP
    ip -n $S route add default via $RB_IP
    for ns in $C $S; do
        # big enough socket buffers for 1 Gbit/s x 20 ms RTT
        ip netns exec $ns sysctl -qw net.ipv4.tcp_rmem="4096 131072 33554432" net.ipv4.tcp_wmem="4096 16384 33554432"
    done
    ip netns exec $R sysctl -qw net.ipv4.ip_forward=0
    # resolve neighbours once so the first measurements do not include ARP
    ip netns exec $C ping -c1 -W1 $RA_IP >/dev/null || true
    ip netns exec $S ping -c1 -W1 $RB_IP >/dev/null || true
}

build() {
    if [ ! -x "$BIN" ] || [ -n "$(find "$ROOT/src" -newer "$BIN" -name '*.rs' 2>/dev/null)" ]; then
        log "building linkem"
        (cd "$ROOT" && cargo build --release -q)
    fi
}

LINKEM_PID=""
CTL="$WORK/ctl.sock"

start_linkem() { # $1 = config json text
    echo "$1" >"$WORK/cfg.json"
    ip netns exec $R sysctl -qw net.ipv4.ip_forward=0
    ip netns exec $R "$BIN" --iface-a r0 --a-peer-mac $C_MAC --iface-b r1 --b-peer-mac $S_MAC \
        --config "$WORK/cfg.json" --control "$CTL" --stats-out "$WORK/final.json" --seed 1 $LINKEM_ARGS \
        >"$WORK/linkem.out" 2>"$WORK/linkem.err" &
    LINKEM_PID=$!
    PIDS+=("$LINKEM_PID")
    for _ in $(seq 1 100); do
        grep -qx ready "$WORK/linkem.out" 2>/dev/null && return 0
        kill -0 "$LINKEM_PID" 2>/dev/null || break
        sleep 0.05
    done
    log "linkem did not start:"; cat "$WORK/linkem.err" >&2; return 1
}

stop_linkem() {
    [ -n "$LINKEM_PID" ] || return 0
    kill -TERM "$LINKEM_PID" 2>/dev/null || true
    wait "$LINKEM_PID" 2>/dev/null || true
    LINKEM_PID=""
}

ctl() { ip netns exec $R "$BIN" ctl --control "$CTL" "$@"; }
setcfg() { local r; r=$(ctl set "$1"); [ "$r" = ok ] || { log "set failed: $r"; return 1; }; }

proc_cpu_ticks() { # utime+stime of a pid, in clock ticks
    awk '{print $14+$15}' "/proc/$1/stat"
}

IPERF_PID=""
start_iperf_server() {
    ip netns exec $S iperf3 -s -p 5201 >/dev/null 2>&1 &
    IPERF_PID=$!
    PIDS+=("$IPERF_PID")
    sleep 0.3
}

iperf_mbps() { # prints receiver Mbit/s of a DUR-second upload
    local out
    out=$(ip netns exec $C iperf3 -c $S_IP -p 5201 -t "$DUR" -O 1 -J 2>/dev/null || true)
    echo "$out" | jq -r '.end.sum_received.bits_per_second // 0 | . / 1e6'
}

UDP_PID=""
start_udp_server() {
    ip netns exec $S python3 "$HERE/udpping.py" server 7777 900 &
    UDP_PID=$!
    PIDS+=("$UDP_PID")
    sleep 0.3
}
udp_rtt() { ip netns exec $C python3 "$HERE/udpping.py" client $S_IP 7777 "$PINGS" 0.01; }

ROWS=()
row() { ROWS+=("$(printf '%-34s %-44s %s' "$1" "$2" "$3")"); }
want() { [[ ",$ONLY," == *",$1,"* ]]; }

# linkem-measured iperf run: sets config, resets stats, runs iperf3, prints
# "mbps cpu_ns_per_pkt(/proc) cpu_ns_per_pkt(getrusage) fwd_pkts sched_p50 sched_p99 util_up"
measured_iperf() { # $1 config
    setcfg "$1"
    sleep 0.2
    ctl reset >/dev/null
    local t0 t1 mbps st
    t0=$(proc_cpu_ticks "$LINKEM_PID")
    mbps=$(iperf_mbps)
    t1=$(proc_cpu_ticks "$LINKEM_PID")
    st=$(ctl stats)
    echo "$st" >"$WORK/last_stats.json"
    local hz; hz=$(getconf CLK_TCK)
    echo "$st" | jq -r --arg mbps "$mbps" --arg dt "$((t1 - t0))" --arg hz "$hz" '
        (.up.forwarded + .down.forwarded) as $f
        | [ ($mbps|tonumber),
            (if $f > 0 then (($dt|tonumber) / ($hz|tonumber) * 1e9 / $f) else 0 end),
            (.timing.cpu_ns_per_forwarded_pkt // 0), $f,
            (.up.sched_error_us.p50_us // 0), (.up.sched_error_us.p99_us // 0),
            (.up.bytes_out * 8 / .since_reset_s / 1e6) ] | map(tostring) | join(" ")'
}

bench() {
    build
    up
    start_iperf_server
    start_udp_server
    local res mbps

    if want base; then
        log "kernel forwarding baseline"
        ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
        mbps=$(iperf_mbps)
        row "kernel fwd, iperf3 TCP, 0 ms" "$(printf '%.0f Mbit/s' "$mbps")" "(reference)"
        res=$(udp_rtt)
        KERNEL_RTT=$(echo "$res" | jq -r .p50_ms)
        row "kernel fwd, UDP RTT p50" "$(printf '%.3f ms' "$KERNEL_RTT")" "(path baseline)"
        ip netns exec $R sysctl -qw net.ipv4.ip_forward=0
    fi
    KERNEL_RTT=${KERNEL_RTT:-0}

    start_linkem '{}'
    if want fwd0; then
        log "linkem transparent"
        read -r mbps cpu cpu2 f p50 p99 util <<<"$(measured_iperf '{"up":{},"down":{}}')"
        row "linkem, iperf3 TCP, 0 ms" "$(printf '%.0f Mbit/s, %.0f ns CPU/pkt (rusage %.0f)' "$mbps" "$cpu" "$cpu2")" "cpu <= 1000 ns"
        res=$(udp_rtt)
        row "linkem, UDP RTT p50, 0 ms" "$(printf '%.3f ms (+%.3f vs kernel)' "$(echo "$res" | jq .p50_ms)" "$(echo "$res" | jq ".p50_ms - $KERNEL_RTT")")" ""
    fi
    if want fwd10; then
        log "linkem 10 ms each way"
        read -r mbps cpu cpu2 f p50 p99 util <<<"$(measured_iperf '{"up":{"delay_ms":10},"down":{"delay_ms":10}}')"
        row "linkem, iperf3 TCP, 10 ms one-way" "$(printf '%.0f Mbit/s, %.0f ns CPU/pkt (rusage %.0f)' "$mbps" "$cpu" "$cpu2")" ">= 1000 Mbit/s, <= 1000 ns"
        row "  sched error up p50/p99" "$(printf '%s / %s us' "$p50" "$p99")" ""
    fi
    if want rtt; then
        local d
        for d in 10 50 100; do
            log "RTT at $d ms one-way"
            setcfg "{\"up\":{\"delay_ms\":$d},\"down\":{\"delay_ms\":$d}}"
            res=$(udp_rtt)
            local p50 err
            p50=$(echo "$res" | jq .p50_ms)
            err=$(echo "$res" | jq ".p50_ms - 2*$d - $KERNEL_RTT")
            row "RTT p50, ${d} ms one-way" "$(printf '%.3f ms, error %+.3f ms (p99 %.3f)' "$p50" "$err" "$(echo "$res" | jq .p99_ms)")" "|error| <= 0.100 ms"
        done
    fi
    if want rate; then
        local r
        for r in 5 40 100; do
            log "rate $r Mbit/s"
            read -r mbps cpu cpu2 f p50 p99 util <<<"$(measured_iperf "{\"up\":{\"rate_mbit\":$r,\"delay_ms\":10},\"down\":{\"delay_ms\":10}}")"
            # TCP payload per 1514-byte frame: 1448 bytes (timestamps on)
            row "rate ${r} Mbit/s +10 ms, goodput" "$(printf '%.2f Mbit/s = %.1f%% of rate; %.1f%% of max payload rate; wire %.1f%%' \
                "$mbps" "$(echo "$mbps*100/$r" | bc -l)" "$(echo "$mbps*100/($r*1448/1514)" | bc -l)" "$(echo "$util*100/$r" | bc -l)")" ">= 97 %"
        done
    fi
    stop_linkem
    cp "$WORK/final.json" "$WORK/../qb-lkdev-last-final.json" 2>/dev/null || true

    echo
    printf '%-34s %-44s %s\n' "test" "result" "target"
    printf '%s\n' "--------------------------------------------------------------------------------------------------------"
    printf '%s\n' "${ROWS[@]}"
}

cleanup() {
    local rc=$?
    stop_linkem 2>/dev/null || true
    down
    rm -rf "$WORK"
    if ip netns list | grep -q '^qb-lkdev-'; then
        echo "[testbed] WARNING: qb-lkdev namespaces left behind" >&2
    fi
    exit $rc
}

case "${1:-}" in
    up) trap 'rm -rf "$WORK"' EXIT; up; log "namespaces up: $C $R $S" ;;
    down) trap 'rm -rf "$WORK"' EXIT; down; log "namespaces removed" ;;
    bench) trap cleanup EXIT; bench ;;
    *) echo "usage: $0 up|down|bench" >&2; exit 2 ;;
esac
