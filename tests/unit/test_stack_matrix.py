"""The stack matrix: pairs a stack cannot do are refused before a run (the drivers' declared
capabilities), and the matrix view's grids (senders × receivers against the TCP reference)."""

from pathlib import Path
from typing import ClassVar

import pytest

from quicbench import stats
from quicbench.analysis.load import frame_from_rows
from quicbench.analysis.matrix import grids_from_rows, has_matrix
from quicbench.analysis.tables import Method
from quicbench.errors import QuicbenchError
from quicbench.model.plan import plan_from_dict
from quicbench.run.preflight import check_plan
from quicbench.servers import SERVERS
from quicbench.servers.aioquic import AioquicServer
from quicbench.servers.base import Server

BASE = {"name": "pairs", "repetitions": 2, "workloads": [{"size": "10KB", "count": 1}],
        "conditions": [{"name": "c", "delay_ms": 5}]}


def refused(**kw) -> str:
    with pytest.raises(QuicbenchError) as e:
        check_plan(plan_from_dict({**BASE, **kw}))
    msg = str(e.value)
    assert len(msg.splitlines()) == 1
    return msg


def test_a_browser_with_a_download_workload_is_refused_naming_the_pair():
    msg = refused(protocols=["h3"], client=["qb-load", "browser"])
    assert "the pair browser × workload 1x10KB/p1 (kind objects)" in msg
    assert "browser runs page" in msg and "qb-load" in msg and "aioquic" in msg


class HqServer(Server):
    """A transport-only sender (QUIC without HTTP/3), as s2n-quic's hq-interop would be."""
    name = "toy-hq"
    protocols = frozenset({"h3"})
    binary = "toy-hq"
    install_hint = "none"
    quic_stack = "toy-quic"
    quic_app = "hq-interop"
    quic_ccs: ClassVar[tuple[str, ...]] = ("cubic",)

    def argv(self) -> list[str]:
        return []

    @classmethod
    def version_text(cls) -> str:
        return "0"


def test_a_transport_only_sender_with_an_http3_receiver_is_refused(monkeypatch):
    monkeypatch.setitem(SERVERS._drivers, HqServer.name, HqServer)
    msg = refused(protocols=["h3"], servers={"h3": ["caddy", "toy-hq"]}, client=["qb-load", "aioquic"])
    assert "the pair toy-hq → qb-load cannot run" in msg
    assert "hq-interop (transport-only, no HTTP/3) over toy-quic" in msg and "h3 over quic-go" in msg


def test_a_quic_cc_the_stack_lacks_is_refused_with_what_each_server_offers():
    msg = refused(protocols=["h3"], servers={"h3": ["ngtcp2", "aioquic"]}, quic_cc={"aioquic": "bbr"})
    assert "aioquic cannot set its QUIC sender to 'bbr'" in msg and "aioquic: reno, cubic" in msg


def test_pairs_every_stack_can_do_pass():
    check_plan(plan_from_dict({**BASE, "protocols": ["h1", "h2", "h3"], "servers": {"h3": ["caddy", "aioquic"]},
                               "client": ["qb-load", "aioquic"], "quic_cc": {"aioquic": ["reno", "cubic"]}}))
    check_plan(plan_from_dict({**BASE, "protocols": ["h3"], "browser": ["chromium", "firefox"],
                               "workloads": [{"kind": "page", "size": "10KB", "count": 1}]}))


def test_aioquic_reports_the_controller_it_ran_for_the_trials_connections(tmp_path: Path):
    srv = AioquicServer.__new__(AioquicServer)
    srv.workdir = tmp_path
    (tmp_path / "aioquic.log").write_text("serving /x over HTTP/3\n"
                                          "connection 0a1b from 198.18.0.2:4433: congestion control cubic\n"
                                          "connection ffee from 198.18.0.2:4434: congestion control reno\n")
    trial = tmp_path / "t"
    trial.mkdir()
    assert srv.reported_cc([trial / "0a1b.qlog"], trial) == "cubic"
    assert "0a1b" in (trial / "server-cc.log").read_text() and "ffee" not in (trial / "server-cc.log").read_text()
    assert srv.reported_cc([], trial) is None


# -- the matrix view's data -------------------------------------------------------------------------
def rows(protocol, server, client, goodputs, tcp_cc="cubic", quic_cc=None, condition="fast", status="ok", first=1):
    return [{"key": f"{condition}|w|{protocol}|{server}|{client}|{tcp_cc}|{quic_cc}|r{i}", "seq": i,
             "protocol": protocol, "server": server, "client": client, "tcp_cc": tcp_cc, "quic_cc": quic_cc,
             "status": status, "goodput_mbps": g, "bytes": 20_000_000, "server_cpu_s": 0.2, "client_cpu_s": 0.4,
             "condition": condition, "workload": "1x20MB/p1", "rep": i, "server_stack": f"{server} 1.0",
             "quic_client_received": 1000 if protocol == "h3" else None,
             "quic_client_acks_sent": 400 if protocol == "h3" else None,
             "client_stack": f"{client} 2.0"} for i, g in enumerate(goodputs, first)]


