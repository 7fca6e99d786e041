"""One page per job (issue 44): what happened, from the job's own records, as a single
self-contained HTML file (no script, no network at view time): the outcome, time to the
workload by phase, the phases per node with the failed node and cause marked, the preflight's
verdicts, the self-test's figures (pair latencies as a matrix, all-reduce, weight sync) and
doctor's findings. Everything a record says reaches the page escaped: it is text, never markup.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from clusterctl.console import printable
from clusterctl.errors import UsageError
from clusterctl.jobs.records import (
    RunRecord,
    read_record,
    read_timeline,
    run_directories,
    summarize,
)

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
.ok { color: #17692e; } .failed, .fail { color: #b00020; font-weight: bold; }
.warn { color: #9a6700; } .unknown { color: #6a3fa0; } .skip { color: #777; }
.cell { text-align: right; font-variant-numeric: tabular-nums; }
"""
# one colour per phase, in the order a job runs them
COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#e15759", "#86bcb6", "#8cd17d")  # fmt: skip


def job_report(job_id: str, logs_root: Path, out_file: Path | None = None) -> Path:
    """The page of the job's newest run, written to OUT_FILE or into its log directory."""
    from clusterctl.doctor.scan import job_log_files

    dirs = run_directories(job_id, logs_root) if logs_root.is_dir() else []
    if not dirs:
        raise UsageError(f"{logs_root} has no log directory of job {job_id}")
    logs = [p for p in job_log_files(job_id, logs_root) if dirs[-1] in p.parents]
    return write_report(dirs[-1], job_id, logs, out_file or dirs[-1] / "report.html")


def write_report(directory: Path, job_id: str, logs: list[Path], out: Path) -> Path:
    """Write the page for the run in DIRECTORY to OUT (doctor reads LOGS)."""
    page = render_report(directory, job_id, logs)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def render_report(directory: Path, job_id: str, logs: list[Path]) -> str:
    record = summarize(directory, read_timeline(directory))
    nodes = _nodes(directory)
    cluster = _json(directory / "cluster.json")
    verdicts = _json(directory / "preflight" / "verify.json")
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>job {escape(job_id)}</title>"
        f"<style>{STYLE}</style></head><body>",
        _outcome(job_id, record, directory),
        _to_workload(record),
        _gantt(record, nodes),
        _preflight(verdicts if isinstance(verdicts, list) else []),
        _selftest(cluster.get("selftest") if isinstance(cluster, dict) else None),
        _doctor(logs),
        "</body></html>",
    ]
    return "\n".join(parts)


def _text(value: object) -> str:
    return escape(printable(str(value)))


def _outcome(job_id: str, record: RunRecord, directory: Path) -> str:
    if record.status is None:
        said = "<span class='warn'>still running (or ended without its record)</span>"
    elif record.status == 0:
        said = "<span class='ok' id='outcome'>succeeded</span>"
    else:
        said = (
            f"<span class='failed' id='outcome'>failed (status {record.status})</span>: node "
            f"<b id='failed-node'>{_text(record.failed_node)}</b>: {_text(record.cause)}"
        )
    total = sum(r.seconds or 0 for r in record.rows)
    warnings = "".join(f"<p class='warn'>warning: {_text(w)}</p>" for w in record.warnings)
    return (
        f"<h1>clusterctl job {_text(job_id)}</h1><p>{said}</p>"
        f"<p>{_text(directory.name)}: {len(record.rows)} phases, {total:.1f}s</p>{warnings}"
    )


def _to_workload(record: RunRecord) -> str:
    rows, start = [], 0.0
    for row in record.rows:
        if row.phase == "workload":
            start = row.started
            break
        took = "running" if row.seconds is None else f"{row.seconds:.1f}s"
        rows.append(f"<tr><td>{_text(row.phase)}</td><td class='cell'>{took}</td></tr>")
    first = f"{start:.1f}s" if start else "not reached"
    progress = f"<p>last progress: {_text(record.progress)}</p>" if record.progress else ""
    if record.first_progress is not None:
        progress = (
            f"<p id='first-step'>first progress line (the first step) at "
            f"{record.first_progress:.1f}s, {record.first_progress - start:.1f}s into the "
            f"workload</p>{progress}"
        )
    return (
        f"<h2 id='to-workload'>Time to the workload: {first}</h2>"
        f"<table><tr><th>phase</th><th>took</th></tr>{''.join(rows)}</table>{progress}"
    )


