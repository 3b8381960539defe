"""Congestion control as a plan dimension (quic_cc, tcp_cc): expansion, keys, refusals, labels; and
how the ngtcp2 drivers read their stack's own reports (the sender's cc lines, the client's qlog)."""

import json

import pytest

from quicbench.analysis.load import frame_from_rows
from quicbench.errors import QuicbenchError
from quicbench.model.plan import expand, plan_from_dict
from quicbench.run.preflight import check_plan
from quicbench.run.session import server_ports
from quicbench.run.trial import cc_mismatch

BASE = {"name": "cc", "repetitions": 2, "workloads": [{"size": "10KB", "count": 1}],
        "conditions": [{"name": "c", "delay_ms": 5}]}


def plan(**kw):
    return plan_from_dict({**BASE, **kw})


# the keys, in order, of a plan without congestion-control keys as quicbench expanded it before the
# dimension existed (server sweep, two clients, a client command): resumed runs keep their keys
OLD_KEYS = ['c|1x1MB/p1|h3~qb-load|caddy|r2',
            'c|1x1MB/p1|h3~qb-load|caddy-2.6|r2',
            'c|1x1MB/p1|h1~curl|caddy|r2',
            'c|1x1MB/p1|h2~curl|caddy|r2',
            'c|1x1MB/p1|h1~qb-load|caddy|r2',
            'c|1x1MB/p1|h2~qb-load|caddy|r2',
            'c|1x10KB/p1|h2~qb-load|caddy|r1',
            'c|1x10KB/p1|h3~qb-load|caddy|r1',
            'c|1x10KB/p1|h1~qb-load|caddy|r1',
            'c|1x10KB/p1|h1~curl|caddy|r1',
            'c|1x10KB/p1|h2~curl|caddy|r1',
            'c|1x10KB/p1|h3~qb-load|caddy-2.6|r1',
            'c|1x1MB/p1|h1~curl|caddy|r1',
            'c|1x1MB/p1|h3~qb-load|caddy-2.6|r1',
            'c|1x1MB/p1|h2~qb-load|caddy|r1',
            'c|1x1MB/p1|h3~qb-load|caddy|r1',
            'c|1x1MB/p1|h2~curl|caddy|r1',
            'c|1x1MB/p1|h1~qb-load|caddy|r1',
            'c|1x10KB/p1|h1~curl|caddy|r2',
            'c|1x10KB/p1|h1~qb-load|caddy|r2',
            'c|1x10KB/p1|h3~qb-load|caddy|r2',
            'c|1x10KB/p1|h2~qb-load|caddy|r2',
            'c|1x10KB/p1|h2~curl|caddy|r2',
            'c|1x10KB/p1|h3~qb-load|caddy-2.6|r2']


def test_a_plan_without_cc_keys_keeps_its_keys_and_order():
    p = plan_from_dict({"name": "cc", "repetitions": 2, "protocols": ["h1", "h2", "h3"],
                        "servers": {"h3": ["caddy", "caddy-2.6"]}, "client": ["qb-load", "curl"],
                        "client_commands": {"curl": {"command": "curl {url}", "protocols": ["h1", "h2"]}},
                        "workloads": [{"size": "10KB", "count": 1}, {"size": "1MB", "count": 1}],
                        "conditions": [{"name": "c", "delay_ms": 5}]})
    assert [t.key for t in expand(p)] == OLD_KEYS
    assert all(t.quic_cc is None and not t.sweeps_tcp_cc and t.server_instance == t.server for t in expand(p))


def test_tcp_cc_list_sweeps_h1_h2_trials_only():
    trials = expand(plan(protocols=["h2", "h3"], tcp_cc=["cubic", "bbr"]))
    h2 = [t for t in trials if t.protocol == "h2"]
    h3 = [t for t in trials if t.protocol == "h3"]
    assert sorted(t.tcp_cc for t in h2) == ["bbr", "bbr", "cubic", "cubic"] and len(h3) == 2
    assert {t.key.split("|")[2] for t in h2} == {"h2/cubic", "h2/bbr"}
    assert {t.key.split("|")[2] for t in h3} == {"h3"}                  # h3 does not use TCP
    assert all(t.tcp_cc == "cubic" for t in h3)      # its nodes keep the first (background TCP flows)
    assert len({t.key for t in trials}) == len(trials)


