"""Compare: two runs or checkpoints side by side (trajectory lengths, priorities, EMD)."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import loaders, ui
from app.compare import (
    Side,
    align,
    comparable,
    last_emd,
    latest_other,
    motion_lengths,
    motion_priorities,
    newest_save,
)
from app.compare_figures import difference_bars, length_overlay, motion_bars
from app.run_data import EXPERT, ONLINE, READ_ERRORS, BufferEntry, SourceData
from app.sources import Source
from app.text import literal

st.title("Compare")
st.caption(
    "Two runs, or two checkpoints of one run (an earlier checkpoint the run kept, or a "
    "re-prioritized expert buffer against the original), overlaid: how long their "
    "trajectories are, how the expert buffer spreads its sampling over motions, and how well "
    "each motion was tracked in the last evaluation round. A starts on the run chosen in the "
    "sidebar (or the path opened there), B on the latest other checkpoint of A's run. Both "
    "choices are kept in the page's URL."
)

# The sidebar's run, or the path typed under "Open a path", is A's first choice.
current = ui.choose_source()
if current is None:
    st.stop()  # choose_source said why: nothing found, or the typed path was refused
sources = comparable(loaders.known_sources(), current)
if not sources:
    st.stop()
labels = [source.label for source in sources]


def _entry(
    entries: list[BufferEntry], what: str, key: str, column: DeltaGenerator, default: int = 0
) -> BufferEntry | None:
    if len(entries) <= 1:
        return entries[0] if entries else None
    names = [entry.name for entry in entries]
    name = column.selectbox(what, names, index=default, key=key, bind="query-params")
    return entries[names.index(name)] if name in names else entries[default]


def _pick(letter: str, column: DeltaGenerator, default: int, *, follow: bool) -> int:
    """A side's source picker. ``follow``: move it to ``default`` now (what it follows
    changed); otherwise ``default`` is only its first value (a link's value wins)."""
    key = f"cmp_{letter.lower()}"
    if follow:
        st.session_state[key] = labels[default]
    label = column.selectbox(f"{letter}: run or checkpoint", labels,
                             index=None if follow else default, key=key, bind="query-params")
    return labels.index(label) if label in labels else default


def _changed(key: str, value: str) -> bool:
    """Whether ``value`` differs from the one noted under ``key`` on this page's last run
    (never on the first), noting it."""
    before = st.session_state.get(key)
    st.session_state[key] = value
    return before is not None and before != value


def _data(source: Source, column: DeltaGenerator) -> SourceData | None:
    try:
        return loaders.load_source(source.path)
    except READ_ERRORS as err:
        column.error(str(err))
        return None


def _experts(data: SourceData) -> list[BufferEntry]:
    return [e for e in data.buffers if e.summary is not None and e.summary.kind == EXPERT]


def _side(
    letter: str, column: DeltaGenerator, source: Source, data: SourceData, expert_default: int = 0
) -> Side:
    key = f"cmp_{letter.lower()}"
    if data.run is not None:  # which moment this side shows
        column.caption(f"{letter}: checkpoint at step {data.run.step:,}, round {data.run.round}")
    # Lengths and priorities come from the checkpoint, the EMDs from the log (or run.json).
    ui.show_moments(data, loaders.load_log(source.path).records if data.has_log else None,
                    where=column)
    for entry in data.buffers:
        if entry.error is not None:
            column.warning(f"buffer {entry.name!r} cannot be read: {literal(entry.error)}")
    kinds = {e.name: e.summary.kind for e in data.buffers if e.summary is not None}
    online = _entry([e for e in data.buffers if kinds.get(e.name) == ONLINE], "online buffer",
                    f"{key}_online", column)
    experts = _experts(data)
    expert = _entry(experts, "expert buffer", f"{key}_expert", column, expert_default)
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
            column.warning(f"{literal(expert.path)}: {literal(err)}")
    history = ui.history_of(source, data)
    emd, emd_round = last_emd(history) if history is not None else (None, None)
    return Side(name, online_lengths, expert_lengths, priorities, emd, emd_round)


left, right = st.columns(2)
# A follows the sidebar (a run picked or a path opened there), B follows A.
a_default = next(
    (i for i, s in enumerate(sources) if current is not None and s.path == current.path), 0)
a_index = _pick("A", left, a_default, follow=_changed("cmp_sidebar", labels[a_default]))
a_data = _data(sources[a_index], left)
# B: A's own source with its newest re-prioritized save, else the latest other checkpoint of
# A's run, else another source; A itself only when there is nothing else.
saved = None if a_data is None else newest_save(_experts(a_data))
others = [i for i in range(len(sources)) if i != a_index]
b_default = a_index if saved is not None else latest_other(sources, a_index)
if b_default is None:
    b_default = others[0] if others else a_index
b_index = _pick("B", right, b_default, follow=_changed("cmp_b_for", labels[a_index]))
b_data = _data(sources[b_index], right)
if a_data is None or b_data is None:
    st.stop()
a = _side("A", left, sources[a_index], a_data)
b = _side("B", right, sources[b_index], b_data,
          saved if saved is not None and b_index == a_index else 0)
names = (f"A: {a.label}", f"B: {b.label}")
if a.label == b.label:
    st.info(
        "A and B are the same run and buffers, so every chart shows two equal sides. Pick "
        "another run or checkpoint for B: a run's earlier checkpoints are listed as "
        "`<run>/checkpoints/step-N` once it has kept some (the demo keeps one per evaluation "
        "round), expert buffers saved from the Curriculum page as `reprioritized/...`. Or "
        "start the dashboard with `--root` on a folder of runs."
    )

st.header("Trajectory lengths")
if a.online_lengths is not None and b.online_lengths is not None:
    st.vega_lite_chart(length_overlay(a.online_lengths, b.online_lengths, names),
                       width="stretch")
    st.caption("Each side's online trajectories on the same length bins, as a fraction of its "
               "own trajectories, so runs of different sizes compare.")
else:
    st.info("Both sides need an online (`[time, env]`) buffer to compare trajectory lengths.")
if a.expert_lengths is not None and b.expert_lengths is not None:
    ids, la, lb = align(a.expert_lengths, b.expert_lengths)
    st.vega_lite_chart(motion_bars(ids, la, lb, names, title="Expert rows per motion",
                                   y="rows", whole=True), width="stretch")

st.header("Sampling priority per motion")
if a.priorities is not None and b.priorities is not None:
    ids, pa, pb = align(a.priorities, b.priorities)
    st.vega_lite_chart(motion_bars(ids, pa, pb, names, title="Normalised priority per motion",
                                   y="normalised priority"), width="stretch")
    st.vega_lite_chart(difference_bars(ids, pa, pb, names, title="Priority change, B minus A",
                                       y="priority difference"), width="stretch")
else:
    st.info("Both sides need an expert buffer with saved priorities to compare them.")

st.header("Tracking error (EMD) per motion, last round")
if a.emd is not None and b.emd is not None:
    ids, ea, eb = align(a.emd, b.emd)
    st.caption(f"A: round {a.emd_round}; B: round {b.emd_round}. Lower is better.")
    st.vega_lite_chart(motion_bars(ids, ea, eb, names, title="EMD per motion", y="EMD"),
                       width="stretch")
else:
    st.info("Both sides need curriculum rounds (`eval` records or run.json) to compare EMD.")
