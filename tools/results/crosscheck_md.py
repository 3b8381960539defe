"""Render `quicbench link crosscheck --json` output (one result or a list) as markdown tables.

    python3 tools/results/crosscheck_md.py crosscheck.json [more.json ...] > page-part.md
"""

from __future__ import annotations

import json
import sys

from quicbench.run.crosscheck import owd_verdict


def pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.2f}"


def num(x: float | None, fmt: str = ".2f") -> str:
    return "" if x is None else format(x, fmt)


def render(res: dict) -> str:
    c = res["condition"]
    lines = [f"### {c.get('name')}: {c.get('desc', '')}", ""]
    if c.get("note"):
        lines += [f"Note: {c['note']}.", ""]
    lines += ["| direction | metric | linkem (host) | netem (UML) | verdict |", "|---|---|---|---|---|"]
    for d in ("up", "down"):
        v = res["verdicts"][d]
        fl = v["floor_excess_p50_ms"]
        lines.append(f"| {d} | noise floor p50 (ms over delay) | {fl[0]:+.3f} | {fl[1]:+.3f} | |")
        o = v["owd"]
        if "ks_p" in o:   # judged again with today's rule (the JSON keeps both sides' quantiles)
            o["verdict"] = owd_verdict(o["ks_p"], res["linkem"]["condition"][d]["owd_ms"],
                                       res["netem"]["condition"][d]["owd_ms"])
        if "p50_ms" in o:
            lines.append(f"| {d} | one-way delay p50 / p95 (ms) | {o['p50_ms'][0]:.2f} / {o['p95_ms'][0]:.2f} | "
                         f"{o['p50_ms'][1]:.2f} / {o['p95_ms'][1]:.2f} | {o['verdict']} (KS D {o['ks_d']:.3f}, "
                         f"p {o['ks_p']:.2g}) |")
        else:
            lines.append(f"| {d} | one-way delay | | | {o['verdict']} |")
        for m in ("loss", "duplicates", "reorder"):
            a, b = v[m]["values"]
            lines.append(f"| {d} | {m} (%) | {pct(a)} | {pct(b)} | {v[m]['verdict']} |")
    names = {"tcp": "TCP goodput, iperf3", "h2": "h2 goodput", "h3": "h3 goodput"}
    for m, g in (res["verdicts"].get("goodput") or {}).items():
        a, b = g["values"]
        lines.append(f"| down | {names.get(m, m)} (Mbit/s, mean of {min(g['n'])}) | {num(a)} | {num(b)} | "
                     f"{g['verdict']}{' — ' + g['detail'] if g.get('detail') and g['verdict'] != 'ok' else ''} |")
    top = ((res.get("netem") or {}).get("goodput") or {}).get("ceiling_mbps")
    if top:
        lines.append("| | UML's ceiling (Mbit/s, unimpaired) | | "
                     + " / ".join(f"{p} {x:.1f}" for p, x in top.items()) + " | |")
    verdicts = [m["verdict"] for d in ("up", "down", "goodput") for m in (res["verdicts"].get(d) or {}).values()
                if isinstance(m, dict) and "verdict" in m]
    bad = sum(v.startswith(("differ", "fail")) for v in verdicts)
    lines += ["", f"Overall: {'ok' if not bad else f'{bad} metric(s) differ'}.", ""]
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        for res in data if isinstance(data, list) else [data]:
            print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
