#!/usr/bin/env python3
"""Rewrite the summary table at the top of BENCHMARKS.md from one run of scripts/bench.sh.

Usage:
    bench_summary.py --results DIR --benchmarks BENCHMARKS.md [--mode quick|full]

DIR holds, per bench, `<bench>.out` (its stdout), `<bench>.cmd` (the command that ran it, one
line) and `<bench>.rc` (its exit status), plus `meta.json` (`date`, `commit`, `load_before`, `server`,
`load_after`, `machine`). A figure is one line of a bench's stdout that is a JSON object with
the keys `bench`, `metric`, `value`, `unit` and optionally `baseline`, `ratio`, `target` (text)
and `pass` (true / false / null). The host's reconcile bench prints a table instead; its p50
rows are read by `reconcile_figures`.

Only the text between `<!-- summary:begin -->` and `<!-- summary:end -->` is replaced; when the
markers are missing they are inserted after the file's first line (its title). Everything else
in the file is kept byte for byte. A bench that did not run this time (`BENCH_ONLY`, or a
full-size-only bench in a quick run) keeps its rows from the summary being replaced; every row
names its run (mode, date, commit, server, machine, load), listed above the table.

Self-test: `python3 -m unittest discover -s scripts -p bench_summary.py`.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import unittest

BEGIN = "<!-- summary:begin -->"
END = "<!-- summary:end -->"
KEYS = ("bench", "metric", "value", "unit")


class SummaryError(Exception):
    """Bad input: the message names the file and what is wrong with it."""


def parse_figures(text, source):
    """The figure lines of a bench's stdout, in order. Other lines are ignored.

    Raises SummaryError for a line that starts like a figure but is not valid JSON or lacks a key.
    """
    figures = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not (line.startswith("{") and '"bench"' in line):
            continue
        try:
            figure = json.loads(line)
        except json.JSONDecodeError as e:
            raise SummaryError(f"{source}:{number}: a figure line is not JSON ({e})") from e
        missing = [k for k in KEYS if k not in figure]
        if missing:
            raise SummaryError(f"{source}:{number}: figure without {', '.join(missing)}")
        figures.append(figure)
    return figures


# Rows of host/benches/reconcile.rs's table: label, then p50 p90 p99 mean (µs).
RECONCILE_ROW = re.compile(r"^\((w|a|w1|a1|f)\)\s.*?\s(\d+(?:\.\d+)?)\s+\d+(?:\.\d+)?\s+\d+(?:\.\d+)?\s+\d+(?:\.\d+)?")

# The reconcile bench's targets: wasm over native on the same input, and the fixed cost of a
# call over the floor (an empty guest's call) measured in the same run.
RECONCILE_RATIO = 1.3
FIXED_OVER_FLOOR = 10.0


def reconcile_figures(text):
    """Figures from the reconcile bench's table: p50(w)/p50(a) (target <= 1.3) and the fixed
    cost per call p50(w1) - p50(a1) against the floor p50(f) of the same run (target <= floor +
    10 us; not judged without a floor row). Empty when the rows are not found."""
    p50 = {}
    for line in text.splitlines():
        m = RECONCILE_ROW.match(line.strip())
        if m and m.group(1) not in p50:
            p50[m.group(1)] = float(m.group(2))
    figures = []
    if "w" in p50 and "a" in p50:
        ratio = p50["w"] / p50["a"]
        figures.append({"bench": "reconcile", "metric": "per-reconcile time p50, wasm vs native (same input)",
                        "value": p50["w"], "baseline": p50["a"], "ratio": ratio, "unit": "µs",
                        "target": f"ratio ≤ {RECONCILE_RATIO}", "pass": ratio <= RECONCILE_RATIO})
    if "w1" in p50 and "a1" in p50:
        fixed = p50["w1"] - p50["a1"]
        floor = p50.get("f")
        figures.append({"bench": "reconcile",
                        "metric": "fixed cost per call p50, (w1) − (a1), parent alone; baseline: the floor (f), an empty guest's call",
                        "value": fixed, "baseline": floor, "ratio": None, "unit": "µs",
                        "target": f"≤ floor + {FIXED_OVER_FLOOR:.0f} µs",
                        "pass": None if floor is None else fixed <= floor + FIXED_OVER_FLOOR})
    return figures


def number(x):
    """A figure's number, with three significant digits or more."""
    if x is None:
        return "—"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def verdict(figure):
    p = figure.get("pass")
    if p is None and figure.get("target"):
        # A ratio target whose baseline was zero or less in this run (lost in its noise).
        return "not judged"
    return "**PASS**" if p is True else "**MISS**" if p is False else "—"


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def run_description(meta, mode):
    """One run's provenance, as the summary names it."""
    return (f"mode {mode}; {meta.get('date', '?')}; commit `{meta.get('commit', '?')}`; "
            f"{meta.get('server', 'Kubernetes ?')}; {meta.get('machine', '?')}; load average (1 min) "
            f"{meta.get('load_before', '?')} before, {meta.get('load_after', '?')} after")


