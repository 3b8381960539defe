"""The terminal summary: 80 columns, per-kind metrics, legend, one sentence per condition; command
endpoints' placeholders and client naming."""

from pathlib import Path

import re
import pytest

from quicbench.analysis.load import RunData, frame_from_rows
from quicbench.endpoints.command import expand_command
from quicbench.errors import QuicbenchError
from quicbench.model.plan import expand, plan_from_dict
from quicbench.report.terminal import render, summary_data

LONG = "a-rather-long-condition-name-from-a-sweep"


def run_of(rows: list[dict], conditions: dict | None = None) -> RunData:
    meta = {"run_id": "t", "conditions": conditions or {}}
    return RunData(Path("/nonexistent"), meta, frame_from_rows(rows))


def row(cond, wl, proto, rep, goodput=None, time_s=None, page=None, client="qb-load", bound=False):
    r = {"key": f"{cond}|{wl}|{proto}~{client}|caddy|r{rep}", "condition": cond, "workload": wl, "protocol": proto,
         "server": "caddy", "client": client, "rep": rep, "status": "ok", "size_bytes": 100_000, "count": 10,
         "parallel": 10, "bytes": 1_000_000, "cpu_bound": bound, "client_cpu_s": 0.05, "server_cpu_s": 0.02}
    if page is None:
        r.update(goodput_mbps=goodput, total_time_s=time_s)
    else:
        r.update(page_load_ms=page, page_ttfb_ms=page / 10, dom_content_loaded_ms=page / 2,
                 workload="page:realistic", key=f"{cond}|page:realistic|{proto}|caddy|r{rep}", kind="page")
    return r


def objects_run(cond=LONG, bound=False):
    rows = []
    for rep in range(1, 6):
        jitter = 0.1 * rep
        rows.append(row(cond, "10x100KB/p10", "h1", rep, 20 + jitter, 0.4))
        rows.append(row(cond, "10x100KB/p10", "h2", rep, 20.05 + jitter, 0.4))
        rows.append(row(cond, "10x100KB/p10", "h3", rep, 30 + jitter, 0.27, bound=bound and rep == 1))
    return rows


def test_fits_80_columns_a_single_long_name_said_once_without_codes():
    text = render(summary_data(run_of(objects_run())), width=80)
    lines = text.splitlines()
    assert max(len(l) for l in lines) <= 80, "\n".join(l for l in lines if len(l) > 80)
    assert lines[0] == "Condition: " + LONG              # said once above the table, not a column
    assert "C1" not in text and " = " + LONG not in text  # no codes, no legend
    assert "Mbit/s" in text and "time s" in text          # objects: goodput and time, units in headers
    assert "load ms" not in text


def several_long(conds: int, wls: list[str]) -> list[dict]:
    rows = []
    for c in range(conds):
        for wl in wls:
            for rep in range(1, 4):
                for proto, g in (("h1", 20), ("h2", 21), ("h3", 30)):
                    rows.append(row(f"{LONG}-{c}", wl, proto, rep, g + 0.1 * rep, 0.4))
    return rows


def test_long_names_are_cut_before_codes_are_used():
    text = render(summary_data(run_of(several_long(2, ["10x100KB/p10", "10x1MB/p10"]))), width=80)
    lines = text.splitlines()
    assert max(len(l) for l in lines) <= 80, "\n".join(l for l in lines if len(l) > 80)
    assert "C1" not in text and "W1" not in text          # the cut names still tell the rows apart
    cut = [l.split()[0] for l in lines if l.startswith("a-rather")]
    assert len(set(cut)) == 2 and all("\u2026" in c and c[-2:] in ("-0", "-1") for c in cut), cut


def test_codes_and_their_legend_only_when_nothing_else_fits():
    wls = [f"a-workload-with-a-long-shared-prefix-{i}" for i in range(3)]
    text = render(summary_data(run_of(several_long(2, wls))), width=60)
    lines = text.splitlines()
    assert max(len(l) for l in lines) <= 60, "\n".join(l for l in lines if len(l) > 60)
    assert "W1 = " + wls[0] in text                        # names alike past the cut: codes, explained


