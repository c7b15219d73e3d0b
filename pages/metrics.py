"""Metrics: any scalar a run logged, over steps or wall time, smoothed, on a log scale, with
other runs overlaid, and the drawn points as CSV."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import streamlit as st

from app import loaders, ui
from app.live import metrics_path
from app.metrics_figures import metric_figure
from app.metrics_view import (
    MAX_SERIES,
    RELATIVE,
    STEP,
    WALL,
    X_COLUMNS,
    RunScalars,
    Trace,
    default_metrics,
    metric_traces,
    run_scalars,
    traces_csv,
)

AXIS_LABELS = {STEP: "Step", RELATIVE: "Relative time", WALL: "Wall clock"}

st.title("Metrics")
st.caption(
    "Every number a run logged to its metrics.jsonl (losses, rewards, TD statistics, buffer "
    "fill, evaluation results), named `kind/key`, over training steps or time. Pick several "
    "at once, smooth them (the raw curve stays faint behind), switch to a log scale, and "
    "overlay other runs found under the dashboard's roots. Every choice is kept in the URL."
)
source = ui.choose_source()
if source is None:
    st.stop()



def has_log(path: Path | None) -> bool:
    return path is not None and path.is_file()


# Other runs with a log, to overlay (discovery reads entry names only).
others = [
    other for other in loaders.known_sources()
    if other.path != source.path and has_log(metrics_path(other.path, other.kind))
]
overlay = st.multiselect(
    "Overlay other runs", [other.label for other in others], key="m_runs",
    bind="query-params",
    help="Runs under the dashboard's roots that have a metrics.jsonl; each gets its own colour.",
    placeholder="none" if others else "no other run with a log under the roots",
)
chosen = [source, *(other for other in others if other.label in overlay)]

runs: dict[str, RunScalars] = {}
for run in chosen:
    log_file = metrics_path(run.path, run.kind)
    if log_file is None or not has_log(log_file):
        st.info(
            f"{run.path}: no metrics.jsonl here, so there is nothing to plot for it. Scalars "
            "come from a run's log: a run directory written with `bufcore.RunLogger` (or "
            "`bufcore demo`) has one; a checkpoint or a BFM-Zero work directory alone does "
            "not."
        )
        continue
    log = loaders.load_log(run.path)
    ui.show_problems(log.problems, what=f"log lines of {run.label}")
    scalars = run_scalars(log.records)
    if scalars.dropped:
        st.warning(f"{log_file}: more than {MAX_SERIES:,} distinct scalars; "
                   f"{scalars.dropped:,} are not listed.")
    if not scalars.curves:
        st.info(f"{log_file}: no numeric scalar logged yet ({len(log.records):,} records).")
        continue
    runs[run.label] = scalars
if not runs:
    st.stop()

names = list(dict.fromkeys(name for scalars in runs.values() for name in scalars.curves))
metrics = st.multiselect(
    "Metrics", names, default=default_metrics(names), key="m_metrics", bind="query-params",
    help="Each metric gets its own chart; the runs are overlaid in it.",
)
controls = st.columns([2, 3, 1])
# The labels are the options, so the URL reads `m_x=Relative+time`.
axis_label = controls[0].radio(
    "X axis", list(AXIS_LABELS.values()), horizontal=True, key="m_x", bind="query-params",
    help="Relative time counts from each run's first record, so runs started at different "
    "times line up.",
)
axis = {label: key for key, label in AXIS_LABELS.items()}.get(str(axis_label), STEP)
smoothing = controls[1].slider(
    "Smoothing", 0.0, 0.99, 0.6, 0.01, key="m_smooth", bind="query-params",
    help="Exponential moving average over the logged points, as on the TD-EMA page; the raw "
    "curve stays faint behind. 0 draws the raw curve alone.",
)
log_y = controls[2].toggle("Log scale", key="m_log", bind="query-params",
                           help="Logarithmic y axis; values at or below 0 are left out.")
if not metrics:
    st.info("Pick one or more metrics above.")
    st.stop()

labels = list(runs)
shown: list[Trace] = []
columns = st.columns(2)
for position, metric in enumerate(metrics):
    traces: list[Trace] = []
    hidden = 0
    missing = []
    for label, scalars in runs.items():
        curve = scalars.curves.get(metric)
        if curve is None or scalars.start is None:
            missing.append(label)
            continue
        drawn, left_out = metric_traces(curve, run=label, metric=metric, axis=axis,
                                        start=scalars.start, smoothing=smoothing, log_y=log_y)
        traces += drawn
        hidden += left_out
    shown += traces
    with columns[position % 2]:
        st.vega_lite_chart(
            metric_figure(traces, metric=metric, runs=labels, axis=axis, log_y=log_y,
                          smoothing=smoothing, hidden=hidden),
            width="stretch",
        )
        if missing:
            st.caption(f"Not logged by: {', '.join(missing)}.")

st.download_button(
    "Download the shown points (CSV)",
    # Written only when asked for: a long run's CSV is megabytes.
    partial(traces_csv, shown, axis=axis),
    file_name=f"metrics-{source.label.replace('/', '_')}.csv",
    mime="text/csv",
    on_click="ignore",  # a download changes nothing on the page: no rerun, no redraw
    help=f"One row per drawn point: run, metric, curve (raw or smoothed), "
    f"{X_COLUMNS[axis]}, value; after the min/max reduction, exactly what the charts show.",
)
