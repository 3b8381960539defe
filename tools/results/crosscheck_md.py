"""Render `quicbench link crosscheck --json` output (one result or a list) as markdown tables,
with the rows of the CLI's table (quicbench.run.crosscheck.table_rows).

    python3 tools/results/crosscheck_md.py crosscheck.json [more.json ...] > page-part.md
"""

from __future__ import annotations

import json
import sys

from quicbench.run.crosscheck import COLUMNS, DIRECTIONS, compare_goodput, owd_verdict, table_rows


def render(res: dict) -> str:
    c = res["condition"]
    for d in DIRECTIONS:   # the delay judged again with today's rule (the JSON keeps both sides' quantiles)
        o = res["verdicts"][d]["owd"]
        if "ks_p" in o:
            o["verdict"] = owd_verdict(o["ks_p"], res["linkem"]["condition"][d]["owd_ms"],
                                       res["netem"]["condition"][d]["owd_ms"])
    if res["linkem"].get("goodput") and res["netem"].get("goodput"):   # goodput too, with today's method
        res["verdicts"]["goodput"] = compare_goodput(res["linkem"], res["netem"])
    lines = [f"### {c.get('name')}: {c.get('desc', '')}", ""]
    if c.get("note"):
        lines += [f"Note: {c['note']}.", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(res)]
    verdicts = [m["verdict"] for d in (*DIRECTIONS, "goodput") for m in (res["verdicts"].get(d) or {}).values()
                if isinstance(m, dict) and "verdict" in m]
    bad = sum(v.startswith(("differ", "fail")) for v in verdicts)
    open_ = sum(v.startswith("inconclusive") for v in verdicts)
    overall = f"{bad} metric(s) differ" if bad else "nothing differs"
    lines += ["", f"Overall: {overall}" + (f", {open_} inconclusive" if open_ else "") + ".", ""]
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