# A previous summary: its runs (`- **R1** description`, or the single `Mode **m**; ... after.`
# line of a summary written before rows named their run) and its rows (`| bench | ... |`).
RUN_LINE = re.compile(r"^- \*\*(R\d+)\*\* (.*)$")
SINGLE_RUN_LINE = re.compile(r"^Mode \*\*(\w+)\*\*; (.*?)\. Each baseline")
CELL_SPLIT = re.compile(r"(?<!\\)\|")
NOT_MEASURED = "not measured in this run"
COLUMNS = ("bench", "figure", "value", "baseline (same run)", "ratio", "target", "result", "run", "command")


def previous_rows(summary):
    """{bench: [(run description, cells without the run)]} of a previous summary's table."""
    runs, rows = {}, {}
    for line in summary.splitlines():
        if m := RUN_LINE.match(line):
            runs[m.group(1)] = m.group(2)
        elif m := SINGLE_RUN_LINE.match(line):
            runs[None] = f"mode {m.group(1)}; {m.group(2)}"
    for line in summary.splitlines():
        if not line.startswith("| ") or line.startswith("| bench |"):
            continue
        cells = [c.strip() for c in CELL_SPLIT.split(line)[1:-1]]
        if len(cells) == len(COLUMNS):
            run = runs.get(cells[7].strip("*"))
            cells = cells[:7] + cells[8:]
        elif len(cells) == len(COLUMNS) - 1:
            run = runs.get(None)
        else:
            continue
        if run is not None and cells[1] != NOT_MEASURED:
            rows.setdefault(cells[0], []).append((run, cells))
    return rows


def render(results, meta, mode, previous=""):
    """The summary's markdown (without the markers).

    `results`: list of (bench, command, exit status, figures) in table order. A bench that did
    not run in this one (no figures, no exit status) keeps its rows from `previous` (the
    summary being replaced), each still naming the run it came from.
    """
    this_run = run_description(meta, mode)
    kept = previous_rows(previous)
    rows = []  # (run description, cells without the run)
    for bench, command, rc, figures in results:
        cmd = f"`{cell(command)}`" if command else "—"
        if not figures:
            if rc is None and bench in kept:
                rows.extend(kept[bench])
                continue
            why = NOT_MEASURED if rc is None else f"no figure (exit status {rc}; see `{bench}.out`)"
            rows.append((this_run, [cell(bench), why, "—", "—", "—", "—", "—", cmd]))
            continue
        for f in figures:
            unit = f" {f['unit']}" if f.get("unit") else ""
            baseline = f.get("baseline")
            ratio = f.get("ratio")
            rows.append((this_run, [
                cell(bench), cell(f["metric"]), f"{number(f['value'])}{unit}",
                number(baseline) + unit if baseline is not None else "—",
                number(ratio) + "×" if ratio is not None else "—", cell(f.get("target") or "—"), verdict(f), cmd]))
        if rc not in (None, 0):
            rows.append((this_run, [cell(bench), f"exited with status {rc} after the figures above", "—", "—", "—", "—", "—", cmd]))
    # The runs, numbered in the order the table first names them.
    labels = {}
    for run, _ in rows:
        labels.setdefault(run, f"R{len(labels) + 1}")
    out = [
        "## Summary of the last `scripts/bench.sh` runs",
        "",
        "Each row names the run it comes from: a run of some benches (`BENCH_ONLY`) replaces their rows "
        "and keeps the others'. Each baseline is from the same run as its figure; ratio = figure / "
        "baseline. Written by `scripts/bench_summary.py`: edit outside the markers.",
        "",
        *[f"- **{label}** {run}" for run, label in labels.items()],
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|---|---:|---:|---:|---|---|---|---|",
    ]
    for run, cells in rows:
        out.append("| " + " | ".join([*cells[:7], f"**{labels[run]}**", *cells[7:]]) + " |")
    return "\n".join(out)


