"""FIFO occupancy: the chosen buffer's ring, slot ages, episode boundaries and fill over time."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import loaders, ui
from app.ring import latest_wraps, occupancy, ring_state, slot_age_series
from app.ring_figures import (
    boundary_map_figure,
    occupancy_figure,
    ring_figure,
    slot_age_figure,
)
from app.rlinf_figures import history_figure, id_strip_figure
from app.rlinf_view import states, weights_rows, window_history
from app.run_data import ONLINE, TRANSITIONS, ZVECTORS, SourceData

RING_KINDS = (ONLINE, TRANSITIONS, ZVECTORS)

st.title("FIFO occupancy")


def rlinf_fifo(data: SourceData) -> None:
    """An RLinf directory: which trajectory ids the window and the cache hold, and how the
    window slid over the id list as trajectories were added."""
    loaded = ui.rlinf_source(data)
    if loaded is None:
        return
    summary, index, window, cache = loaded
    st.caption(
        f"RLinf buffer directory `{data.path}`. Its index never evicts (every trajectory "
        "added stays listed); what slides FIFO is the window a buffer samples from (the newest "
        "`sample_window_size` trajectories) and, with `auto_save`, the cache of the newest "
        "`cache_size` held in memory (without `auto_save` the buffer keeps its whole window in "
        "memory and forgets older trajectories)."
    )
    total = len(index.entries)
    if total == 0:
        st.info(f"{data.path}: the index is empty; nothing has been added yet.")
        return
    in_window = index.ids[index.positions(window)]
    in_cache = index.ids[index.positions(cache)] if cache else in_window[:0]
    cols = st.columns(5)
    cols[0].metric("Trajectories indexed", f"{total:,}")
    cols[1].metric("Window", "-" if len(in_window) == 0 else
                   f"{int(in_window[0])}..{int(in_window[-1])}",
                   help=f"Ids of the {len(in_window):,} trajectories sampled from.")
    cols[2].metric("Cache", "-" if len(in_cache) == 0 else
                   f"{int(in_cache[0])}..{int(in_cache[-1])}",
                   help=f"Ids of the {len(in_cache):,} trajectories held in memory.")
    cols[3].metric("Next id", f"{summary.trajectory_counter:,}",
                   help="metadata.json's trajectory_counter: the id the next add gets.")
    cols[4].metric("Without a file", f"{summary.absent:,}",
                   help="Indexed trajectories whose file is absent: a load leaves them out, "
                   "and the window skips them.")
    state = states(index, window=window, cache=cache)
    st.vega_lite_chart(id_strip_figure(index.ids, state), width="stretch")
    st.vega_lite_chart(history_figure(window_history(index, window), window=window),
                       width="stretch")
    st.caption(
        "The index records the order trajectories were added in, not when: the x axis counts "
        "adds. After k adds a buffer samples from the newest "
        f"{window if window else 'k (all)'} ids; the directory's current window is its last "
        "point (trajectories whose files are absent now are skipped by a load, not by the "
        "buffer that wrote them)."
    )
    st.subheader("Policy versions (model_weights_id) in the window")
    st.dataframe(pd.DataFrame(weights_rows(index, window=window)), hide_index=True,
                 width="stretch")


source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if data is not None and ui.is_rlinf(data):
    rlinf_fifo(data)
    st.stop()
st.caption(
    "Where the write cursor of a ring buffer stands, how old each slot is, and where episodes "
    "end. A ring of capacity C writes slot `cursor` next and, once full, overwrites the oldest."
)
entry = ui.choose_buffer(data, kinds=RING_KINDS) if data is not None else None
if source is not None and entry is not None and entry.summary is not None:
    summary = entry.summary
    log = loaders.load_log(source.path) if data is not None and data.has_log else None
    records = log.of_kind("buffer") if log is not None else []
    if data is not None:
        # The ring comes from the checkpoint, the wrap count and fill over training from the log.
        ui.show_moments(data, None if log is None else log.records)
    wraps = latest_wraps(records, entry.name)
    state = ring_state(
        summary.capacity, summary.length, summary.cursor, summary.full,
        wraps=None if wraps is None else wraps[0], wraps_step=None if wraps is None else wraps[1],
    )
    cols = st.columns(6)
    cols[0].metric("Capacity (time rows)", f"{state.capacity:,}")
    # The fraction is part of the label: a metric's delta reads as a change since last time.
    cols[1].metric(f"Filled ({state.fill:.0%})", f"{state.length:,}",
                   help=f"{state.length:,} of {state.capacity:,} time rows hold data.")
    cols[2].metric("Cursor (next write)", f"{state.cursor:,}")
    cols[3].metric("Oldest slot", "-" if state.oldest is None else f"{state.oldest:,}")
    cols[4].metric("Newest slot", "-" if state.newest is None else f"{state.newest:,}")
    cols[5].metric(
        "Wraps", state.wraps_text(),
        help="How often the ring went round. The checkpoint only says whether it is full; the "
        "count comes from the latest `buffer` record of metrics.jsonl"
        + ("" if state.wraps_step is None else f" (step {state.wraps_step:,})")
        + ", which may be newer than the checkpoint.",
    )
    if summary.env_count is not None:
        st.caption(
            f"`[time, env]` buffer: each time row holds {summary.env_count:,} envs, so "
            f"{summary.length * summary.env_count:,} transitions are stored."
        )
    if state.length == 0:
        st.info(f"{entry.path}: the buffer is empty; nothing has been written yet.")
    else:
        left, right = st.columns([2, 3])
        left.vega_lite_chart(ring_figure(state), width="stretch")
        right.vega_lite_chart(
            slot_age_figure(slot_age_series(state), state.capacity, state.cursor), width="stretch"
        )
        st.caption(
            "Ring: slot 0 at the top, slots clockwise; blue arcs hold rows. Slot age: one bar "
            "(or dot) per slot; the newest row (just before the cursor) has age 0 and the "
            "oldest (at the cursor, once the ring is full) the largest."
        )
    if summary.env_count is not None and summary.end_key is not None and state.length > 0:
        end_name = "/".join(summary.end_key)
        st.subheader(f"Episode ends (the `{end_name}` flag)")
        binned = ui.end_map(entry.path, summary.end_key)
        if binned is not None:
            st.vega_lite_chart(
                boundary_map_figure(binned, state.cursor, end_key=end_name, full=state.full),
                width="stretch",
            )
            st.caption(
                f"Each row of the map is one env, each column a time slot; a dark cell marks a "
                f"step whose `{end_name}` flag ends the episode. The red line is the cursor: "
                "left of it are the newest rows, right of it (once the ring is full) the oldest."
            )
    st.subheader("Occupancy over training")
    series = occupancy(records, entry.name)
    if log is not None:
        ui.show_problems(log.problems, what="log lines")
    if log is None and data is not None:
        ui.show_lack(data, "`buffer` records in metrics.jsonl to draw the fill over training")
    elif len(series.step) == 0:
        st.info(
            f"{source.path}: no `buffer` records for {entry.name!r} in metrics.jsonl, so the "
            "fill over training cannot be shown (a bare checkpoint has no log)."
        )
    else:
        st.vega_lite_chart(occupancy_figure(series), width="stretch")