NOISE = (0.98, 1.01, 1.0, 0.99, 1.02)


def matrix_rows(condition="fast"):
    out = rows("h1", "caddy", "qb-load", [100 * x for x in NOISE], condition=condition)
    out += rows("h2", "caddy", "qb-load", [200 * x for x in NOISE], tcp_cc="bbr", condition=condition)
    out += rows("h3", "caddy", "qb-load", [400 * x for x in NOISE], quic_cc="reno", condition=condition)
    out += rows("h3", "caddy", "aioquic", [100 * x for x in NOISE], quic_cc="reno", condition=condition)
    out += rows("h3", "ngtcp2", "qb-load", [201 * x for x in NOISE], quic_cc="cubic", condition=condition)
    out += rows("h3", "ngtcp2", "aioquic", [150, 250], quic_cc="cubic", condition=condition)
    out += rows("h3", "ngtcp2", "aioquic", [None], quic_cc="cubic", condition=condition, status="failed", first=3)
    return out


def test_one_grid_per_condition_senders_as_rows_receivers_as_columns():
    df = frame_from_rows(matrix_rows("fast") + matrix_rows("cellular"))
    grids = grids_from_rows(df, Method())
    assert [(g.condition, g.workload) for g in grids] == [("fast", "1x20MB/p1"), ("cellular", "1x20MB/p1")]
    g = grids[0]
    assert g.senders == ["caddy", "ngtcp2"] and g.receivers == ["aioquic", "qb-load"]
    assert set(g.cells) == {(s, r) for s in g.senders for r in g.receivers}


def test_each_cell_is_judged_against_the_fastest_tcp_reference():
    g = grids_from_rows(frame_from_rows(matrix_rows()), Method())[0]
    assert g.reference == "h2/bbr" and g.reference_n == 5 and g.reference_mean == pytest.approx(200, rel=0.01)
    fast, slow, same, few = (g.cells[k] for k in [("caddy", "qb-load"), ("caddy", "aioquic"), ("ngtcp2", "qb-load"),
                                                  ("ngtcp2", "aioquic")])
    assert fast.verdict == stats.DIFFERENT and fast.tone == "faster" and fast.ratio == pytest.approx(2, rel=0.01)
    assert slow.tone == "slower" and slow.ratio == pytest.approx(0.5, rel=0.01)
    assert same.verdict == stats.EQUIVALENT and same.tone == "equivalent"
    assert few.verdict == stats.N_TOO_SMALL and few.tone == "few" and few.n == 2 and few.failed == 1
    assert g.n_tests == 3                      # Holm over the cells that were tested
    assert fast.sender_cpu_s_per_gb == pytest.approx(10) and fast.receiver_cpu_s_per_gb == pytest.approx(20)
    assert fast.server_stack == "caddy 1.0" and fast.client_stack == "qb-load 2.0"
    assert fast.trials == (1, 2, 3, 4, 5) and fast.ack_ratio == pytest.approx(2.5)
    assert g.anchor("caddy", "qb-load") == "mx-fast-1x20MB-p1-caddy-qb-load"


def test_the_grid_keeps_every_tcp_cell_and_counts_its_cpu_bound_trials():
    r = matrix_rows()
    for x in r:
        x["cpu_bound"] = x["protocol"] != "h1"
    g = grids_from_rows(frame_from_rows(r), Method())[0]
    assert list(g.tcp) == ["h1/cubic", "h2/bbr"]
    assert g.tcp["h2/bbr"].mean == pytest.approx(200, rel=0.01) and g.tcp["h2/bbr"].n == 5
    assert g.tcp["h1/cubic"].sender_cpu_s_per_gb == pytest.approx(10) and g.tcp["h1/cubic"].cpu_bound == 0
    assert g.trials == 27 and g.cpu_bound == 22 and not g.all_cpu_bound
    for x in r:
        x["cpu_bound"] = True
    assert grids_from_rows(frame_from_rows(r), Method())[0].all_cpu_bound


