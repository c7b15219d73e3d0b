"""Live: follow a run while it writes; each refresh reads only the new lines of its log."""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from app import ui
from app.live import (
    FINISHED,
    MAX_RECORDS,
    RUNNING,
    LiveTail,
    age_text,
    duration_text,
    metrics_path,
    occupancy,
    run_status,
    td_series,
)
from app.live_figures import eval_figure, occupancy_figure, td_figure
from app.run_data import LOGLESS_KINDS
from app.sources import Source
from app.text import literal

# session_state key: resolved log path -> this session's LiveTail (never shared or cached).
TAILS = "live_tails"

st.title("Live")
st.caption(
    "Follows a run while it writes: each refresh reads only the lines appended to its "
    f"metrics.jsonl since the last one and keeps the last {MAX_RECORDS:,} records. "
    "Start a run to watch with `bufcore demo --out runs/demo --live`."
)
source = ui.choose_source()
if source is not None:
    log_path = metrics_path(source.path, source.kind)
    if log_path is None:
        st.info(f"{source.path}: a single buffer checkpoint has no metrics log to follow; "
                "pick a run directory.")
        st.stop()
    if source.kind in LOGLESS_KINDS and not log_path.exists():
        # No run writes one there: waiting for "the first records" would wait forever.
        contents = ui.source_data(source)
        if contents is not None:
            ui.show_lack(contents, "a metrics.jsonl to follow (the log `bufcore.RunLogger` "
                         "writes)")
        st.stop()
    controls = st.columns([1, 2, 3])
    live_on = controls[0].toggle(
        "Auto-refresh", value=True, key="live_on", bind="query-params",
        help="Read new log lines every few seconds while this page is open.",
    )
    live_every = controls[1].slider(
        "Refresh every (seconds)", 1, 30, 2, key="live_every", bind="query-params",
        disabled=not live_on,
    )
    if not live_on:
        controls[2].button("Refresh now", help="Read the lines appended since the last refresh.")

    @st.fragment(run_every=live_every if live_on else None)
    def follow(log: Path, watched: Source) -> None:
        """Poll this session's tail of the log and draw what it holds."""
        tails: dict[str, LiveTail] = st.session_state.setdefault(TAILS, {})
        tail = tails.setdefault(str(log), LiveTail(log))
        try:
            new = tail.poll()
        except (OSError, ValueError) as err:
            st.error(f"{literal(log)}: cannot be read: {literal(err)}")
            return
        if tail.restarted:
            st.info(f"{log} was replaced (a new run started): showing the new run from "
                    "its start.")
        last = tail.records[-1] if tail.records else None
        # Listed before the early return: a log of nothing but bad lines must say so.
        ui.show_problems(tail.problems, what="log lines")
        if last is None:
            st.info(f"{log}: no records yet. The page picks them up as the run writes them.")
            return
        status = run_status(tail.records, run=tail.latest("run"), now=time.time(),
                            refresh_seconds=live_every)
        if status.state == RUNNING:
            st.success(f"**Running**: {status.reason}.")
        elif status.state == FINISHED:
            st.success(f"**Finished**: {status.reason}.")
        else:
            st.warning(f"**Stalled**: {status.reason}. The run may have crashed, been stopped "
                       "or be stuck.")
        if status.total is not None:
            st.progress(min(status.step / status.total, 1.0), text=f"Step {status.progress}")
        else:
            st.caption(f"Step {status.progress}; the run logged no plan (`total_steps` in its "
                       "`run` record), so there is no step count to reach or time left.")
        # Re-read each refresh (cached per checkpoint version): the run keeps checkpointing.
        if (data := ui.source_data(watched)) is not None:
            ui.show_moments(data, tail.records)
        cols = st.columns(4)
        time_left = ("none: finished" if status.state == FINISHED else "n/a" if status.eta is None
                else duration_text(status.eta))
        cols[0].metric("Time left", time_left,
                       help="At the speed of the recent records"
                       + (f" ({status.rate:,.1f} steps/s)" if status.rate is not None else "")
                       + "; shown while a run that logged its plan is running.")
        cols[1].metric("Last record written", age_text(status.silent),
                       help=f"last record: {last['kind']} at step {last['step']:,}")
        cols[2].metric("New this refresh", len(new))
        cols[3].metric("Records held", f"{len(tail.records):,}",
                       help=f"of {tail.total:,} read; the most recent {MAX_RECORDS:,} are kept")
        records = tail.records
        left, right = st.columns(2)
        with left:
            buffers = occupancy(records)
            if buffers:
                st.vega_lite_chart(occupancy_figure(buffers), width="stretch")
                st.caption("Rows held as a share of each buffer's capacity; a ring buffer climbs "
                           "to 100% and stays there while it overwrites its oldest rows.")
            else:
                st.info("No buffer records yet (the demo writes one every 25 env steps).")
        with right:
            td = td_series(records)
            if "td/ema_mean" in td:
                st.vega_lite_chart(td_figure(td), width="stretch")
                st.caption("TD-EMA's running mean (red, band: +/- its std) against each batch's "
                           "mean (faint): the weights are computed from the running statistics.")
            else:
                st.info("No train records with TD-EMA statistics yet.")
        evaluation = tail.latest("eval")
        if evaluation is not None:
            try:
                # A hand-written or foreign log may hold an eval record the chart cannot draw.
                st.vega_lite_chart(eval_figure(evaluation), width="stretch")
            except ValueError as err:
                st.warning(f"{log_path}: the eval record at step {evaluation.get('step', '?')} "
                           f"cannot be drawn: {literal(err)}")
            st.caption("The latest evaluation round: one bar per expert motion, how far the "
                       "policy's path is from the motion's frames. The curriculum samples the "
                       "tall bars more in the next rounds.")
        elif evaluation is None:
            st.info("No evaluation round yet.")
        st.caption(f"Read up to byte {tail.offset:,} of `{log}` at "
                   f"{time.strftime('%H:%M:%S')}.")

    follow(log_path, source)
