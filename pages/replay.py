"""Replay statistics: how a prioritized or DI-engine buffer replays what it holds, from its
checkpoint (priorities, importance weights, use, staleness, the trajectories window draws
favour, a seeded draw) and from the run's ``replay`` records (the same figures over training).

The two parts are tabs and only the open one is drawn, so a link carries the open tab
(``rp_part``, absent for the checkpoint's) and that tab's controls only."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app import loaders, ui
from app.replay_figures import (
    count_histogram_figure,
    dominance_figure,
    log_histogram_figure,
    mean_max_figure,
    quantile_figure,
    rates_figure,
    refusals_figure,
    scalar_figure,
    thruput_figure,
    top_share_figure,
)
from app.replay_view import (
    ADVANCED,
    GROUPS,
    CheckpointSummary,
    Drawn,
    DrawRequest,
    ReplayItems,
    ReplaySeries,
    WindowShares,
    count_histogram,
    dominance,
    draw_batch,
    has_replay_items,
    log_histogram,
    replay_series,
    replayable,
    trajectory_rows,
)
from app.run_data import READ_ERRORS, BufferEntry
from app.sampling_lab import MAX_SEED, next_seed
from app.sources import Source
from app.text import literal

SEED_KEY = "rp_seed"
# Trajectories listed in the dominance table.
TABLE_TRAJECTORIES = 50
CHECKPOINT_NEED = ("a buffer checkpoint with a `PrioritizedSampler` or a DI-engine buffer "
                   "(`NaiveReplayBuffer`, `AdvancedReplayBuffer`, `EpisodeReplayBuffer`)")
LOG_NEED = ("`replay` records in metrics.jsonl: a training loop appends them with "
            "`buffer.log_stats(RunLogger(run_dir), step)`")
# The page's two parts, one tab each; the open one is in the URL.
CHECKPOINT_TAB, LOG_TAB = "From the checkpoint", "From the log"
TAB_KEY = "rp_part"
# The source the open tab was last checked against (session only, not in the URL).
TAB_SOURCE_KEY = "rp_part_source"


st.title("Replay statistics")
st.caption(
    "How a prioritized or DI-engine buffer replays what it holds, in two tabs. **From the "
    "checkpoint**: each held item's priority, the importance weight a draw would give it now, "
    "its use and staleness, and a real draw with the buffer's own sampler (Resample moves the "
    "seed, which is in the URL). **From the log**: the `replay` records a training loop "
    "appends with `buffer.log_stats(RunLogger(run_dir), step)`, over training."
)
source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if source is None or data is None:
    st.stop()
for error in data.errors:
    st.warning(error)
log = loaders.load_log(source.path) if data.has_log else None
series = replay_series(log.records) if log is not None else {}
# Whether the source has a buffer this page can show.
fits = any(e.summary is not None and replayable(e.summary) for e in data.buffers)
if not series and not fits:
    ui.show_lack(data, f"{CHECKPOINT_NEED}, or {LOG_NEED}")
    st.stop()
ui.show_moments(data, log.records if series and log is not None else None)


def resample() -> None:
    """Resample's callback: the next seed, set before the widgets are drawn."""
    st.session_state[SEED_KEY] = next_seed(int(st.session_state.get(SEED_KEY, 0)))


def draw_controls(summary: CheckpointSummary, items: ReplayItems) -> DrawRequest:
    """The draw's widgets (bound to the URL) as a request."""
    cols = st.columns([2, 2, 2, 1], vertical_alignment="bottom")
    batch = cols[0].number_input(
        "Batch size", min_value=1, max_value=65_536, value=64, step=1, key="rp_batch",
        bind="query-params",
        help="Rows drawn (a multiple of seq_length for windows; items for a DI-engine buffer).",
    )
    # No value=: Resample sets the seed through session state (see the Sampling lab).
    seed = cols[1].number_input("Seed", min_value=0, max_value=MAX_SEED, step=1, key=SEED_KEY,
                                bind="query-params", help="Seeds the draw.")
    seq = None
    if items.windowed:
        seq = cols[2].number_input(
            "seq_length", min_value=1, max_value=4096, value=4, step=1, key="rp_seq",
            bind="query-params",
            help="Rows per window; the trajectory chart and the windows' weights use it too.",
        )
    cols[3].button("Resample", type="primary", on_click=resample,
                   help="Draw a new batch: the next seed")
    return DrawRequest(summary.kind, int(batch), None if seq is None else int(seq), int(seed),
                       held=summary.length, capacity=summary.capacity,
                       steps=None if summary.sampler is None else summary.sampler.steps)