def test_quic_cc_makes_a_server_instance_per_congestion_controller():
    p = plan(protocols=["h3"], servers={"h3": ["caddy", "ngtcp2"]}, quic_cc={"ngtcp2": ["cubic", "bbr"]})
    check_plan(p)
    trials = expand(p)
    assert sorted({t.server_instance for t in trials}) == ["caddy", "ngtcp2/bbr", "ngtcp2/cubic"]
    assert {t.key.split("|")[3] for t in trials} == {"caddy", "ngtcp2/bbr", "ngtcp2/cubic"}
    assert {t.quic_cc for t in trials if t.server == "caddy"} == {None}
    assert server_ports(trials) == {"caddy": 443, "ngtcp2/bbr": 1443, "ngtcp2/cubic": 2443}
    assert len(trials) == 3 * 2
    only = expand(p, only={"quic_cc": ["bbr"]})
    assert {t.server_instance for t in only} == {"ngtcp2/bbr"}


def test_quic_cc_for_every_h3_server_and_the_default():
    p = plan(protocols=["h3"], servers={"h3": "ngtcp2"}, quic_cc="reno")
    check_plan(p)
    assert {t.server_instance for t in expand(p)} == {"ngtcp2/reno"}
    d = plan(protocols=["h3"], servers={"h3": "ngtcp2"})
    assert {t.server_instance for t in expand(d)} == {"ngtcp2"}          # its default, cubic


@pytest.mark.parametrize("kw,needle", [
    ({"protocols": ["h3"], "quic_cc": "bbr"}, "quic_cc: caddy cannot set its QUIC sender to 'bbr'; accepted per "
                                              "server: caddy: none (its sender is reno, fixed)"),
    ({"protocols": ["h3"], "servers": {"h3": ["caddy", "ngtcp2"]}, "quic_cc": ["cubic", "bbr"]},
     "ngtcp2: cubic, reno, bbr"),
    ({"protocols": ["h3"], "servers": {"h3": "ngtcp2"}, "quic_cc": "vegas"}, "'vegas'"),
    ({"protocols": ["h3"], "servers": {"h3": "ngtcp2"}, "quic_cc": {"caddy": "bbr"}}, "quic_cc.caddy"),
    ({"protocols": ["h2"], "quic_cc": "bbr"}, "no h3 trials"),
    ({"protocols": ["h3"], "tcp_cc": ["cubic", "bbr"]}, "tcp_cc: a list sweeps the h1/h2 trials"),
    ({"protocols": ["h2"], "tcp_cc": ["cubic", "vegas2"]}, "tcp_cc: 'vegas2' is not available"),
])
def test_a_cc_a_server_cannot_honour_is_refused_before_anything_starts(kw, needle):
    with pytest.raises(QuicbenchError) as e:
        check_plan(plan(**kw))
    assert needle in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def row(protocol, server, tcp_cc="cubic", quic_cc=None, client="qb-load"):
    return {"key": f"c|w|{protocol}|{server}|{tcp_cc}|{quic_cc}|{client}", "protocol": protocol, "server": server,
            "client": client, "tcp_cc": tcp_cc, "quic_cc": quic_cc, "status": "ok", "goodput_mbps": 1.0,
            "condition": "c", "workload": "w"}


def test_report_cells_name_the_swept_congestion_control():
    df = frame_from_rows([row("h2", "caddy", "cubic"), row("h2", "caddy", "bbr"),
                          row("h3", "caddy", quic_cc="reno"), row("h3", "ngtcp2", quic_cc="bbr"),
                          row("h3", "ngtcp2", quic_cc="cubic")])
    assert list(df["protocol"]) == ["h2/cubic", "h2/bbr", "h3@caddy/reno", "h3@ngtcp2/bbr", "h3@ngtcp2/cubic"]
    # one cc per protocol (and older runs, whose h3 rows have none): no suffix
    old = frame_from_rows([row("h2", "caddy"), row("h3", "caddy"), row("h3", "caddy", client="curl")])
    assert list(old["protocol"]) == ["h2", "h3~qb-load", "h3~curl"]
    both = frame_from_rows([row("h2", "caddy", "cubic"), row("h2", "caddy", "bbr", client="curl"),
                            row("h2", "caddy", "bbr")])
    assert list(both["protocol"]) == ["h2/cubic~qb-load", "h2/bbr~curl", "h2/bbr~qb-load"]