def summary_span(document):
    """(start, stop) of the text between the markers of `document`, `None` without markers.
    Raises SummaryError on misplaced markers."""
    begins, ends = document.count(BEGIN), document.count(END)
    if begins == 0 and ends == 0:
        return None
    if begins != 1 or ends != 1:
        raise SummaryError(f"expected one {BEGIN} and one {END}, found {begins} and {ends}")
    start = document.index(BEGIN) + len(BEGIN)
    stop = document.index(END)
    if stop < start:
        raise SummaryError(f"{END} comes before {BEGIN}")
    return start, stop


def current_summary(document):
    """The text between the markers of `document`, empty without them."""
    span = summary_span(document)
    return document[span[0]:span[1]] if span else ""


def rewrite(document, summary):
    """`document` with the text between the markers replaced by `summary`; the markers are
    inserted after the first line when absent. Raises SummaryError on misplaced markers."""
    span = summary_span(document)
    if span is None:
        first, sep, rest = document.partition("\n")
        return f"{first}\n\n{BEGIN}\n{summary}\n{END}\n{sep and rest}"
    start, stop = span
    return f"{document[:start]}\n{summary}\n{document[stop:]}"


def load_results(directory, benches):
    """(bench, command, exit status, figures) for each bench, from DIR/<bench>.{out,cmd,rc}."""
    results = []
    for bench in benches:
        def read(ext):
            path = os.path.join(directory, f"{bench}.{ext}")
            if not os.path.exists(path):
                return None
            with open(path, encoding="utf-8") as f:
                return f.read()

        out, cmd, rc = read("out"), read("cmd"), read("rc")
        if out is None:
            results.append((bench, (cmd or "").strip(), None, []))
            continue
        source = os.path.join(directory, f"{bench}.out")
        figures = reconcile_figures(out) if bench == "reconcile" else parse_figures(out, source)
        try:
            status = int(rc.strip()) if rc is not None else None
        except ValueError as e:
            raise SummaryError(f"{directory}/{bench}.rc: not an exit status: {rc!r}") from e
        results.append((bench, (cmd or "").strip(), status, figures))
    return results


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, help="directory written by scripts/bench.sh")
    parser.add_argument("--benchmarks", required=True, help="the BENCHMARKS.md to rewrite")
    parser.add_argument("--mode", default="quick", help="quick or full, and any sizes set otherwise")
    parser.add_argument("--benches", required=True, help="comma-separated bench names, in table order")
    args = parser.parse_args(argv)
    try:
        with open(os.path.join(args.results, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        results = load_results(args.results, [b for b in args.benches.split(",") if b])
        with open(args.benchmarks, encoding="utf-8") as f:
            document = f.read()
        updated = rewrite(document, render(results, meta, args.mode, current_summary(document)))
    except (OSError, json.JSONDecodeError, SummaryError) as e:
        print(f"bench_summary: {e}", file=sys.stderr)
        return 1
    with open(args.benchmarks, "w", encoding="utf-8") as f:
        f.write(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------

DOC = "# Benchmarks\n\nIntro line.\n\n## Section\n\nHand-written | table |\n"
FIGURE = '{"bench":"memory","metric":"RSS per extra plugin","value":1.5,"baseline":null,"ratio":null,"unit":"MiB","target":"≤ 2 MiB","pass":true}'


class Tests(unittest.TestCase):
    def test_markers_are_inserted_after_the_title_and_the_rest_is_kept(self):
        out = rewrite(DOC, "TABLE")
        self.assertTrue(out.startswith(f"# Benchmarks\n\n{BEGIN}\nTABLE\n{END}\n"))
        self.assertTrue(out.endswith(DOC[len("# Benchmarks\n"):]))

    def test_a_second_rewrite_replaces_only_between_the_markers(self):
        once = rewrite(DOC, "OLD\nTABLE")
        twice = rewrite(once, "NEW")
        self.assertEqual(twice, once.replace("OLD\nTABLE", "NEW"))
        self.assertEqual(twice.count(BEGIN), 1)
        self.assertEqual(twice.count(END), 1)

    def test_text_around_existing_markers_is_byte_for_byte_the_same(self):
        doc = f"# T\nbefore  \n{BEGIN}\nold\n{END}\nafter\r\n|x|\n"
        self.assertEqual(rewrite(doc, "new"), f"# T\nbefore  \n{BEGIN}\nnew\n{END}\nafter\r\n|x|\n")

    def test_misplaced_or_repeated_markers_are_refused(self):
        for doc in (f"{END}\n{BEGIN}\n", f"{BEGIN}\n", f"{BEGIN}{END}{BEGIN}{END}"):
            with self.assertRaises(SummaryError):
                rewrite(doc, "x")

    def test_a_target_without_a_verdict_is_shown_as_not_judged(self):
        figure = dict(json.loads(FIGURE), target="ratio ≤ 1.5", ratio=None, baseline=-2.7, value=1.2)
        figure["pass"] = None
        self.assertEqual(verdict(figure), "not judged")
        self.assertEqual(verdict(dict(figure, target=None)), "—")

    def test_figure_lines_are_picked_out_of_human_output(self):
        text = f"human line\n{FIGURE}\n{{not a figure}}\n" + '{"baseline":null,"bench":"b","metric":"sorted keys","unit":"","value":1}\n'

        self.assertEqual([f["metric"] for f in parse_figures(text, "x.out")], ["RSS per extra plugin", "sorted keys"])

    def test_a_broken_figure_line_names_its_file_and_line(self):
        with self.assertRaisesRegex(SummaryError, r"x\.out:2: figure without value"):
            parse_figures('ok\n{"bench":"b","metric":"m","unit":"s"}\n', "x.out")

    def test_reconcile_table_gives_ratio_and_fixed_cost_over_the_floor(self):
        text = ("(w)  wasm via host: Plugin::reconcile     120.0   130.0   200.0   125.0   0.0\n"
                "(a)  native via SDK: parse + reconcile    50.0    52.0    80.0    51.0    0.0\n"
                "(w1) as (w), parent alone                  39.0    40.0    70.0    41.0    0.0\n"
                "(a1) as (a), parent alone                  11.5    12.0    15.0    12.0    0.0\n"
                "(f)  floor: an empty guest's call (no SDK) 16.0    17.0    25.0    16.5    0.0\n")
        ratio, fixed = reconcile_figures(text)
        self.assertAlmostEqual(ratio["ratio"], 2.4)
        self.assertFalse(ratio["pass"])
        self.assertEqual(ratio["target"], "ratio ≤ 1.3")
        self.assertAlmostEqual(fixed["value"], 27.5)
        self.assertEqual(fixed["baseline"], 16.0)
        self.assertFalse(fixed["pass"])  # 27.5 > 16 + 10
        _, fixed = reconcile_figures(text.replace("16.0    17.0", "18.0    19.0"))
        self.assertTrue(fixed["pass"])  # 27.5 <= 18 + 10

    def test_a_reconcile_table_without_a_floor_leaves_the_fixed_cost_not_judged(self):
        text = ("(w1) as (w), parent alone                  39.0    40.0    70.0    41.0    0.0\n"
                "(a1) as (a), parent alone                  11.5    12.0    15.0    12.0    0.0\n")
        (fixed,) = reconcile_figures(text)
        self.assertIsNone(fixed["pass"])
        self.assertEqual(verdict(fixed), "not judged")

    def test_table_shows_value_baseline_ratio_target_verdict_and_command(self):
        figure = json.loads(FIGURE)
        figure.update(baseline=3.0, ratio=0.5)
        table = render([("memory", "N=10 cargo bench --bench memory", 0, [figure]), ("sharding", "", None, [])],
                       {"date": "D", "commit": "C", "load_before": "1.0", "load_after": "2.0", "machine": "M"}, "quick")
        row = next(line for line in table.splitlines() if line.startswith("| memory"))
        self.assertEqual(row, "| memory | RSS per extra plugin | 1.50 MiB | 3.00 MiB | 0.50× | ≤ 2 MiB | **PASS** | **R1** | "
                              "`N=10 cargo bench --bench memory` |")
        self.assertIn("| sharding | not measured in this run |", table)
        self.assertIn("commit `C`", table)

    def test_main_rewrites_the_file_from_a_results_directory(self):
        with tempfile.TemporaryDirectory() as d:
            for name, text in {"memory.out": f"x\n{FIGURE}\n", "memory.cmd": "cargo bench --bench memory\n",
                               "memory.rc": "0\n", "meta.json": '{"date": "today"}'}.items():
                with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                    f.write(text)
            path = os.path.join(d, "B.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(DOC)
            self.assertEqual(main(["--results", d, "--benchmarks", path, "--benches", "memory,sharding"]), 0)
            with open(path, encoding="utf-8") as f:
                out = f.read()
            self.assertIn("| memory | RSS per extra plugin | 1.50 MiB |", out)
            self.assertIn("| sharding | not measured in this run |", out)
            self.assertTrue(out.endswith(DOC[len("# Benchmarks\n"):]))

    def test_rollout_and_idle_figures_get_rows_of_their_own_bench_in_table_order(self):
        rollout = ('{"bench":"converge","metric":"throughput to re-converged (rollout size 3 → 4 of N = 100, median of 1 A / 1 K '
                   'runs, baseline K controller-runtime)","value":2.5,"baseline":2.0,"ratio":1.25,"unit":"parents/s",'
                   '"target":"ratio ≥ 1","pass":true}')
        idle = ('{"bench":"converge","metric":"controller CPU per minute, idle (idle 30 s, N = 500, median of 1 A / 1 P runs, '
                'baseline P kopf)","value":0.3,"baseline":0.2,"ratio":1.5,"unit":"CPU-s/min","target":"ratio ≤ 1","pass":false}')
        with tempfile.TemporaryDirectory() as d:
            files = {"converge-rollout.out": f"## Rollout\n| | A |\n{rollout}\n", "converge-rollout.cmd": "ROLLOUT=4 cargo bench\n",
                     "converge-rollout.rc": "0\n", "converge-idle.out": f"(run Z runs no controller)\n{idle}\n",
                     "converge-idle.cmd": "IDLE=30 cargo bench\n", "converge-idle.rc": "0\n"}
            for name, text in files.items():
                with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                    f.write(text)
            table = render(load_results(d, ["converge-pods", "converge-rollout", "converge-idle"]), {}, "quick")
        rows = [line for line in table.splitlines() if line.startswith("| converge")]
        self.assertEqual([r.split(" | ")[0] for r in rows], ["| converge-pods", "| converge-rollout", "| converge-idle"])
        self.assertIn("not measured in this run", rows[0])
        self.assertIn("| 2.50 parents/s | 2.00 parents/s | 1.25× | ratio ≥ 1 | **PASS** | **R1** | `ROLLOUT=4 cargo bench` |", rows[1])
        self.assertIn("| 0.30 CPU-s/min | 0.20 CPU-s/min | 1.50× | ratio ≤ 1 | **MISS** | **R1** | `IDLE=30 cargo bench` |", rows[2])

    def test_a_run_of_some_benches_keeps_the_other_rows_with_the_run_they_came_from(self):
        meta = {"date": "D1", "commit": "C1", "load_before": "1.0", "load_after": "2.0", "machine": "M"}
        memory = json.loads(FIGURE)
        first = render([("memory", "cargo bench --bench memory", 0, [memory]),
                        ("churn", "cargo bench --bench churn", 0, [dict(memory, bench="churn", metric="RSS | after")])], meta, "full")
        second = render([("memory", "cargo bench --bench memory", 0, [dict(memory, value=1.8)]), ("churn", "", None, [])],
                        dict(meta, date="D2", commit="C2"), "quick", first)
        lines = second.splitlines()
        self.assertIn("- **R1** mode quick; D2; commit `C2`; Kubernetes ?; M; load average (1 min) 1.0 before, 2.0 after", lines)
        self.assertIn("- **R2** mode full; D1; commit `C1`; Kubernetes ?; M; load average (1 min) 1.0 before, 2.0 after", lines)
        self.assertIn("| memory | RSS per extra plugin | 1.80 MiB | — | — | ≤ 2 MiB | **PASS** | **R1** | `cargo bench --bench memory` |", lines)
        self.assertIn("| churn | RSS \\| after | 1.50 MiB | — | — | ≤ 2 MiB | **PASS** | **R2** | `cargo bench --bench churn` |", lines)
        # Kept again by a third run of the same bench: still R2's, not duplicated.
        third = render([("memory", "cargo bench --bench memory", 0, [memory]), ("churn", "", None, [])],
                       dict(meta, date="D3"), "quick", second)
        self.assertEqual(sum(line.startswith("| churn") for line in third.splitlines()), 1)
        self.assertIn("mode full; D1", third)
        self.assertNotIn("D2", third)

    def test_a_bench_that_ran_and_failed_replaces_its_old_rows(self):
        meta = {"date": "D1"}
        first = render([("churn", "cargo bench --bench churn", 0, [json.loads(FIGURE)])], meta, "full")
        second = render([("churn", "cargo bench --bench churn", 101, [])], dict(meta, date="D2"), "full", first)
        self.assertIn("no figure (exit status 101", second)
        self.assertNotIn("D1", second)

    def test_rows_of_a_summary_with_one_run_header_are_kept_with_that_run(self):
        old = ("## Summary of the last `scripts/bench.sh` run\n\nMode **full**; 2026-12-01 15:43 UTC; commit `c8eb46d`; "
               "2 cores; load average (1 min) 0.35 before, 0.75 after. Each baseline is from the same run as its figure.\n\n"
               "| bench | figure | value | baseline (same run) | ratio | target | result | command |\n"
               "|---|---|---:|---:|---:|---|---|---|\n"
               "| churn | apply fingerprints left | 0.00 | — | — | ≤ 0  | **PASS** | `N=2000 cargo bench --bench churn` |\n")
        table = render([("memory", "", None, []), ("churn", "", None, [])], {"date": "D2"}, "quick", old)
        self.assertIn("| memory | not measured in this run |", table)
        again = render([("memory", "", None, []), ("churn", "", None, [])], {"date": "D3"}, "quick", table)
        self.assertIn("| memory | not measured in this run | — | — | — | — | — | **R1** |", again)
        self.assertNotIn("D2", again)
        self.assertIn("| churn | apply fingerprints left | 0.00 | — | — | ≤ 0 | **PASS** | **R2** | `N=2000 cargo bench --bench churn` |", table)
        self.assertIn("- **R2** mode full; 2026-12-01 15:43 UTC; commit `c8eb46d`; 2 cores; load average (1 min) 0.35 before, 0.75 after", table)
