"""A plan that sweeps servers: the report keeps each protocol x server stack apart."""

import json

from quicbench.analysis.load import load_run


def row(i, proto, server, goodput):
    return {"key": f"c|w|{proto}|{server}|r{i}", "condition": "c", "workload": "10x1MB/p10", "protocol": proto,
            "server": server, "rep": i, "status": "ok", "goodput_mbps": goodput, "bytes": 10_000_000,
            "size_bytes": 1_000_000, "count": 10, "parallel": 10}


def test_swept_servers_are_separate_stacks(tmp_path):
    rows = [row(i, "h1", "caddy", 100 + i) for i in range(3)] + [row(i, "h1", "nginx", 200 + i) for i in range(3)]
    rows += [row(i, "h3", "caddy", 50 + i) for i in range(3)]
    (tmp_path / "trials.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "meta.json").write_text(json.dumps({"run_id": "x", "plan": {"name": "sweep"}}))
    df = load_run(tmp_path).trials
    means = df.groupby("protocol")["goodput_mbps"].mean().to_dict()
    assert means == {"h1@caddy": 101.0, "h1@nginx": 201.0, "h3": 51.0}