def test_a_sender_that_reported_another_cc_fails_the_trial():
    assert cc_mismatch("bbr", "bbr", "ngtcp2") is None
    assert cc_mismatch("bbr", None, "ngtcp2") is None            # it reports none: nothing to compare
    err = cc_mismatch("bbr", "cubic", "ngtcp2")
    assert err.startswith("quic_cc: the row says bbr, but ngtcp2's sender reported cubic")


NGTCP2_LOG = """Using document root /srv/
I00000000 0xaaaa cca bbr enter Startup
I00000001 0xaaaa cca bbr update min_rtt=676559
I00000001 0xbbbb cca 1200 bytes acked, slow start cwnd=13200
I00000009 0xbbbb cca 1200 bytes acked, cubic-ca cwnd=40000 k=1 target=1 w_est=1
I00000002 0xcccc cca pkn=12 acked, slow start cwnd=13200
I00000002 0xcccc cca reduce cwnd because of packet loss cwnd=6600
I00000003 0xdddd cca bbr enter Startup
Sent packet: local=[10.0.0.1]:443 remote=[10.0.0.2]:5555 ecn=0x2 1200 bytes
"""


@pytest.mark.parametrize("conns,want", [(["aaaa"], "bbr"), (["bbbb"], "cubic"), (["cccc"], "reno"),
                                        (["aaaa", "bbbb"], "bbr+cubic"), (["eeee"], None)])
def test_ngtcp2s_log_names_the_senders_congestion_controller(tmp_path, conns, want):
    from quicbench.servers.ngtcp2 import Ngtcp2Server
    srv = Ngtcp2Server.__new__(Ngtcp2Server)
    srv.workdir, srv.qlog_dir, srv.cc_log = tmp_path, tmp_path / "qlog", False
    srv.stack_log.write_text(NGTCP2_LOG)
    trial = tmp_path / "trial"
    trial.mkdir()
    qlogs = [trial / f"{c}.sqlog" for c in conns]
    assert srv.reported_cc(qlogs, trial) is None                   # the log is read only with verify_cc
    srv.cc_log = True
    assert srv.reported_cc(qlogs, trial) == want
    assert srv.stack_log.read_text() == ""          # emptied for the next trial
    if want:
        assert all(f"0x{c}" in (trial / "server-cc.log").read_text() for c in conns)


def test_the_ngtcp2_client_qlog_gives_handshake_and_per_stream_times(tmp_path):
    from quicbench.clients.ngtcp2 import read_client_qlog
    head = {"qlog_version": "0.3", "trace": {"common_fields": {"group_id": "abcd"}}}

    def pkt(t, name, ptype, frames):
        return {"time": t, "name": f"transport:packet_{name}", "data": {"header": {"packet_type": ptype},
                                                                        "frames": frames}}
    events = [head, pkt(0, "sent", "initial", [{"frame_type": "crypto"}]),
              pkt(11, "received", "handshake", [{"frame_type": "crypto"}]),
              pkt(11, "sent", "1RTT", [{"frame_type": "stream", "stream_id": 0, "fin": True}]),
              pkt(22, "received", "1RTT", [{"frame_type": "stream", "stream_id": 3, "offset": 0, "length": 9},
                                           {"frame_type": "stream", "stream_id": 0, "offset": 0, "length": 800}]),
              pkt(25, "received", "1RTT", [{"frame_type": "stream", "stream_id": 4, "offset": 0, "length": 800}]),
              pkt(30, "received", "1RTT", [{"frame_type": "stream", "stream_id": 0, "offset": 800, "length": 5,
                                            "fin": True}]),
              pkt(41, "received", "1RTT", [{"frame_type": "stream", "stream_id": 4, "offset": 800, "length": 5,
                                            "fin": True}]),
              pkt(42, "sent", "1RTT", [{"frame_type": "connection_close"}])]
    f = tmp_path / "conn-0.sqlog"
    f.write_bytes(b"".join(b"\x1e" + json.dumps(e).encode() + b"\n" for e in events) + b"\x1e{\"time\": 4")
    c = read_client_qlog(f)
    assert (c.group_id, c.tls_done_ms, c.last_ms) == ("abcd", 11, 42)
    assert c.first_ms == {0: 22, 4: 25} and c.fin_ms == {0: 30, 4: 41}     # the control stream (3) is not a request
