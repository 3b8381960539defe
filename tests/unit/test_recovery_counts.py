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
                              "received": 1, "out_of_order": 0}
    g = tmp_path / "b_server.sqlog"
    write_sqlog(g, sent[:4])
    cols = quic_columns([f, g])
    assert cols["quic_packets_sent"] == 14 and cols["quic_lost_spurious"] == 1 and cols["quic_qlog_connections"] == 2
    assert quic_columns([]) == {}


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
