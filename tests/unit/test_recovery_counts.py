"""Loss-recovery counts from the sender's kernel counters and from qlog (run/recovery.py)."""

import json

from quicbench.run.recovery import parse_counters, quic_client_columns, quic_columns, quic_counts, tcp_columns

NETSTAT = """TcpExt: SyncookiesSent TCPSACKReorder TCPTSReorder TCPFullUndo TCPDSACKUndo TCPLossUndo TCPSpuriousRTOs TCPDSACKRecvSegs
TcpExt: 0 {reo} 1 2 0 1 0 {dsack}
IpExt: InNoRoutes
IpExt: 0
Tcp: RtoAlgorithm OutSegs RetransSegs
Tcp: 1 {out} {retrans}
"""


def test_tcp_columns_are_the_counters_differences():
    before = parse_counters(NETSTAT.format(reo=3, dsack=10, out=1000, retrans=7))
    after = parse_counters(NETSTAT.format(reo=8, dsack=25, out=9000, retrans=40))
    assert before["Tcp:OutSegs"] == 1000 and before["TcpExt:TCPTSReorder"] == 1
    cols = tcp_columns(before, after)
    assert cols == {"tcp_out_segs": 8000, "tcp_retrans_segs": 33, "tcp_dsack_segs": 15, "tcp_reorder_events": 5,
                    "tcp_loss_undos": 0, "tcp_spurious_rtos": 0}
    assert tcp_columns(None, after) == {}


def write_sqlog(path, events):
    head = {"qlog_format": "JSON-SEQ", "trace": {"vantage_point": {"type": "server"}}}
    path.write_bytes(b"".join(b"\x1e" + json.dumps(e).encode() + b"\n" for e in [head, *events]))


def test_a_lost_packet_acknowledged_later_was_a_spurious_loss(tmp_path):
    sent = [{"name": "transport:packet_sent", "data": {"header": {"packet_type": "1RTT", "packet_number": n}}}
            for n in range(10)]
    lost = [{"name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT", "packet_number": 3},
                                                     "trigger": "reordering_threshold"}},
            {"name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT", "packet_number": 5},
                                                     "trigger": "time_threshold"}},
            # a handshake packet number 4 lost: another space than the 1-RTT ack of 4 below
            {"name": "recovery:packet_lost", "data": {"header": {"packet_type": "handshake", "packet_number": 4},
                                                     "trigger": "time_threshold"}}]
    # the client acknowledges 0-4 and 6-9: packet 3 was only late, 5 was really lost
    ack = {"name": "transport:packet_received", "data": {"header": {"packet_type": "1RTT", "packet_number": 2},
                                                         "frames": [{"frame_type": "ack",
                                                                     "acked_ranges": [[0, 4], [6, 9]]}]}}
    f = tmp_path / "a_server.sqlog"
    write_sqlog(f, [*sent, *lost, ack])
    with open(f, "ab") as out:
        out.write(b"\x1e{\"name\": \"transport:packet_se")     # torn by a writer still at it
    assert quic_counts(f) == {"sent": 10, "lost": 3, "reordering": 1, "time": 2, "untriggered": 0, "spurious": 1,
                              "received": 1, "out_of_order": 0, "acks_sent": 0, "blocked_sent": None, "ss_exit_cwnd": None,
                              "ss_exit_without_loss": None}
    g = tmp_path / "b_server.sqlog"
    write_sqlog(g, sent[:4])
    cols = quic_columns([f, g])
    assert cols["quic_packets_sent"] == 14 and cols["quic_lost_spurious"] == 1 and cols["quic_qlog_connections"] == 2
    assert quic_columns([]) == {}


def congestion(new_state):
    return {"name": "recovery:congestion_state_updated", "data": {"new": new_state}}


def window(cwnd):
    return {"name": "recovery:metrics_updated", "data": {"congestion_window": cwnd, "bytes_in_flight": 0}}