def test_short_names_are_kept():
    text = render(summary_data(run_of(objects_run("clean"))), width=80)
    assert "C1 =" not in text and "clean" in text.splitlines()[3]


def test_sentence_names_fastest_by_how_much_and_significance():
    data = summary_data(run_of(objects_run("clean", bound=True)))
    (s,) = data["sentences"]
    assert s.startswith("Clean: HTTP/3 was fastest")
    # each comparison with its ratio of geometric means and 95 % CI, and its (Holm-adjusted) p
    assert re.search(r"% more goodput than HTTP/\S+ \(HTTP/3/HTTP/\S+ = \d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\], p", s), s
    assert "inconclusive" not in s and "equivalent" not in s        # h3 beats both clearly
    assert "Caveat: 1 trial CPU-bound (HTTP/3: 1)" in s
    text = render(data, width=80)
    assert all(len(l) <= 80 for l in text.splitlines())


def test_inconclusive_is_said_never_equal():
    rows = []
    for rep in range(1, 5):
        rows.append(row("x", "1x1MB/p1", "h1", rep, [10, 12, 9, 11][rep - 1], 1))
        rows.append(row("x", "1x1MB/p1", "h2", rep, [11, 9, 12, 10][rep - 1], 1))
    (s,) = summary_data(run_of(rows))["sentences"]
    assert "had the best geometric mean" in s and "inconclusive" in s and "was fastest" not in s
    assert "trials per protocol would likely decide" in s
    assert "≈" not in s and "equal" not in s and "tied" not in s


def test_equivalence_is_said_when_tested():
    rows = []
    for rep in range(1, 11):
        rows.append(row("x", "1x1MB/p1", "h1", rep, 100 + (rep % 3) * 0.5, 1))
        rows.append(row("x", "1x1MB/p1", "h2", rep, 100.4 + (rep % 2) * 0.5, 1))
    (s,) = summary_data(run_of(rows))["sentences"]
    assert "equivalent to HTTP/1.1 within ±10 %" in s or "equivalent to HTTP/2 within ±10 %" in s, s


def test_page_workloads_get_page_metrics():
    rows = [row("clean", "page:realistic", p, rep, page=ms + rep)
            for rep in range(1, 4) for p, ms in (("h2", 900), ("h3", 700))]
    data = summary_data(run_of(rows))
    text = render(data, width=80)
    assert "load ms" in text and "TTFB ms" in text and "DCL ms" in text and "Mbit/s" not in text
    assert "less page load time than HTTP/2" in data["sentences"][0]


def test_clients_compared_are_not_pooled():
    rows = [row("c", "10x100KB/p10", "h3", rep, g + rep / 10, 0.3, client=cl)
            for rep in range(1, 4) for cl, g in (("qb-load", 20), ("curl", 25))]
    rows += [row("c", "10x100KB/p10", "h2", rep, 15, 0.3) for rep in range(1, 4)]
    run = run_of(rows)
    assert sorted(run.protocols) == ["h2", "h3~curl", "h3~qb-load"]
    assert "HTTP/3~curl was fastest" in summary_data(run)["sentences"][0]


def test_expand_command_words_and_urls():
    argv = expand_command("tool --proto {proto} -o '{dir}/x y' {urls} --n={count}",
                          {"proto": "h3", "dir": "/t", "urls": ["u1", "u2"], "count": 2})
    assert argv == ["tool", "--proto", "h3", "-o", "/t/x y", "u1", "u2", "--n=2"]


@pytest.mark.parametrize("command,needle", [
    ("curl {nope} {url}", "unknown placeholder(s) {nope}; accepted: {url}"),
    ("curl --urls={urls}", "{urls} expands to one argument per object"),
    ("{proto} {url}", "must be named"),
    ("curl {url", "literal brace"),
    ("", "empty command"),
])
def test_bad_client_commands(command, needle):
    with pytest.raises(QuicbenchError, match=None) as e:
        plan_from_dict({"workloads": [{"size": "1MB"}], "client": "c",
                        "client_commands": {"c": {"command": command}}})
    assert needle in str(e.value)