def draw(entry: BufferEntry, request: DrawRequest) -> Drawn | None:
    """The seeded draw, or None with the reason on the page."""
    try:
        return draw_batch(loaders.index_buffer(entry.path), request)
    except READ_ERRORS as err:
        st.error(f"{literal(entry.path)}: cannot draw: {literal(err)}")
        return None


def ding_figures(summary: CheckpointSummary) -> None:
    """A DI-engine checkpoint's counters."""
    if summary.ding is None:
        return
    counters = summary.ding.counters
    cols = st.columns(5)
    cols[0].metric("Pushed", f"{counters['pushed']:,}")
    cols[1].metric("Sampled", f"{counters['sampled']:,}",
                   help=f"in {counters['sample_calls']:,} sample calls")
    cols[2].metric("Refused pushes", f"{counters['refused_pushes']:,}",
                   help="pushes the throughput controller refused (nothing stored)")
    cols[3].metric("Refused samples", f"{counters['refused_samples']:,}",
                   help="samples that returned None: too few items, the throughput "
                   "controller, or every priority zero")
    cols[4].metric("Removed", f"{counters['removed']:,}",
                   help="items that left the buffer: overwritten, stale, used up or cleared")


def sampler_figures(summary: CheckpointSummary, items: ReplayItems) -> None:
    """What the checkpoint's sampler says (held items, alpha, beta, draws so far)."""
    cols = st.columns(5)
    unit = "rows" if items.unit == "row" else "valid items"
    cols[0].metric(f"Held {unit}", f"{len(items):,}",
                   help=f"of {summary.capacity * (summary.env_count or 1):,} when full")
    if summary.sampler is not None:
        cols[1].metric("alpha", f"{summary.sampler.options['alpha']:g}",
                       help="a draw picks an item in proportion to priority ** alpha")
        cols[2].metric("beta (next draw)", f"{summary.sampler.beta:.4g}",
                       help="importance weights are (w / w_min) ** -beta; beta anneals from "
                       f"{summary.sampler.options['beta']:g} to 1 over "
                       f"{summary.sampler.options['anneal_steps']} draws")
        cols[3].metric("Draws so far", f"{summary.sampler.steps:,}")
        cols[4].metric("Max priority", f"{summary.sampler.max_priority:.4g}",
                       help="what a new item gets")


def priority_charts(items: ReplayItems, drawn: Drawn | None, entry: BufferEntry,
                    seq: int | None) -> None:
    """Priorities and importance weights, with the drawn batch marked."""
    st.subheader("Priorities and importance weights")
    unit = "row" if items.unit == "row" else "item"
    left, right = st.columns(2)
    left.vega_lite_chart(log_histogram_figure(
        log_histogram(items.priority if items.priority is not None else np.zeros(0),
                      probability=items.probability,
                      drawn=None if drawn is None else drawn.priority),
        title="Priority distribution", x="priority (log scale)", unit=unit,
    ), width="stretch")
    if items.windowed and seq is not None:
        try:
            shares = loaders.window_shares_of(entry.path, seq)
        except (*READ_ERRORS, TypeError) as err:
            right.error(f"{literal(entry.path)}: cannot weigh its windows: {literal(err)}")
            return
        right.vega_lite_chart(log_histogram_figure(
            log_histogram(shares.importance, probability=shares.probability,
                          drawn=None if drawn is None else drawn.importance[::seq]),
            title=f"Importance weights of windows of {seq} rows, at beta = {items.beta:.4g}",
            x="importance weight (log scale)", unit="window",
        ), width="stretch")
        st.caption(
            "Left: every stored row's priority (a window weighs its rows' "
            "max or mean priority, to the power alpha); red, the rows of the drawn windows. "
            "Right: the importance weight each valid window would carry if drawn now, over "
            "the windows (bars) and over the draws (dotted: heavy windows count more)."
        )
        dominance_section(shares, drawn)
        return
    if items.importance is None:
        return
    right.vega_lite_chart(log_histogram_figure(
        log_histogram(items.importance, probability=items.probability,
                      drawn=None if drawn is None else drawn.importance),
        title=f"Importance weights at beta = {items.beta:.4g}",
        x="importance weight (log scale)", unit=unit,
    ), width="stretch")
    st.caption(
        f"Bars: the share of held {unit}s in each bin; dotted: the share of draws the sampler "
        f"promises there (priority ** alpha over the sum); red: the drawn batch. Importance "
        f"weights are (w / w_min) ** -beta: 1 for the lightest {unit}, smaller for the ones "
        "drawn more often than uniform."
    )