def test_slow_starts_end_is_the_window_when_the_sender_first_left_it_and_whether_a_loss_ended_it(tmp_path):
    """quic-go's qlog: slow start paused by application_limited is not its end; the first move to
    congestion avoidance or recovery is, with the window of the last metrics update before it."""
    lost = {"name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT", "packet_number": 7},
                                                    "trigger": "reordering_threshold"}}
    by_delay = tmp_path / "d_server.sqlog"
    write_sqlog(by_delay, [congestion("slow_start"), window(38400), congestion("application_limited"),
                           congestion("slow_start"), window(187200), congestion("congestion_avoidance"),
                           window(190000), lost, congestion("recovery")])
    by_loss = tmp_path / "l_server.sqlog"
    write_sqlog(by_loss, [congestion("slow_start"), window(38400), window(709200), lost, congestion("recovery"),
                          window(354600), congestion("congestion_avoidance")])
    never = tmp_path / "n_server.sqlog"      # a short transfer that ended in slow start
    write_sqlog(never, [congestion("slow_start"), window(38400)])
    assert (quic_counts(by_delay)["ss_exit_cwnd"], quic_counts(by_delay)["ss_exit_without_loss"]) == (187200, 1)
    assert (quic_counts(by_loss)["ss_exit_cwnd"], quic_counts(by_loss)["ss_exit_without_loss"]) == (709200, 0)
    assert quic_counts(never)["ss_exit_cwnd"] is None
    cols = quic_columns([by_delay, by_loss, never])
    assert cols["quic_ss_exit_cwnd"] == (187200 + 709200) // 2 and cols["quic_ss_exit_without_loss"] == 1
    assert quic_columns([never])["quic_ss_exit_cwnd"] is None


def test_ngtcp2s_qlog_counts_losses_without_a_trigger(tmp_path):
    """ngtcp2 1.11 (qlog 0.3): recovery:packet_lost has only the header; its losses count, the split
    by trigger stays empty (not 0)."""
    f = tmp_path / "33116c25e9f866dd53baba0db35a67b7e00c.sqlog"
    head = {"qlog_format": "JSON-SEQ", "qlog_version": "0.3",
            "trace": {"vantage_point": {"name": "ngtcp2", "type": "server"}}}
    sent = [{"time": 1, "name": "transport:packet_sent",
             "data": {"header": {"packet_type": "1RTT", "packet_number": n}, "frames": [{"frame_type": "stream"}]}}
            for n in range(100, 106)]
    lost = [{"time": 11, "name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT", "packet_number": n}}}
            for n in (101, 102)]
    ack = {"time": 12, "name": "transport:packet_received",
           "data": {"header": {"packet_type": "1RTT", "packet_number": 7},
                    "frames": [{"frame_type": "ack", "ack_delay": 0, "acked_ranges": [[100], [102, 105]]}]}}
    write_sqlog(f, [head, *sent, *lost, ack])
    c = quic_counts(f)
    assert (c["sent"], c["lost"], c["untriggered"], c["spurious"]) == (6, 2, 2, 1)
    cols = quic_columns([f])
    assert cols["quic_lost"] == 2 and cols["quic_lost_spurious"] == 1
    assert cols["quic_lost_reordering"] is None and cols["quic_lost_time"] is None


def test_the_client_counts_packets_that_arrived_out_of_order(tmp_path):
    got = [{"name": "transport:packet_received", "data": {"header": {"packet_type": t, "packet_number": n}}}
           for t, n in (("initial", 0), ("handshake", 0), ("1RTT", 0), ("1RTT", 1), ("1RTT", 4), ("1RTT", 2),
                        ("1RTT", 3), ("1RTT", 5), ("handshake", 1))]
    d = tmp_path / "qlog"
    d.mkdir()
    write_sqlog(d / "c_client.sqlog", got)
    cols = quic_client_columns(d)
    # 2 and 3 came after 4: reordered; the spaces count apart (handshake 1 after 1-RTT 5 is in order)
    assert cols["quic_client_received"] == 9 and cols["quic_client_out_of_order"] == 2
    assert quic_client_columns(tmp_path / "none") == {}


QUINN_TITLE = ("quicbench-h3server 0.1.0 (quinn 0.11.12, quinn-proto 0.11.19, h3 0.0.8, h3-quinn 0.0.10, "
               "rustls 0.23.46)")


def write_quinn_sqlog(path, events):
    """As quinn-proto 0.11 writes it: the title in the header, RTTs in seconds, no ack frames."""
    head = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "title": QUINN_TITLE,
            "trace": {"vantage_point": {"type": "unknown"}, "title": QUINN_TITLE}}
    path.write_bytes(b"".join(b"\x1e" + json.dumps(e).encode() + b"\n" for e in [head, *events]))


def _ev(t, name, **data):
    return {"time": t, "name": name, "data": data}


def _pkt(t, name, pn, **extra):
    return _ev(t, name, header={"packet_type": "1RTT", "packet_number": pn}, **extra)


