"""Trajectories: length distributions of the online and expert buffers, and how much of them a
window length (seq_length) can sample."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import ui
from app.run_data import EXPERT, ONLINE, BufferEntry
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
st.caption(
    "How long the stored trajectories are, and which of them a window of `seq_length` rows can "
    "be drawn from. A window reads `seq_length` rows plus the row after them when the buffer "
    "returns `next` keys, so a trajectory shorter than that is never sampled."
)




def pick(entries: list[BufferEntry], label: str, key: str) -> BufferEntry:
    """One of ``entries``: a sidebar picker (its choice in the URL) when there are several."""
    names = [e.name for e in entries]
    if len(names) == 1:
        return entries[0]
    name = st.sidebar.selectbox(label, names, key=key, bind="query-params")
    return entries[names.index(name) if name in names else 0]


source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if data is not None:
    online_entries = [e for e in data.buffers if e.summary is not None and e.summary.kind == ONLINE]
    expert_entries = [e for e in data.buffers if e.summary is not None and e.summary.kind == EXPERT]
    for entry in data.buffers:
        if entry.error is not None:
            # An error when it leaves the page nothing to draw.
            (st.warning if online_entries or expert_entries else st.error)(
                f"Buffer `{entry.name}` is unusable: {entry.error}"
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
    st.plotly_chart(samplable_figure(curves, seq_length=seq_length), width="stretch")

    if online is not None:
        settings, traj = online
        need = settings.need_for(seq_length)
        st.subheader(f"Online buffer `{online_entry.name}`")
        st.caption(
            "Trajectories as the ring holds them now, cut at the oldest row and at the write "
            "cursor (the newest trajectory is still being written)."
        )
        st.plotly_chart(
            length_histogram(traj, need=need, title="Trajectory lengths, all envs"),
            width="stretch",
        )
        env_count = None if online_entry.summary is None else online_entry.summary.env_count
        if env_count is not None and env_count > 1:
            st.plotly_chart(env_length_heatmap(traj, env_count, need=need), width="stretch")
    if expert is not None:
        settings, motions = expert
        need = settings.need_for(seq_length)
        st.subheader(f"Expert buffer `{expert_entry.name}`")
        st.caption("One trajectory per motion episode, laid end to end.")
        st.plotly_chart(motion_length_bars(motions, need=need), width="stretch")