def dominance_section(shares: WindowShares, drawn: Drawn | None) -> None:
    """Which trajectories the window draws favour: a chart, three figures and a table."""
    st.subheader("Which trajectories dominate")
    ranking = dominance(shares)
    cols = st.columns(3)
    cols[0].metric("Trajectories holding a window", f"{ranking.eligible:,}",
                   help=f"of {len(shares.windows):,}; a window reads {shares.need} rows")
    cols[1].metric("Effective trajectories", f"{ranking.effective:.1f}",
                   help="1 / sum(share^2): how many equally likely trajectories the draws are "
                   "worth (the eligible count when every one is alike)")
    cols[2].metric("Share of the top 10 %", f"{ranking.top_share:.1%}",
                   help="of the draws, going to the largest tenth of the eligible trajectories")
    hits = (None if drawn is None or drawn.trajectory is None else
            np.bincount(drawn.trajectory, minlength=len(ranking.share)))
    st.vega_lite_chart(dominance_figure(ranking, hits, windows=0 if drawn is None else
                                     drawn.windows), width="stretch")
    with ui.lazy_expander(f"The {min(TABLE_TRAJECTORIES, len(ranking.order))} trajectories "
                          "with the largest share", key="rp_top_table") as shown:
        if shown:
            st.dataframe(pd.DataFrame(trajectory_rows(shares, ranking, drawn,
                                                      top=TABLE_TRAJECTORIES)),
                         hide_index=True, width="stretch")


def use_staleness(items: ReplayItems, summary: CheckpointSummary) -> None:
    """Use and staleness histograms of a DI-engine buffer's items."""
    st.subheader("Use and staleness")
    if items.use is None or items.collect_iter is None:
        st.info(f"`{summary.kind}` does not count uses or record when items were collected: "
                "only DI-engine buffers do.")
        return
    known = items.collect_iter[np.isfinite(items.collect_iter)]
    newest = int(known.max()) if len(known) else 0
    learner = st.number_input(
        "Learner iteration for staleness", min_value=0, value=None, step=1, key="rp_iter",
        bind="query-params", placeholder=f"newest collect_iter ({newest:,})",
        help="The checkpoint does not record the learner's iteration; staleness is measured "
        "at this one (empty: the newest item's collect_iter, so the newest reads 0).",
    )
    at = newest if learner is None else int(learner)
    staleness = items.staleness(at)
    left, right = st.columns(2)
    left.vega_lite_chart(count_histogram_figure(
        count_histogram(items.use), title="Use: times each item was sampled",
        x="use", unit="item", limit=items.max_use, limit_label="max_use (used up: removed)",
    ), width="stretch")
    if staleness is not None:
        right.vega_lite_chart(count_histogram_figure(
            count_histogram(staleness), title=f"Staleness at learner iteration {at:,}",
            x="learner iteration - collect_iter", unit="item", limit=items.max_staleness,
            limit_label="max_staleness (removed at the next sample)",
        ), width="stretch")