def test_quinn_triggers_are_recomputed_and_spurious_losses_come_from_the_client(tmp_path):
    """quinn-proto 0.11.19 labels every loss reordering_threshold and logs no acks: the reader
    classifies by quinn's own rule (age >= 9/8 x max(srtt, latest), with the RTT the same ACK
    brought) and counts as spurious the lost packets the client's qlog received."""
    bogus = {"trigger": "reordering_threshold"}
    events = [_ev(0.0, "recovery:metrics_updated", smoothed_rtt=0.02, latest_rtt=0.02)]   # loss delay 22.5 ms
    events += [_pkt(1.0 + n / 10, "transport:packet_sent", n) for n in range(10)]
    events += [
        # an ACK at 21.5 ms: packet 2 is 20.3 ms old, under the loss delay: the packet threshold
        _pkt(21.5, "transport:packet_received", 0), _pkt(21.5, "recovery:packet_lost", 2, **bogus),
        _ev(21.5, "recovery:metrics_updated", latest_rtt=0.0205),
        # the loss timer at 30 ms: packet 5 is 28.5 ms old: the time threshold
        _pkt(30.0, "recovery:packet_lost", 5, **bogus), _ev(30.0, "recovery:metrics_updated", bytes_in_flight=1),
        # packet 7, 38.3 ms old, declared on an ACK whose RTT sample raised the loss delay to 45 ms
        _pkt(40.0, "transport:packet_received", 1), _pkt(40.0, "recovery:packet_lost", 7, **bogus),
        _ev(40.0, "recovery:metrics_updated", smoothed_rtt=0.04, latest_rtt=0.04),
        # packet 8 by the loss timer, exactly the loss delay old give or take f32 rounding
        _pkt(46.795, "recovery:packet_lost", 8, **bogus),
    ]
    f = tmp_path / "abcd_server.sqlog"
    write_quinn_sqlog(f, events)
    client = tmp_path / "qlog"
    client.mkdir()
    write_sqlog(client / "abcd_client.sqlog", [_pkt(20.0 + n, "transport:packet_received", n)
                                               for n in range(10) if n not in (5, 8)])
    assert quic_counts(f) == {"sent": 10, "lost": 4, "reordering": 2, "time": 2, "untriggered": 0, "spurious": None,
                              "received": 2, "out_of_order": 0, "acks_sent": 0, "blocked_sent": None,
                              "ss_exit_cwnd": None, "ss_exit_without_loss": None}
    assert quic_counts(f, client / "abcd_client.sqlog")["spurious"] == 2      # 2 and 7 arrived
    cols = quic_columns([f], client)
    assert (cols["quic_lost"], cols["quic_lost_reordering"], cols["quic_lost_time"], cols["quic_lost_spurious"]) == \
        (4, 2, 2, 2)
    # no client qlog (another client, or qlog off at the client): spurious is unknown, not 0
    assert quic_columns([f], tmp_path / "none")["quic_lost_spurious"] is None
    assert quic_columns([f])["quic_lost_spurious"] is None


def test_a_quic_go_qlog_keeps_its_own_triggers(tmp_path):
    """The recomputation is quinn's only: quic-go's triggers are taken as written."""
    f = tmp_path / "x_server.sqlog"
    write_sqlog(f, [_pkt(1.0, "transport:packet_sent", 0), _pkt(500.0, "recovery:packet_lost", 0,
                                                                 trigger="reordering_threshold")])
    assert quic_counts(f)["reordering"] == 1 and quic_counts(f)["spurious"] == 0


def test_server_qlogs_are_taken_once_the_server_closed_them(tmp_path):
    """A qlog still open (<name>.part, quinn's) is waited for until renamed, at most settle_s;
    past that it is taken as it is, under its final name."""
    import threading
    from quicbench.run.recovery import take_server_qlogs
    d = tmp_path / "qlog"
    d.mkdir()
    (d / "a_server.sqlog").write_text("a")
    (d / "b_server.sqlog.part").write_text("b")
    threading.Timer(0.2, lambda: (d / "b_server.sqlog.part").rename(d / "b_server.sqlog")).start()
    got = take_server_qlogs(d, tmp_path / "t1")
    assert [p.name for p in got] == ["a_server.sqlog", "b_server.sqlog"] and list(d.iterdir()) == []
    (d / "c_server.sqlog.part").write_text("c")       # its connection never closed
    got = take_server_qlogs(d, tmp_path / "t2", settle_s=0.1)
    assert [p.name for p in got] == ["c_server.sqlog"] and got[0].read_text() == "c"
