"""The after-the-run CPU judgement (analysis.honesty.cpu_slowed_trials): a trial against its
cell's other repetitions on the same host."""

from pathlib import Path

from quicbench.analysis.honesty import cpu_slowed_trials
from quicbench.analysis.load import RunData, frame_from_rows


def trial(rep: int, seconds: float, client_wait: float, host: str = "a") -> dict:
    return {"key": f"c|10x50KB/p10|h1|caddy|r{rep}", "condition": "c", "workload": "10x50KB/p10", "protocol": "h1",
            "server": "caddy", "client": "qb-load", "rep": rep, "status": "ok", "size_bytes": 50_000, "count": 10,
            "parallel": 10, "bytes": 500_000, "goodput_mbps": 4 / seconds, "total_time_s": seconds, "host": host,
            "client_cpu_wait_s": client_wait, "server_cpu_wait_s": 0.001, "link_cpu_wait_s": 0.0}


def run_of(rows: list[dict]) -> RunData:
    return RunData(Path("/nonexistent"), {"run_id": "t"}, frame_from_rows(rows))


def test_only_the_slow_trial_whose_waits_cover_its_extra_time_is_listed():
    rows = [trial(r, 0.200, 0.002) for r in range(1, 6)]
    rows[1].update(total_time_s=0.230, client_cpu_wait_s=0.031)      # 15 % slower, waited all of it
    rows[3].update(total_time_s=0.230, client_cpu_wait_s=0.010)      # as slow, waited a third of it
    slowed = cpu_slowed_trials(run_of(rows))
    assert list(slowed["rep"]) == [2] and list(slowed["slowed_by"]) == ["client"]


def test_a_slower_host_is_not_a_slowed_trial():
    # a merged run: host b's trials all take 15 % longer and wait as long; against their own host's
    # median they are not slower, so nothing is listed (pooled, host b's would be)
    rows = [trial(r, 0.200, 0.002, "a") for r in range(1, 4)] + \
        [trial(r, 0.230, 0.035, "b") for r in range(4, 7)]
    assert cpu_slowed_trials(run_of(rows)).empty
    pooled = [{**r, "host": "a"} for r in rows]
    assert sorted(cpu_slowed_trials(run_of(pooled))["rep"]) == [4, 5, 6]


def test_a_cell_of_two_trials_is_not_judged():
    rows = [trial(1, 0.200, 0.002), trial(2, 0.300, 0.2)]
    assert cpu_slowed_trials(run_of(rows)).empty