def _gantt(record: RunRecord, nodes: list[str]) -> str:
    """Every node's row holds the job's phases (each runs on every node at once: one srun
    step over all of them); the failed node's row ends in a red mark with the cause."""
    if not record.rows:
        return "<h2>Phases</h2><p>no timeline</p>"
    end = max(r.started + (r.seconds or 0) for r in record.rows) or 1.0
    width, label, bar = 900, 110, 22
    rows = nodes or ["(job)"]
    height = bar * len(rows) + 60 + 16 * (len(record.rows) // 8)
    scale = (width - label - 10) / end
    svg = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"]
    for i, node in enumerate(rows):
        y = 10 + i * bar
        svg.append(f"<text x='0' y='{y + 15}' font-size='12'>{_text(node)}</text>")
        for n, row in enumerate(record.rows):
            x = label + row.started * scale
            w = max(1.0, (row.seconds or 0) * scale)
            colour = COLOURS[n % len(COLOURS)]
            svg.append(
                f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{bar - 4}' fill='{colour}'>"
                f"<title>{_text(row.phase)}: {row.seconds or 0:.1f}s</title></rect>"
            )
        if record.status and node == record.failed_node:
            svg.append(
                f"<rect id='failed-mark' x='{label + end * scale - 6:.1f}' y='{y}' width='6' "
                f"height='{bar - 4}' fill='#ff0000'><title>failed: {_text(record.cause)}"
                "</title></rect>"
            )
    legend_y = 10 + len(rows) * bar + 20
    x = label
    for n, row in enumerate(record.rows):
        step = 14 + 7 * len(row.phase) + 12
        if x + step > width:  # the legend wraps
            x, legend_y = label, legend_y + 16
        svg.append(
            f"<rect x='{x}' y='{legend_y - 10}' width='10' height='10' "
            f"fill='{COLOURS[n % len(COLOURS)]}'/><text x='{x + 14}' y='{legend_y}' "
            f"font-size='11'>{_text(row.phase)}</text>"
        )
        x += step
    svg.append("</svg>")
    return f"<h2 id='phases'>Phases, node by node ({end:.1f}s)</h2>{''.join(svg)}"


def _preflight(verdicts: list[Any]) -> str:
    rows = [
        f"<tr><td>{_text(v.get('node'))}</td><td>{_text(v.get('check'))}</td>"
        f"<td class='{_text(v.get('status'))}'>{_text(v.get('status'))}</td>"
        f"<td>{_text(v.get('reason'))}</td></tr>"
        for v in verdicts
        if isinstance(v, dict)
    ]
    if not rows:
        return "<h2 id='preflight'>Preflight</h2><p>no verdicts recorded</p>"
    return (
        "<h2 id='preflight'>Preflight</h2><table id='preflight-table'><tr><th>node</th>"
        f"<th>check</th><th>status</th><th>reason</th></tr>{''.join(rows)}</table>"
    )


def _selftest(selftest: object) -> str:
    if not isinstance(selftest, dict):
        return "<h2 id='selftest'>Self-test</h2><p>not run, or no result recorded</p>"
    found = selftest.get("pairs_ms")
    pairs: dict[str, Any] = found if isinstance(found, dict) else {}
    names = sorted({n for pair in pairs for n in str(pair).split("->")})
    header = "".join(f"<th>{_text(n)}</th>" for n in names)
    body = []
    for a in names:
        cells = []
        for b in names:
            ms = pairs.get(f"{a}->{b}")
            cells.append(
                f"<td class='cell'>{ms:.2f}</td>" if isinstance(ms, float) else "<td></td>"
            )
        body.append(f"<tr><th>{_text(a)}</th>{''.join(cells)}</tr>")
    figures = []
    if isinstance(selftest.get("allreduce_busbw_gbps"), (int, float)):
        given = selftest.get("floor")
        floor: dict[str, Any] = given if isinstance(given, dict) else {}
        against = ""
        if isinstance(floor.get("gbps"), (int, float)) and floor["gbps"] > 0:
            against = f"; floor {floor['gbps']:g} GB/s ({_text(floor.get('source'))})"
        elif floor.get("note"):
            against = f"; {_text(floor['note'])}"
        figures.append(
            f"all-reduce ({_text(selftest.get('backend'))}, {_text(selftest.get('ranks'))} ranks): "
            f"busbw {selftest['allreduce_busbw_gbps']:.3f} GB/s, "
            f"algbw {selftest.get('allreduce_algbw_gbps', 0):.3f} GB/s{against}"
        )
    sync = selftest.get("weight_sync")
    if isinstance(sync, dict) and isinstance(sync.get("gbps"), (int, float)):
        figures.append(
            f"weight sync: {_text(sync.get('mb'))} MB {_text(sync.get('from'))} -> "
            f"{_text(sync.get('to'))} at {sync['gbps']:.3f} GB/s ({_text(sync.get('backend'))})"
        )
    said = selftest.get("problems")
    problems: list[Any] = said if isinstance(said, list) else []
    listed = "".join(f"<li class='fail'>{_text(p)}</li>" for p in problems)
    return (
        "<h2 id='selftest'>Self-test</h2><p>TCP round trip between nodes, ms (row to column)</p>"
        f"<table id='pairs'><tr><th></th>{header}</tr>{''.join(body)}</table>"
        f"<ul id='figures'>{''.join(f'<li>{f}</li>' for f in figures)}{listed}</ul>"
    )


def _doctor(logs: list[Path]) -> str:
    from clusterctl.doctor.scan import scan_files

    try:
        hits = scan_files(logs) if logs else []
    except Exception as exc:  # the page still shows what the records say
        return f"<h2 id='doctor'>Doctor</h2><p>could not read the logs: {_text(exc)}</p>"
    if not hits:
        return "<h2 id='doctor'>Doctor</h2><p>no failure found in the logs</p>"
    rows = []
    for hit in hits[:12]:
        d = hit.as_dict()
        rows.append(
            f"<tr><td>{_text(d.get('id'))}</td><td>{_text(d.get('component'))}</td>"
            f"<td>{_text(d.get('certainty'))}</td><td>{_text(d.get('meaning'))}</td>"
            f"<td>{_text(d.get('fix'))}</td></tr>"
        )
    return (
        "<h2 id='doctor'>Doctor</h2><table id='doctor-table'><tr><th>finding</th>"
        "<th>component</th><th>how sure</th><th>meaning</th><th>fix</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _nodes(directory: Path) -> list[str]:
    try:
        return read_record(directory / "node-names.txt", 1 << 20).split()
    except OSError:
        return []


def _json(path: Path) -> object:
    try:
        return json.loads(read_record(path))
    except (OSError, ValueError):
        return None
