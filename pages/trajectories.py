"""Trajectories: length distributions of the online and expert buffers, and how much of them a
window length (seq_length) can sample."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import loaders, ui
from app.rlinf_figures import samples_figure, segment_histogram, segments_figure
from app.rlinf_view import (
    DEFAULT_READ,
    MAX_READ,
    PKL_NOTE,
    episode_segments,
    index_rows,
    pooled_segments,
    read_positions,
    states,
    trajectory_row,
)
from app.run_data import EXPERT, ONLINE, BufferEntry, SourceData
from app.text import literal
from app.trajectory_figures import (
    env_length_heatmap,
    length_histogram,
    motion_length_bars,
    samplable_figure,
)
from app.trajectory_stats import (
    samplability,
    samplable_curve,
)

st.title("Trajectories")




def pick(entries: list[BufferEntry], label: str, key: str) -> BufferEntry:
    """One of ``entries``: a sidebar picker (its choice in the URL) when there are several."""
    names = [e.name for e in entries]
    if len(names) == 1:
        return entries[0]
    name = st.sidebar.selectbox(label, names, key=key, bind="query-params")
    return entries[names.index(name) if name in names else 0]


def rlinf_trajectories(data: SourceData) -> None:
    """An RLinf directory: samples per trajectory from the index (all of them), and the
    episodes inside the trajectory files read (a bounded number)."""
    loaded = ui.rlinf_source(data)
    if loaded is None:
        return
    summary, index, window, cache = loaded
    st.caption(
        f"RLinf buffer directory `{data.path}`. Each trajectory is a `[T, B, ...]` rollout of "
        "B envs over T steps; the buffer samples single rows (step t, env b) from the window, "
        "so a trajectory weighs its T x B rows."
    )
    total = len(index.entries)
    if total == 0:
        st.info(f"{data.path}: the index is empty; there are no trajectories to show.")
        return
    state = states(index, window=window, cache=cache)
    st.vega_lite_chart(samples_figure(index.ids, index.samples, state, window=window, cache=cache),
                    width="stretch")
    with ui.lazy_expander(f"The index: one row per trajectory ({total:,})",
                          key="tr_index_table") as shown:
        if shown:
            st.dataframe(pd.DataFrame(index_rows(index, window=window, cache=cache)),
                         hide_index=True, width="stretch", height=300)

    st.subheader("Episodes inside trajectories")
    if summary.trajectory_format != "pt":
        st.info(PKL_NOTE)
        return
    cols = st.columns(3)
    count = int(cols[0].number_input(
        "Trajectory files to read", min_value=1, max_value=MAX_READ,
        value=min(DEFAULT_READ, total), step=1, key="rl_read", bind="query-params",
        help=f"Each file is read whole (weights_only); at most {MAX_READ} per page.",
    ))
    last = int(cols[1].number_input(
        "Ending at position", min_value=0, max_value=total - 1, value=total - 1, step=1,
        key="rl_last", bind="query-params",
        help="Position in the id list (0 the oldest); the default is the newest.",
    ))
    positions = read_positions(count, last, total)
    present = [int(p) for p in positions if index.present[p]]
    ids = index.ids
    st.caption(
        f"Reading {len(present):,} of {total:,} trajectory files: positions "
        f"{int(positions[0])}..{int(positions[-1])} (ids {int(ids[positions[0]])}.."
        f"{int(ids[positions[-1]])})"
        + (f", {len(positions) - len(present)} of them without a file" if
           len(present) < len(positions) else "")
        + ". The samples chart above covers every trajectory (from the index alone)."
    )
    reads, errors = loaders.rlinf_trajectories(index, [int(ids[p]) for p in present])
    for error in errors:
        st.error(f"A trajectory file cannot be read: {literal(error)}")
    if not reads:
        return
    where = {int(ids[p]): p for p in present}
    rows = [trajectory_row(where[r.trajectory_id], r, state[where[r.trajectory_id]])
            for r in reads]
    flagged = [r for r in reads if r.ends is not None]
    if not flagged:
        st.info("These trajectories hold no dones, terminations or truncations, so their "
                "episodes cannot be told apart.")
    else:
        fields = sorted({r.end_field for r in flagged if r.end_field is not None})
        st.caption(
            f"Episodes end where `{'`, `'.join(fields)}` is set (dones when present, else "
            "terminations or truncations), read after the flattening drops each rollout "
            "epoch's leading row, as the buffer samples them. An env's first segment may have "
            "begun in an earlier trajectory."
        )
        st.vega_lite_chart(segments_figure(
            np.array([r.trajectory_id for r in flagged]),
            [episode_segments(r.ends) for r in flagged if r.ends is not None]),
            width="stretch")
        st.vega_lite_chart(segment_histogram(pooled_segments(flagged)), width="stretch")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if data is not None and ui.is_rlinf(data):
    rlinf_trajectories(data)
    st.stop()
st.caption(
    "How long the stored trajectories are, and which of them a window of `seq_length` rows can "
    "be drawn from. A window reads `seq_length` rows plus the row after them when the buffer "
    "returns `next` keys, so a trajectory shorter than that is never sampled."
)
if data is not None:
    online_entries = [e for e in data.buffers if e.summary is not None and e.summary.kind == ONLINE]
    expert_entries = [e for e in data.buffers if e.summary is not None and e.summary.kind == EXPERT]
    for entry in data.buffers:
        if entry.error is not None:
            # An error when it leaves the page nothing to draw.
            (st.warning if online_entries or expert_entries else st.error)(
                f"Buffer `{entry.name}` is unusable: {literal(entry.error)}"
            )
    if not online_entries and not expert_entries:
        ui.show_lack(data, f"a trajectory buffer checkpoint ({ONLINE} or {EXPERT})")
        st.stop()
    ui.show_moments(data, None)
    online = expert = None
    if online_entries:
        online_entry = pick(online_entries, "Online buffer", "traj_online")
        online = ui.trajectories_of(online_entry, expert=False)
    if expert_entries:
        expert_entry = pick(expert_entries, "Expert buffer", "traj_expert")
        expert = ui.trajectories_of(expert_entry, expert=True)
    loaded = [x for x in (online, expert) if x is not None]
    if not loaded:
        st.stop()
    default_seq = loaded[0][0].seq_length
    longest = max(int(traj.length.max()) for _, traj in loaded)
    seq_length = int(
        st.columns(3)[0].number_input(
            "seq_length (window length to check)", min_value=1, max_value=max(longest, 1),
            value=min(default_seq, max(longest, 1)), step=1, key="traj_seq", bind="query-params",
            help="The buffers' own seq_length is the default; the URL keeps your choice.",
        )
    )

    rows = []
    curves = {}
    for label, item in (("online", online), ("expert", expert)):
        if item is None:
            continue
        settings, traj = item
        stats = samplability(traj.length, settings, seq_length)
        curves[label] = samplable_curve(traj.length, settings)
        rows.append({
            "buffer": label,
            "window needs (rows)": stats.need,
            "trajectories": stats.trajectories,
            "samplable trajectories": f"{stats.samplable_trajectories:,} "
            f"({stats.trajectory_fraction:.1%})",
            "transitions": stats.transitions,
            "samplable transitions": f"{stats.samplable_transitions:,} "
            f"({stats.transition_fraction:.1%})",
            "distinct windows": stats.windows,
            "weighting": settings.weighting,
        })
    st.subheader(f"What seq_length = {seq_length} can sample")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(
        "A transition counts as samplable when some window can return it as one of its rows "
        "(the last row of a trajectory is only ever a `next` row)."
    )
    st.vega_lite_chart(samplable_figure(curves, seq_length=seq_length), width="stretch")

    if online is not None:
        settings, traj = online
        need = settings.need_for(seq_length)
        st.subheader(f"Online buffer `{online_entry.name}`")
        st.caption(
            "Trajectories as the ring holds them now, cut at the oldest row and at the write "
            "cursor (the newest trajectory is still being written)."
        )
        st.vega_lite_chart(
            length_histogram(traj, need=need, title="Trajectory lengths, all envs"),
            width="stretch",
        )
        env_count = None if online_entry.summary is None else online_entry.summary.env_count
        if env_count is not None and env_count > 1:
            st.vega_lite_chart(env_length_heatmap(traj, env_count, need=need), width="stretch")
    if expert is not None:
        settings, motions = expert
        need = settings.need_for(seq_length)
        st.subheader(f"Expert buffer `{expert_entry.name}`")
        st.caption("One trajectory per motion episode, laid end to end.")
        st.vega_lite_chart(motion_length_bars(motions, need=need), width="stretch")
