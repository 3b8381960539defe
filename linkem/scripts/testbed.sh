#!/usr/bin/env bash
# linkem dev testbed:  qb-lkdev-client -- qb-lkdev-router -- qb-lkdev-server
#
#   testbed.sh up       build the three namespaces (left in place for manual use)
#   testbed.sh down     remove them (and any linkem/iperf3 this script started)
#   testbed.sh bench    up + measurements + table + down (always cleaned up)
#   testbed.sh smoke    up + functional checks of every impairment + down
#
# Addresses: client c0 198.18.200.2/24 -- r0 198.18.200.1 [router] r1 198.18.201.1
#            -- s0 198.18.201.2/24 server. Offloads TSO/GSO/GRO off, router
#            ip_forward=0 while linkem runs (=1 only for the kernel baseline).
# Env knobs: DUR (iperf3 seconds, default 8), LINKEM_ARGS (extra linkem flags),
#            CC (endpoint TCP congestion control, default cubic),
#            ONLY (comma list of bench sections: base,fwd0,fwd10,rate1g,rtt,rate),
#            PINGS (probes per RTT point, default 1000), QUIET (1 = wait up to
#            60 s for a >= 90 % idle machine before each measurement; rows
#            measured while other load was present are marked "[busy]").
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
PINGS=${PINGS:-1000}
ONLY=${ONLY:-base,fwd0,fwd10,rate1g,rtt,rate}
QUIET=${QUIET:-1}
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
        # CUBIC as in quicbench labs, whatever the host's default is (BBR would hide loss)
        ip netns exec $ns sysctl -qw net.ipv4.tcp_congestion_control="${CC:-cubic}"
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

BUSY=""
wait_quiet() { # sets BUSY="[busy]" if the machine never became >= 90 % idle
    BUSY=""
    [ "$QUIET" = 1 ] || return 0
    local i a b idle tot k
    for i in $(seq 1 60); do
        a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
        idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )); tot=0
        for k in 1 2 3 4 5 6 7 8; do tot=$((tot + b[k] - a[k])); done
        [ $((idle * 100 / tot)) -ge 90 ] && return 0
    done
    BUSY=" [busy]"
}

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
iperf_bg() { # iperf3 upload in the background, JSON to $WORK/iperf.json
    ip netns exec $C iperf3 -c $S_IP -p 5201 -t "$DUR" -O 1 -J >"$WORK/iperf.json" 2>/dev/null &
    IPERF_CLIENT=$!
}

UDP_PID=""
start_udp_server() {
    ip netns exec $S python3 "$HERE/udpping.py" server 7777 900 &
    UDP_PID=$!
    PIDS+=("$UDP_PID")
    sleep 0.3
}
# pipelined probes every 2 ms (endpoints never idle long: measures the link)
udp_rtt() { ip netns exec $C python3 "$HERE/udpping.py" client $S_IP 7777 "$PINGS" 0.002 pipe; }
# sequential probes (one in flight; includes endpoint wake-up-from-idle latency)
udp_rtt_seq() { ip netns exec $C python3 "$HERE/udpping.py" client $S_IP 7777 100 0.01; }

ROWS=()
row() { ROWS+=("$(printf '%-34s %-44s %s' "$1" "$2" "$3")"); }
want() { [[ ",$ONLY," == *",$1,"* ]]; }