@st.fragment
def checkpoint_part(source: Source, path: Path) -> None:
    """Everything the checkpoint at ``path`` shows. A fragment: Resample and the draw's other
    widgets rerun this part alone, not the rest of the page (caption, moments, buffer picker),
    which does not depend on them; each run reads the summary afresh, so a checkpoint replaced
    between two draws is noticed."""
    entry = ui.current_entry(source, path)
    if entry is None or entry.summary is None:
        st.info(f"{literal(path)}: no readable buffer there now; pick another in the menu above.")
        return
    summary = entry.summary
    st.caption(f"`{entry.path}` ({summary.kind}).")
    ding_figures(summary)
    if not has_replay_items(summary):
        st.info(
            f"`{summary.kind}` draws episodes uniformly, so it has no priorities or "
            "importance weights; its per-episode use and collect_iter are in state.json, "
            "which only the buffer's own load reads, so the checkpoint gives its counters "
            "alone. Its `replay` records, where the run logged them, are in the "
            f"**{LOG_TAB}** tab."
        )
        return
    try:
        items = loaders.replay_items_of(entry.path)
    except READ_ERRORS as err:
        st.error(f"{literal(entry.path)}: cannot read its replay figures: {literal(err)}")
        return
    sampler_figures(summary, items)
    if len(items) == 0:
        st.info(f"{literal(entry.path)}: the buffer holds no items; there is nothing to show "
                "or draw.")
        return
    drawn = None
    seq = None
    if items.priority is not None:
        request = draw_controls(summary, items)
        seq = request.seq_length
        drawn = draw(entry, request)
        if drawn is not None:
            what = (f"{drawn.windows:,} windows of {seq} rows" if seq is not None
                    else f"{len(drawn.rows):,} {'rows' if items.unit == 'row' else 'items'}")
            how = ("by priority, as `sample` draws them once its staleness removal and "
                   "throughput check pass" if summary.kind == ADVANCED else
                   "with `sample_index`, the rows `sample` would read")
            st.caption(f"Seed {request.seed}: {what} drawn {how}, from a copy (the checkpoint, "
                       "its use counts and its beta stay as saved). In red below.")
        priority_charts(items, drawn, entry, seq)
    else:
        st.info(f"`{summary.kind}` draws uniformly: it has no priorities or importance weights "
                "to show, and nothing for Resample to mark on them.")
    if summary.ding is not None:
        use_staleness(items, summary)
    if drawn is not None:
        with ui.lazy_expander("The drawn batch as a table", key="rp_batch_table") as shown:
            if shown:
                st.dataframe(pd.DataFrame({"row" if items.unit == "row" else "slot": drawn.rows,
                                           "priority": drawn.priority,
                                           "importance weight": drawn.importance}),
                             hide_index=True, width="stretch", height=300)


def log_part(replay: dict[str, ReplaySeries], checkpoint_kind: str | None) -> None:
    """Everything the log shows; ``checkpoint_kind``: the class of the buffer picked above the
    tabs (None when the source has none this page can show)."""
    # The checkpoint's own class first, so both parts describe one buffer where they can.
    names = sorted(replay, key=lambda name: name != checkpoint_kind)
    name = names[0]
    if len(names) > 1:
        name = st.selectbox("Buffer in the log", names, key="rp_log_buffer",
                            bind="query-params",
                            help="Records name the class of the buffer that logged them."
                            ) or names[0]
    found = replay[name] if name in replay else replay[names[0]]
    first, last = int(found.steps[0]), int(found.steps[-1])
    st.caption(f"{found.total:,} `replay` records of `{found.buffer}`, steps {first:,} to "
               f"{last:,}.")
    if checkpoint_kind is not None and found.buffer != checkpoint_kind:
        st.warning(f"These records come from a `{found.buffer}`, the buffer picked above is a "
                   f"`{checkpoint_kind}`: the two tabs describe different buffers.")
    lacking = found.lacking()
    if lacking:
        needs = "; ".join(f"{group} (`{'`, `'.join(GROUPS[group])}`)" for group in lacking)
        st.info(f"These records lack {needs}, so those charts are not drawn.")
    latest = found.last
    figures = [(key, latest.get(key)) for key in ("count", "beta", "max_priority",
                                                    "push_count", "sample_count", "removed")]
    shown = [(key, value) for key, value in figures
             if isinstance(value, int | float) and not isinstance(value, bool)]
    if shown:
        st.caption(f"At the last record (step {last:,}):")
        cols = st.columns(len(shown))
        for col, (key, value) in zip(cols, shown, strict=True):
            col.metric(key, f"{value:,}" if isinstance(value, int) else f"{value:.4g}")
    log_y = st.toggle("Log scale for priorities and importance weights", value=True,
                      key="rp_log", bind="query-params")
    charts = []
    if not {"priority quantiles"} & set(lacking):
        charts.append(quantile_figure(found, GROUPS["priority quantiles"],
                                      title="Priority quantiles", y="priority", log_y=log_y))
    if "importance weights" not in lacking:
        charts.append(quantile_figure(found, GROUPS["importance weights"],
                                      title="Importance weights (min, median, max)",
                                      y="importance weight", log_y=log_y))
    if "push and sample rates" not in lacking:
        charts.append(rates_figure(found))
    if "throughput ratio" not in lacking:
        charts.append(thruput_figure(found))
    if "refused pushes and samples" not in lacking:
        charts.append(refusals_figure(found))
    limits = {"use": _number(latest.get("max_use")),
              "staleness": _number(latest.get("max_staleness"))}
    for name_ in ("use", "staleness"):
        if name_ not in lacking:
            charts.append(mean_max_figure(found, name_, limit=limits[name_]))
    top = latest.get("top_trajectories")
    if found.has("top_share") or found.has("trajectories_drawn"):
        charts.append(top_share_figure(found, top=str(len(top)) if isinstance(top, list)
                                       else "most-drawn"))
    charts += [scalar_figure(found, key) for key in found.extra]
    columns = st.columns(2)
    for position, chart in enumerate(charts):
        columns[position % 2].vega_lite_chart(chart, width="stretch")
    if isinstance(top, list) and top and all(isinstance(row, dict) for row in top):
        with ui.lazy_expander(f"The {len(top)} most-drawn trajectories of the last interval "
                              f"(step {last:,})", key="rp_interval_table") as opened:
            if opened:
                st.caption("env: the env column; start: the env step of the trajectory's "
                           "first row; windows and share: its windows among those drawn since "
                           "the previous record.")
                st.dataframe(pd.DataFrame(top), hide_index=True, width="stretch")
    if found.extra:
        st.caption("Also logged: " + ", ".join(f"`{key}`" for key in found.extra) + ".")
    if found.refusals:
        with ui.lazy_expander(f"Why pushes and samples were refused ({len(found.refusals):,} "
                              "changes of `last_refusal`)", key="rp_refusals") as opened:
            if opened:
                st.dataframe(pd.DataFrame(found.refusals, columns=["step", "last refusal"]),
                             hide_index=True, width="stretch")