def test_workloads_with_their_own_clients_compare_no_clients():
    """A plan of page loads (browser) and object downloads (qb-load), or plays (video), has one
    client per workload: its protocols keep their names (h3, not h3~browser and h3~qb-load)."""
    rows = [row("c", "10x100KB/p10", p, rep, 20 + rep, 0.3) for p in ("h2", "h3") for rep in range(1, 4)]
    rows += [row("c", "page:realistic", p, rep, page=500 + rep, client="browser") for p in ("h2", "h3")
             for rep in range(1, 4)]
    assert sorted(run_of(rows).protocols) == ["h2", "h3"]


def test_client_sweep_runs_each_client_on_its_protocols():
    plan = plan_from_dict({"workloads": [{"size": "1MB"}], "client": ["qb-load", "c"], "repetitions": 1,
                           "client_commands": {"c": {"command": "x {url}", "protocols": ["h3"]}}})
    keys = sorted(t.key for t in expand(plan))
    assert keys == ["none|1x1MB/p1|h1~qb-load|caddy|r1", "none|1x1MB/p1|h2~qb-load|caddy|r1",
                    "none|1x1MB/p1|h3~c|caddy|r1", "none|1x1MB/p1|h3~qb-load|caddy|r1"]
    single = plan_from_dict({"workloads": [{"size": "1MB"}], "repetitions": 1})
    assert "none|1x1MB/p1|h1|caddy|r1" in {t.key for t in expand(single)}   # keys unchanged without a sweep


def test_link_late_trials_are_a_caveat():
    rows = []
    for rep in range(1, 4):
        rows.append({**row("x", "1x1MB/p1", "h1", rep, 10 + rep, 1), "link_late": rep == 2})
        rows.append(row("x", "1x1MB/p1", "h2", rep, 20 + rep, 1))
    data = summary_data(run_of(rows))
    (s,) = data["sentences"]
    assert "Caveat: 1 trial link-late" in s and data["conditions"][0]["link_late"] == 1


def test_video_cells_are_summarised_as_playbacks():
    # a playback's headline is its QoE (Pensieve's QoE_lin), not a goodput: rows say their kind
    rows = []
    for rep in range(1, 6):
        for p, qoe, start in (("h2", 2.0, 1.2), ("h3", 1.2, 1.5)):
            rows.append({"key": f"c|video:hls:vod:60s:seg4|{p}|caddy|r{rep}", "condition": "c",
                         "workload": "video:hls:vod:60s:seg4", "kind": "video", "protocol": p, "server": "caddy",
                         "client": "video", "rep": rep, "status": "ok", "qoe_lin": qoe + rep / 100,
                         "startup_s": start + rep / 100, "rebuffer_ratio": 0.01, "mean_bitrate_kbps": 2500.0,
                         "bytes": 10_000_000, "goodput_mbps": 9.0})
    data = summary_data(run_of(rows))
    text = render(data, width=100)
    assert "Video playback" in text and "QoE" in text and "start s" in text and "Object downloads" not in text
    (v,) = data["verdicts"]
    assert v["kind"] == "video" and v["metric"] == "qoe_lin" and v["best"] == "h2"
    assert "HTTP/2 was best" in data["sentences"][0] and "more QoE than" in data["sentences"][0]


def test_loss_recovery_counts_are_said_per_condition():
    rows = []
    for rep in range(1, 4):
        r1 = row("jitter", "1x1MB/p1", "h1", rep, goodput=9.0)
        r1.update(tcp_out_segs=1000, tcp_retrans_segs=10, tcp_dsack_segs=1)
        r3 = row("jitter", "1x1MB/p1", "h3", rep, goodput=4.0)
        r3.update(quic_packets_sent=1000, quic_lost=80, quic_lost_spurious=60)
        rows += [r1, r3]
    data = summary_data(run_of(rows))
    s = data["sentences"][0]
    assert "HTTP/3's server declared lost 8.0 % of its packets, 75 % of those spurious" in s
    assert "HTTP/1.1's server retransmitted 1.0 % of its segments, 10 % of those spurious" in s