# linkem-measured iperf run: set config, start a DUR-second upload, reset the
# counters after 1.5 s and read them 0.5 s before the end (steady state).
# Prints "goodput_mbps cpu_ns/pkt(/proc) cpu_ns/pkt(rusage) pps sched_up_p50 sched_up_p99 wire_up_mbps late_dropped"
measured_iperf() { # $1 config
    setcfg "$1"
    sleep 0.2
    iperf_bg
    sleep 1.5
    ctl reset >/dev/null
    local t0 t1 mbps st hz
    t0=$(proc_cpu_ticks "$LINKEM_PID")
    sleep "$((DUR - 2))"
    t1=$(proc_cpu_ticks "$LINKEM_PID")
    st=$(ctl stats)
    wait "$IPERF_CLIENT" || true
    mbps=$(jq -r '.end.sum_received.bits_per_second // 0 | . / 1e6' "$WORK/iperf.json")
    hz=$(getconf CLK_TCK)
    echo "$st" | jq -r --arg mbps "$mbps" --arg dt "$((t1 - t0))" --arg hz "$hz" '
        (.up.forwarded + .down.forwarded) as $f
        | [ ($mbps|tonumber),
            (if $f > 0 then (($dt|tonumber) / ($hz|tonumber) * 1e9 / $f) else 0 end),
            (.timing.cpu_ns_per_forwarded_pkt // 0), ($f / .since_reset_s),
            (.up.sched_error_us.p50_us // 0), (.up.sched_error_us.p99_us // 0),
            (.up.bytes_out * 8 / .since_reset_s / 1e6), (.up.late_dropped + .down.late_dropped) ] | map(tostring) | join(" ")'
}

bench() {
    build
    up
    start_iperf_server
    start_udp_server
    local res mbps cpu cpu2 pps p50 p99 util late

    if want base; then
        log "kernel forwarding baseline"
        ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
        wait_quiet
        mbps=$(iperf_mbps)
        row "kernel fwd, iperf3 TCP, 0 ms" "$(printf '%.0f Mbit/s' "$mbps")$BUSY" "(reference)"
        res=$(udp_rtt)
        KERNEL_RTT=$(echo "$res" | jq -r .p50_ms)
        row "kernel fwd, UDP RTT p50 (pipelined)" "$(printf '%.3f ms' "$KERNEL_RTT")" "(path baseline)"
        ip netns exec $R sysctl -qw net.ipv4.ip_forward=0
    fi
    KERNEL_RTT=${KERNEL_RTT:-0}

    start_linkem '{}'
    if want fwd0; then
        log "linkem transparent"
        wait_quiet
        read -r mbps cpu cpu2 pps p50 p99 util late <<<"$(measured_iperf '{"up":{},"down":{}}')"
        row "linkem, iperf3 TCP, 0 ms" "$(printf '%.0f Mbit/s, %.0f kpps, %.0f ns CPU/pkt' "$mbps" "$(echo "$pps/1000" | bc -l)" "$cpu")$BUSY" "CPU <= 1000 ns/pkt"
        res=$(udp_rtt)
        row "linkem, UDP RTT p50, 0 ms" "$(printf '%.3f ms (+%.3f vs kernel fwd)' "$(echo "$res" | jq .p50_ms)" "$(echo "$res" | jq ".p50_ms - $KERNEL_RTT")")" ""
    fi
    if want fwd10; then
        log "linkem 10 ms each way, no rate limit"
        wait_quiet
        read -r mbps cpu cpu2 pps p50 p99 util late <<<"$(measured_iperf '{"up":{"delay_ms":10},"down":{"delay_ms":10}}')"
        row "linkem, iperf3 TCP, 10 ms one-way" "$(printf '%.0f Mbit/s, %.0f kpps, %.0f ns CPU/pkt' "$mbps" "$(echo "$pps/1000" | bc -l)" "$cpu")$BUSY" ">= 1000 Mbit/s; <= 1000 ns"
        row "  sched error up p50 / p99" "$(printf '%s / %s us, late_dropped %s' "$p50" "$p99" "$late")" ""
    fi
    if want rate1g; then
        log "linkem 1 Gbit/s + 10 ms"
        wait_quiet
        read -r mbps cpu cpu2 pps p50 p99 util late <<<"$(measured_iperf '{"up":{"delay_ms":10,"rate_mbit":1000},"down":{"delay_ms":10}}')"
        row "linkem, 1 Gbit/s rate + 10 ms" "$(printf '%.0f Mbit/s (wire %.0f), %.0f ns CPU/pkt' "$mbps" "$util" "$cpu")$BUSY" ""
        row "  sched error up p50 / p99" "$(printf '%s / %s us' "$p50" "$p99")" ""
    fi
    if want rtt; then
        local d p50r err st sq
        for d in 10 50 100; do
            log "RTT at $d ms one-way"
            setcfg "{\"up\":{\"delay_ms\":$d},\"down\":{\"delay_ms\":$d}}"
            wait_quiet
            ctl reset >/dev/null
            res=$(udp_rtt)
            st=$(ctl stats)
            sq=$(udp_rtt_seq)
            p50r=$(echo "$res" | jq .p50_ms)
            err=$(echo "$res" | jq ".p50_ms - 2*$d - $KERNEL_RTT")
            row "RTT p50, ${d} ms one-way" "$(printf '%.3f ms, error %+.3f ms (p99 %.3f)' "$p50r" "$err" "$(echo "$res" | jq .p99_ms)")$BUSY" "|error| <= 0.100 ms"
            row "  linkem sched err p50 up+down" "$(echo "$st" | jq -r '"\(.up.sched_error_us.p50_us + .down.sched_error_us.p50_us) us (p99 \(.up.sched_error_us.p99_us)/\(.down.sched_error_us.p99_us))"')" ""
            row "  sequential probes p50" "$(printf '%.3f ms (error %+.3f incl. endpoint idle wake-up)' "$(echo "$sq" | jq .p50_ms)" "$(echo "$sq" | jq ".p50_ms - 2*$d - $KERNEL_RTT")")" ""
        done
    fi
    if want rate; then
        local r
        for r in 5 40 100; do
            log "rate $r Mbit/s"
            wait_quiet
            read -r mbps cpu cpu2 pps p50 p99 util late <<<"$(measured_iperf "{\"up\":{\"rate_mbit\":$r,\"delay_ms\":10},\"down\":{\"delay_ms\":10}}")"
            # TCP payload per 1514-byte frame: 1448 bytes (timestamps on) -> max 95.64 %
            row "rate ${r} Mbit/s +10 ms" "$(printf 'goodput %.2f Mbit/s = %.1f%% of rate (%.1f%% of max TCP payload rate); wire %.1f%%' \
                "$mbps" "$(echo "$mbps*100/$r" | bc -l)" "$(echo "$mbps*100/($r*1448/1514)" | bc -l)" "$(echo "$util*100/$r" | bc -l)")$BUSY" ">= 97 %"
        done
    fi
    stop_linkem

    echo
    printf '%-34s %-44s %s\n' "test" "result" "target"
    printf '%s\n' "--------------------------------------------------------------------------------------------------------------"
    printf '%s\n' "${ROWS[@]}"
    echo "(linkem args: ${LINKEM_ARGS:-defaults}; load avg at end: $(cut -d' ' -f1-3 /proc/loadavg))"
}

smoke() {
    build
    up
    start_iperf_server
    start_udp_server
    printf '0\n1\n2\n3\n4\n5\n6\n7\n8\n10\n' >"$WORK/t.trace"
    start_linkem '{}'
    local fails=0
    check() { # name, condition (jq expr on {"probe":..,"stats":..}) ,json
        if echo "$3" | jq -e "$2" >/dev/null; then echo "PASS $1"; else echo "FAIL $1: $(echo "$3" | jq -c .)"; fails=$((fails + 1)); fi
    }
    probe() { ip netns exec $C python3 "$HERE/udpping.py" client $S_IP 7777 "$1" 0.002 pipe; }
    run() { # config, probes -> {"probe":..., "stats":...}
        setcfg "$1"; ctl reset >/dev/null
        local p; p=$(probe "$2")
        jq -n --argjson p "$p" --argjson s "$(ctl stats)" '{probe: $p, stats: $s}'
    }
    check "transparent" '.probe.lost == 0 and .stats.up.forwarded == 500' "$(run '{"up":{},"down":{}}' 500)"
    check "delay 10ms each way" '.probe.p50_ms > 20 and .probe.p50_ms < 20.5' "$(run '{"up":{"delay_ms":10},"down":{"delay_ms":10}}' 500)"
    check "random loss 10%" '(.stats.up.lost / .stats.up.received) as $r | $r > 0.07 and $r < 0.13 and .probe.lost == .stats.up.lost' \
        "$(run '{"up":{"loss":{"pct":10}},"down":{}}' 2000)"
    check "gilbert-elliott p=2 r=25 (7.4%)" '(.stats.up.lost / .stats.up.received) as $r | $r > 0.04 and $r < 0.11' \
        "$(run '{"up":{"loss":{"model":"gilbert_elliott","p_pct":2,"r_pct":25}},"down":{}}' 2000)"
    check "duplicate 20%" '(.stats.down.duplicated / .stats.down.received) as $r | $r > 0.15 and $r < 0.25 and .stats.down.forwarded == .stats.down.received + .stats.down.duplicated' \
        "$(run '{"up":{},"down":{"duplicate_pct":20}}' 1000)"
    check "corrupt 5% (caught by UDP checksum)" '.stats.up.corrupted > 40 and .probe.lost == .stats.up.corrupted' \
        "$(run '{"up":{"corrupt_pct":5},"down":{}}' 2000)"
    check "jitter normal, reorder=false keeps order" '.probe.min_ms > 5 and .probe.p99_ms < 40' \
        "$(run '{"up":{"delay_ms":20,"jitter_ms":5,"jitter_dist":"normal"},"down":{}}' 1000)"
    check "onoff 50/50" '.probe.p90_ms > 20 and .probe.min_ms < 1' "$(run '{"up":{"onoff":{"on_ms":50,"off_ms":50}},"down":{}}' 500)"
    setcfg "{\"up\":{\"trace\":\"$WORK/t.trace\"},\"down\":{}}"
    local mbps; mbps=$(DUR=4 iperf_mbps)
    check "mahimahi trace 12 Mbit/s (goodput 11.58)" '. > 11.0 and . < 11.8' "$mbps"
    check "bad set rejected" 'startswith("error: config: up.loss.pct")' "\"$(ctl set '{"up":{"loss":{"pct":120}}}' || true)\""
    setcfg '{"up":{},"down":{}}'
    stop_linkem
    check "final stats written" '.up.forwarded > 0' "$(cat "$WORK/final.json")"
    echo "$fails failed"
    [ "$fails" = 0 ]
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
    smoke) trap cleanup EXIT; smoke ;;
    *) echo "usage: $0 up|down|bench|smoke" >&2; exit 2 ;;
esac