def test_flow_control_blocked_frames_are_per_trial_where_the_sender_logs_them():
    r = matrix_rows()
    for x in r:
        if x["server"] == "ngtcp2" and x["protocol"] == "h3":
            x["quic_fc_blocked"] = 3 if x["rep"] % 2 else 5
    g = grids_from_rows(frame_from_rows(r), Method())[0]
    assert g.cells[("ngtcp2", "qb-load")].fc_blocked == pytest.approx((3 + 5 + 3 + 5 + 3) / 5)
    assert g.cells[("caddy", "qb-load")].fc_blocked is None       # not written: unknown, not 0


def test_a_sender_swept_over_its_controllers_is_one_row_per_controller():
    r = matrix_rows() + rows("h3", "ngtcp2", "qb-load", [300 * x for x in NOISE], quic_cc="bbr")
    g = grids_from_rows(frame_from_rows(r), Method())[0]
    assert g.senders == ["caddy", "ngtcp2/bbr", "ngtcp2/cubic"]
    assert g.cells[("ngtcp2/bbr", "qb-load")].tone == "faster"


def test_no_grid_without_several_senders_and_several_receivers():
    one_receiver = [r for r in matrix_rows() if r["client"] == "qb-load"]
    assert not has_matrix(frame_from_rows(one_receiver)) and grids_from_rows(frame_from_rows(one_receiver)) == []
    one_sender = [r for r in matrix_rows() if r["server"] == "caddy"]
    assert grids_from_rows(frame_from_rows(one_sender)) == []


def test_without_a_tcp_reference_no_cell_gets_a_verdict():
    r = [x for x in matrix_rows() if x["protocol"] == "h3"]
    g = grids_from_rows(frame_from_rows(r), Method())[0]
    assert g.reference is None and {c.verdict for c in g.cells.values()} == {stats.N_TOO_SMALL}


def test_the_grid_table_marks_each_cell_by_its_verdict():
    from quicbench.report.matrix import details_table, grid_table
    g = grids_from_rows(frame_from_rows(matrix_rows()), Method())[0]
    t = grid_table(g)
    assert t.headers == ["sender \\ receiver", "aioquic", "qb-load"]
    assert [r[0] for r in t.rows] == ["caddy", "ngtcp2"]
    assert "▲" in t.rows[0][2] and "▼" in t.rows[0][1] and "≈" in t.rows[1][2] and "·" in t.rows[1][1]
    d = details_table(g)
    assert [r[0] for r in d.rows] == ["caddy → aioquic", "caddy → qb-load", "ngtcp2 → aioquic", "ngtcp2 → qb-load"]
    assert d.rows[1][-1] == "00001 00002 00003 00004 00005"


def test_run_refuses_a_stack_not_installed_here_unless_only_leaves_it_out():
    p = plan_from_dict({**BASE, "protocols": ["h3"], "client": ["here", "nowhere"], "servers": {"h3": "srv"},
                        "client_commands": {"here": {"command": "/bin/true {url}", "protocols": ["h3"]},
                                            "nowhere": {"command": "/nonexistent/get {url}", "protocols": ["h3"]}},
                        "server_commands": {"srv": {"command": "/bin/true {listen}", "protocols": ["h3"]}}})
    with pytest.raises(QuicbenchError) as e:
        check_plan(p, "m.toml", installed=True)
    assert str(e.value).startswith("m.toml: client nowhere cannot run on this host: ")
    assert "'/nonexistent/get' not found" in str(e.value)
    check_plan(p, "m.toml", installed=True, only={"client": ["here"]})


def test_the_receivers_ack_ratio_comes_from_its_qlog(tmp_path: Path):
    import json as _json
    from quicbench.run.recovery import quic_client_columns
    events = [{"time": i, "name": "transport:packet_received",
               "data": {"header": {"packet_type": "1RTT", "packet_number": i}, "frames": [{"frame_type": "stream"}]}}
              for i in range(6)]
    events += [{"time": 7 + i, "name": "transport:packet_sent",
                "data": {"header": {"packet_type": "1RTT", "packet_number": i},
                         "frames": [{"frame_type": "ack", "acked_ranges": [[0, 2 * i + 1]]}] if i < 3 else
                         [{"frame_type": "stream"}]}} for i in range(4)]
    qdir = tmp_path / "qlog"
    qdir.mkdir()
    (qdir / "c.qlog").write_text(_json.dumps({"traces": [{"events": events}]}))
    cols = quic_client_columns(qdir)
    assert cols["quic_client_received"] == 6 and cols["quic_client_acks_sent"] == 3
    assert cols["quic_client_ack_ratio"] == pytest.approx(2.0)