def test_unknown_spurious_counts_are_left_out_not_counted_as_zero():
    """A quinn trial without the client's qlog has no spurious count (run/recovery.py): the share
    is over the trials that have one, and with none it is not said."""
    from quicbench.analysis.recovery import loss_recovery
    rows = []
    for rep in range(1, 4):
        r3 = row("loss", "1x1MB/p1", "h3", rep, goodput=4.0)
        r3.update(quic_packets_sent=1000, quic_lost=80, quic_lost_reordering=80, quic_lost_time=0,
                  quic_lost_spurious=40 if rep == 1 else None)
        rows.append(r3)
    run = run_of(rows)
    assert "8.0 % of its packets, 50 % of those spurious" in summary_data(run)["sentences"][0]
    assert loss_recovery(run)["spurious_of_lost_pct"].tolist() == [50.0]
    for r in rows:
        r["quic_lost_spurious"] = None
    run = run_of(rows)
    s = summary_data(run)["sentences"][0]
    assert "declared lost 8.0 % of its packets." in s and "spurious" not in s
    assert loss_recovery(run)["spurious_of_lost_pct"].isna().all()
def test_video_only_run_speaks_of_the_viewer(tmp_path):
    """A video-only run (rows carry a goodput too): the terminal's table has the viewer's columns and
    no download table; one sentence per condition says the start-up, stalls, played bitrate and live
    latency with their verdicts, and that the LAN never stalled."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    from make_fixture import make_run
    from quicbench.analysis import load_run
    run = load_run(make_run(tmp_path / "video", "video"))
    data = summary_data(run)
    text = render(data, width=80)
    assert all(len(l) <= 80 for l in text.splitlines())
    assert "Video playback" in text and "Object downloads" not in text
    header = next(l for l in text.splitlines() if "ok/n" in l)       # the one table's header
    assert "Mbit/s" not in header and "time s" not in header
    for col in ("QoE", "start s", "stall s", "kbit/s", "live s"):
        assert col in header
    assert len(data["sentences"]) == 2 and {v["kind"] for v in data["verdicts"]} == {"video"}
    lan, spikes = data["sentences"]
    for s in (lan, spikes):
        assert "for the viewer: start-up" in s and "played bitrate" in s and "live latency" in s
        assert "goodput" not in s and "≈" not in s
    assert "no protocol stalled in any trial" in lan
    assert "stall time HTTP/1.1" in spikes and " − " in spikes        # stall time: a difference, not a ratio
    viewer = {m["metric"]: m for m in data["verdicts"][0]["viewer"]}
    assert set(viewer) >= {"startup_s", "stall_total_s", "mean_bitrate_kbps"}


def test_page_only_run_has_no_download_table():
    rows = [row("clean", "page:realistic", p, rep, page=ms + rep)
            for rep in range(1, 4) for p, ms in (("h1", 950), ("h2", 900), ("h3", 700))]
    for r in rows:
        r["goodput_mbps"] = 80.0          # a browser row may carry one; it is not the page's metric
    text = render(summary_data(run_of(rows)), width=80)
    assert "Page loads" in text and "Object downloads" not in text and "Mbit/s" not in text


def test_a_loss_trigger_the_sender_does_not_report_is_unknown_not_zero():
    """ngtcp2's qlog gives no loss trigger (run/recovery.py leaves it empty): the report's share
    declared by the reordering threshold is unknown for it, not 0 %."""
    from quicbench.analysis.recovery import loss_recovery
    rows = []
    for rep in range(1, 4):
        r3 = row("loss", "1x1MB/p1", "h3", rep, goodput=4.0)
        r3.update(quic_packets_sent=1000, quic_lost=80, quic_lost_reordering=None, quic_lost_time=None,
                  quic_lost_spurious=40)
        rows.append(r3)
    rec = loss_recovery(run_of(rows))
    assert rec["by_reordering_pct"].isna().all() and rec["spurious_of_lost_pct"].tolist() == [50.0]


def test_slow_start_exits_below_the_bdp_without_a_loss_are_counted_per_cell():
    """quic-go's qlog logs its congestion state (run/recovery.py): per cell the window the sender
    left slow start with, and how many trials left it without a loss below the path's BDP (40
    Mbit/s x 50 ms = 250 KB); the recovery table shows both only for runs that have them."""
    from types import SimpleNamespace

    from quicbench.analysis.recovery import loss_recovery
    from quicbench.report.views import recovery_table
    rows = []
    for rep, (cwnd, no_loss) in enumerate([(100_800, 1), (709_200, 1), (190_000, 0)], start=1):
        r3 = row("spikes", "1x1MB/p1", "h3", rep, goodput=30.0)
        r3.update(quic_packets_sent=1000, quic_lost=0, quic_lost_reordering=0, quic_lost_time=0, quic_lost_spurious=0,
                  quic_ss_exit_cwnd=cwnd, quic_ss_exit_without_loss=no_loss)
        rows.append(r3)
    spikes = {"spikes": {"delay_ms": 50, "loss_pct": 0, "rate_mbit": 40, "jitter_ms": 0, "spikes": True, "rtt_ms": 50}}
    rec = loss_recovery(run_of(rows, spikes))
    r = rec.iloc[0]
    assert (r["ss_exit_early"], r["n_ss_exit"], r["ss_exit_cwnd_kb"], r["bdp_kb"]) == (1, 3, 190.0, 250.0)
    table = recovery_table(SimpleNamespace(recovery=rec, workload_title=lambda w: w))
    assert "left it below the BDP without a loss" in table.headers and "1 of 3 (BDP 250 KB)" in table.rows[0]
    for r3 in rows:
        r3["quic_ss_exit_cwnd"] = r3["quic_ss_exit_without_loss"] = None
    rec = loss_recovery(run_of(rows, spikes))
    assert rec["n_ss_exit"].isna().all()
    assert "left it below the BDP without a loss" not in recovery_table(
        SimpleNamespace(recovery=rec, workload_title=lambda w: w)).headers


def test_a_trial_the_cpu_slowed_is_a_caveat_judged_against_its_cell():
    rows = objects_run("clean")
    waits = {"client_cpu_wait_s": 0.004, "server_cpu_wait_s": 0.002, "link_cpu_wait_s": 0.0}
    for r in rows:
        r.update(waits)
    slow = next(r for r in rows if r["protocol"] == "h1" and r["rep"] == 2)
    slow.update(total_time_s=0.44, client_cpu_wait_s=0.045)     # 10 % slower; the client waited all 40 ms of it
    waited_less = next(r for r in rows if r["protocol"] == "h2" and r["rep"] == 3)
    waited_less.update(total_time_s=0.44, client_cpu_wait_s=0.02)   # as slow, but waited half the extra time
    data = summary_data(run_of(rows))
    assert data["conditions"][0]["cpu_slowed"] == 1
    (s,) = data["sentences"]
    assert "Caveat: 1 trial slowed by the CPU (judged after the run" in s, s


def test_a_difference_inside_the_margin_says_so():
    rows = []
    for rep in range(1, 11):
        rows.append(row("x", "1x1MB/p1", "h1", rep, 100 + (rep % 3) * 0.05, 1))
        rows.append(row("x", "1x1MB/p1", "h2", rep, 101 + (rep % 2) * 0.05, 1))     # 1 % ahead, every trial
    (s,) = summary_data(run_of(rows))["sentences"]
    assert "HTTP/2 was fastest" in s and "inside the ±10 % margin" in s, s