def _number(value: object) -> float | None:
    return (float(value) if isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(float(value)) else None)


def open_a_tab_with_content(source: Source, *, shows: dict[str, bool]) -> None:
    """Once per source in a session, before the tabs are drawn: leave the open tab (the
    checkpoint's on a first visit, or the one a link names) where it shows something for this
    source, else open the other, so a log-only run opens on its log.

    Checked when the source changes, not on every run: the tabs' default stays the
    checkpoint's (Streamlit keys a widget with its default, so a default that followed the
    source would drop the user's tab), and a checkpoint a live run writes later does not move
    the tab away from the log the user is reading. ``shows``: tab label -> whether it has
    content.
    """
    if st.session_state.get(TAB_SOURCE_KEY) == str(source.path):
        return
    first_visit = TAB_SOURCE_KEY not in st.session_state
    st.session_state[TAB_SOURCE_KEY] = str(source.path)
    linked = st.query_params.get(TAB_KEY) if first_visit else None
    if linked in shows:
        return  # a link's tab is obeyed, even one that says what it needs
    open_tab = st.session_state.get(TAB_KEY, CHECKPOINT_TAB)
    if not shows.get(open_tab, False):
        other = LOG_TAB if open_tab == CHECKPOINT_TAB else CHECKPOINT_TAB
        if shows[other]:
            st.session_state[TAB_KEY] = other


if fits:
    # Above the tabs: the log's part names it when its records come from another buffer.
    chosen = ui.choose_buffer(data, accept=replayable)
else:  # the reasons above the tabs, whichever is open
    ui.show_unusable(data, others_usable=False)
    chosen = None
open_a_tab_with_content(source, shows={CHECKPOINT_TAB: fits, LOG_TAB: bool(series)})
# Only the open tab's part is drawn: a fresh browser tab shows the checkpoint's part 0.14 s
# sooner than it showed both (alternated fresh tabs; the README's performance section).
checkpoint_tab, log_tab = st.tabs([CHECKPOINT_TAB, LOG_TAB], key=TAB_KEY, on_change="rerun",
                                  bind="query-params")
if checkpoint_tab.open:
    with checkpoint_tab:
        if chosen is not None:
            checkpoint_part(source, chosen.path)
        else:
            ui.show_lack(data, CHECKPOINT_NEED)
if log_tab.open:
    with log_tab:
        if log is not None:
            ui.show_problems(log.problems, what="log lines")
        if series:
            log_part(series, None if chosen is None or chosen.summary is None
                     else chosen.summary.kind)
        else:
            ui.show_lack(data, LOG_NEED)
