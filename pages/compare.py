"""Compare: two runs or checkpoints side by side (trajectory lengths, priorities, EMD)."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import ui
from app.compare import Side, align, last_emd, motion_lengths, motion_priorities
from app.compare_figures import difference_bars, length_overlay, motion_bars
from app.run_data import EXPERT, ONLINE, READ_ERRORS, BufferEntry

st.title("Compare")
st.caption(
    "Two runs, or two checkpoints of one run (a re-prioritized expert buffer against the "
    "original, say), overlaid: how long their trajectories are, how the expert buffer "
    "spreads its sampling over motions, and how well each motion was tracked in the last "
    "evaluation round. Both choices are kept in the page's URL."
)

sources = ui.known_sources()
if not sources:
    st.info("No runs or checkpoints found under the dashboard's roots.")
    st.stop()
labels = [source.label for source in sources]


def _entry(
    entries: list[BufferEntry], what: str, key: str, column: DeltaGenerator
) -> BufferEntry | None:
    if len(entries) <= 1:
        return entries[0] if entries else None
    names = [entry.name for entry in entries]
    name = column.selectbox(what, names, key=key, bind="query-params")
    return entries[names.index(name)] if name in names else entries[0]


def _side(letter: str, column: DeltaGenerator, default: int) -> Side | None:
    key = f"cmp_{letter.lower()}"
    label = column.selectbox(f"{letter}: run or checkpoint", labels, index=default, key=key,
                             bind="query-params")
    source = sources[labels.index(label) if label in labels else default]
    try:
        data = ui.load_source(source.path)
    except READ_ERRORS as err:
        column.error(str(err))
        return None
    # Lengths and priorities come from the checkpoint, the EMDs from the log (or run.json).
    ui.show_moments(data, ui.load_log(source.path).records if data.has_log else None,
                    where=column)
    for entry in data.buffers:
        if entry.error is not None:
            column.warning(f"buffer {entry.name!r} cannot be read: {entry.error}")
    kinds = {e.name: e.summary.kind for e in data.buffers if e.summary is not None}
    online = _entry([e for e in data.buffers if kinds.get(e.name) == ONLINE], "online buffer",
                    f"{key}_online", column)
    experts = [e for e in data.buffers if kinds.get(e.name) == EXPERT]
    expert = _entry(experts, "expert buffer", f"{key}_expert", column)
    name = source.label
    online_lengths = expert_lengths = priorities = None
    if online is not None and (loaded := ui.trajectories_of(online, expert=False)) is not None:
        online_lengths = loaded[1].length
    if expert is not None and (found := ui.trajectories_of(expert, expert=True)) is not None:
        settings, motions = found
        if len(experts) > 1:
            name += f" ({expert.name})"
        expert_lengths = motion_lengths(motions)
        try:
            priorities = motion_priorities(settings, motions)
        except ValueError as err:
            column.warning(f"{expert.path}: {err}")
    history = ui.history_of(source, data)
    emd, emd_round = last_emd(history) if history is not None else (None, None)
    return Side(name, online_lengths, expert_lengths, priorities, emd, emd_round)


left, right = st.columns(2)
a = _side("A", left, 0)
b = _side("B", right, 1 if len(sources) > 1 else 0)
if a is None or b is None:
    st.stop()
names = (f"A: {a.label}", f"B: {b.label}")
if a.label == b.label:
    st.info(
        "A and B are the same run and buffers, so every chart shows two equal sides. Pick "
        "another run for B, or an expert buffer saved from the Curriculum page "
        "(`reprioritized/...`), or start the dashboard with `--root` on a folder of runs."
    )

st.header("Trajectory lengths")
if a.online_lengths is not None and b.online_lengths is not None:
    st.plotly_chart(length_overlay(a.online_lengths, b.online_lengths, names), width="stretch")
    st.caption("Each side's online trajectories on the same length bins, as a fraction of its "
               "own trajectories, so runs of different sizes compare.")
else:
    st.info("Both sides need an online (`[time, env]`) buffer to compare trajectory lengths.")
if a.expert_lengths is not None and b.expert_lengths is not None:
    ids, la, lb = align(a.expert_lengths, b.expert_lengths)
    st.plotly_chart(motion_bars(ids, la, lb, names, title="Expert rows per motion",
                                y="rows"), width="stretch")

st.header("Sampling priority per motion")
if a.priorities is not None and b.priorities is not None:
    ids, pa, pb = align(a.priorities, b.priorities)
    st.plotly_chart(motion_bars(ids, pa, pb, names, title="Normalised priority per motion",
                                y="normalised priority"), width="stretch")
    st.plotly_chart(difference_bars(ids, pa, pb, names, title="Priority change, B minus A",
                                    y="priority difference"), width="stretch")
else:
    st.info("Both sides need an expert buffer with saved priorities to compare them.")

st.header("Tracking error (EMD) per motion, last round")
if a.emd is not None and b.emd is not None:
    ids, ea, eb = align(a.emd, b.emd)
    st.caption(f"A: round {a.emd_round}; B: round {b.emd_round}. Lower is better.")
    st.plotly_chart(motion_bars(ids, ea, eb, names, title="EMD per motion", y="EMD"),
                    width="stretch")
else:
    st.info("Both sides need curriculum rounds (`eval` records or run.json) to compare EMD.")