def test_the_report_draws_the_grid_coloured_and_linked_to_its_details(tmp_path: Path):
    import json as _json
    from collections import defaultdict
    from quicbench.analysis.load import load_run
    from quicbench.analysis.report_data import build_report_data
    from quicbench.report.html import render_report
    from quicbench.report.markdown import render_markdown
    (tmp_path / "trials.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in matrix_rows()))
    (tmp_path / "meta.json").write_text(_json.dumps({"run_id": "m", "plan": {"name": "matrix"}}))
    data = build_report_data(load_run(tmp_path))
    assert [(g.condition, g.reference) for g in data.matrix] == [("fast", "h2/bbr")]
    html = render_report(data, plots=defaultdict(list))     # no figures: the section is a table
    anchor = data.matrix[0].anchor("caddy", "qb-load")
    assert 'id="matrix"' in html and '<a href="#matrix">Stack matrix</a>' in html and f'<td class="mx-faster"><a href="#{anchor}">' in html
    assert f'<tr id="{anchor}">' in html and 'class="mx-slower"' in html and 'class="mx-equivalent"' in html
    assert 'class="matrix-tcp"' in html and "h2/bbr (reference)" in html
    md = render_markdown(data)
    assert "## Stack matrix" in md and "| caddy | 99.99 0.50× ▼ | 400 2.00× ▲ |" in md   # geometric means
    assert "| h2/bbr (reference) | 200 [" in md and "were CPU-bound" not in md


def test_a_grid_whose_every_trial_was_cpu_bound_says_cpu_per_gb_is_the_measurement():
    from quicbench.report.matrix import cpu_note
    r = matrix_rows()
    for x in r:
        x["cpu_bound"] = True
    g = grids_from_rows(frame_from_rows(r), Method())[0]
    assert cpu_note(g).startswith("All 27 trials of this grid were CPU-bound")


def test_aioquic_losses_are_counted_from_its_qlog(tmp_path: Path):
    """aioquic's packet_lost names the packet at the top of its data, not in a header."""
    import json as _json
    from quicbench.run.recovery import quic_counts
    sent = [{"time": i, "name": "transport:packet_sent",
             "data": {"header": {"packet_type": "1RTT", "packet_number": i}, "frames": []}} for i in range(4)]
    lost = [{"time": 5, "name": "recovery:packet_lost", "data": {"type": "1RTT", "packet_number": n}} for n in (1, 2)]
    ack = [{"time": 6, "name": "transport:packet_received",
            "data": {"header": {"packet_type": "1RTT", "packet_number": 0},
                     "frames": [{"frame_type": "ack", "acked_ranges": [[0, 1], [3, 3]]}]}}]
    f = tmp_path / "ab.qlog"
    f.write_text(_json.dumps({"qlog_format": "JSON", "traces": [{"events": sent + lost + ack}]}))
    c = quic_counts(f)
    assert c["sent"] == 4 and c["lost"] == 2 and c["spurious"] == 1 and c["untriggered"] == 2


def _qlog(path: Path, sent_frames: list[list[dict]]) -> Path:
    import json as _json
    events = [{"time": i, "name": "transport:packet_sent",
               "data": {"header": {"packet_type": "1RTT", "packet_number": i}, "frames": frames}}
              for i, frames in enumerate(sent_frames)]
    path.write_text(_json.dumps({"traces": [{"events": events}]}))
    return path


def test_flow_control_blocked_frames_the_sender_sent_are_counted_from_its_qlog(tmp_path: Path):
    from quicbench.run.recovery import quic_columns
    stream = [{"frame_type": "stream", "stream_id": 0}]
    a = _qlog(tmp_path / "a_server.qlog", [stream, stream + [{"frame_type": "stream_data_blocked"}],
                                           [{"frame_type": "data_blocked"}, {"frame_type": "ack"}], stream])
    b = _qlog(tmp_path / "b_server.qlog", [stream + [{"frame_type": "streams_blocked"}]])   # not flow control
    assert quic_columns([a, b])["quic_fc_blocked"] == 2
    assert quic_columns([a, b], blocked_frames=False)["quic_fc_blocked"] is None     # a stack that never sends them
    bare = _qlog(tmp_path / "c_server.qlog", [[], []])          # no frames logged: cannot say
    assert quic_columns([bare])["quic_fc_blocked"] is None and quic_columns([a, bare])["quic_fc_blocked"] is None
    silent = _qlog(tmp_path / "d_server.qlog", [])              # a connection that sent no packet
    assert quic_columns([a, silent])["quic_fc_blocked"] == 2


def test_only_the_stacks_that_never_send_blocked_frames_say_so():
    from quicbench.servers.caddy import CaddyServer
    from quicbench.servers.quinn import QuinnServer
    assert not QuinnServer.quic_blocked_frames and not AioquicServer.quic_blocked_frames
    assert CaddyServer.quic_blocked_frames
