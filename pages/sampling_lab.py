"""Sampling lab: draw real batches with bufcore's sampler, see where they land, test the
frequencies against the sampler's promise, and export the draw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from app import loaders, rlinf_view, ui
from app.rlinf_figures import landing_figure
from app.run_data import EXPERT, ONLINE, READ_ERRORS, ZVECTORS, SourceData
from app.sampling_figures import frequency_figure, landing_map_figure, row_landing_figure
from app.sampling_lab import (
    MAX_SEED,
    SAMPLING_KINDS,
    LabRequest,
    batch_columns,
    batch_csv,
    draw_index,
    draw_many,
    frequencies,
    next_seed,
    pin,
    prepared,
    snippet,
)
from app.sources import Source
from app.text import literal

RESULT = "lab_frequencies"
SEED_KEY = "lab_seed"
# The URL's pin of the checkpoint a link was made on (see app.sampling_lab.pin).
PIN_KEY = "lab_pin"
# session_state: checkpoint path -> pin of the checkpoint this session last drew from.
PINS = "lab_pins"

st.title("Sampling lab")
RLINF_RESULT = "lab_rlinf_frequencies"


def rlinf_lab(data: SourceData) -> None:
    """An RLinf directory: rows drawn as the disk buffer draws them, from its index alone."""
    loaded = ui.rlinf_source(data)
    if loaded is None:
        return
    summary, index, window, _ = loaded
    ids, _ = rlinf_view.window_table(index, window)
    if len(ids) == 0:
        st.info(f"{data.path}: no indexed trajectory has its file here; there is nothing to "
                "sample.")
        return
    rows = int(index.samples[index.positions(window)].sum())
    st.caption(
        f"Drawn as `TrajectoryReplayBuffer(sample_window_size={window})` loading `{data.path}` "
        f"draws with `sample(n, generator=g)`: n rows uniformly, with replacement, over the "
        f"{rows:,} rows of the window's {len(ids):,} trajectories (the newest whose files are "
        "here), each row id mapped to its trajectory by bucketize. Only the index is read. "
        "The seed and sizes are in the URL, and Resample moves the seed on."
    )
    cols = st.columns(4, vertical_alignment="bottom")
    count = int(cols[0].number_input(
        "Rows to draw (num_chunks)", min_value=1, max_value=65_536, value=256, step=1,
        key="lab_batch", bind="query-params", help="sample(num_chunks) returns exactly this many.",
    ))
    seed = int(cols[1].number_input(
        "Seed", min_value=0, max_value=MAX_SEED, step=1, key=SEED_KEY, bind="query-params",
        help="Seeds the draw's generator; Resample moves it to the next seed.",
    ))
    cols[2].button("Resample", type="primary", help="Draw again with the next seed",
                   on_click=resample)
    repeats = int(cols[3].number_input(
        "Batches to draw", min_value=1, max_value=10_000, value=200, step=50, key="lab_draws",
        bind="query-params", help="How many batches Draw below takes, from this seed.",
    ))
    drawn = rlinf_view.draw_many(index, window=window, count=count, seed=seed, repeats=1)[0]
    columns = rlinf_view.batch_columns(index, drawn)
    st.subheader("Which trajectories and rows were drawn")
    st.vega_lite_chart(landing_figure(ids, index.samples[index.positions(window)],
                                   columns["trajectory_id"], columns["row"]), width="stretch")
    st.caption(f"Seed {seed}: {count:,} rows from "
               f"{len(np.unique(columns['trajectory_id'])):,} trajectories. Row r of a "
               "trajectory is step r // B of env r % B.")
    with ui.lazy_expander("The batch as a table", key="lab_rlinf_table") as shown:
        if shown:
            st.dataframe(pd.DataFrame(columns), hide_index=True, width="stretch", height=300)

    st.subheader("Frequencies over many draws")
    signature = repr((str(data.path), window, count, seed, repeats))
    if st.button(f"Draw {repeats:,} batches", help="Compare each trajectory's share of draws "
                 "with its share of the window's rows"):
        with st.spinner(f"Drawing {repeats:,} batches..."):
            draws = rlinf_view.draw_many(index, window=window, count=count, seed=seed,
                                         repeats=repeats)
            st.session_state[RLINF_RESULT] = (signature, rlinf_view.frequencies(index, window,
                                                                                 draws))
    stored = st.session_state.get(RLINF_RESULT)
    if stored is None or stored[0] != signature:
        st.info(f"Press **Draw {repeats:,} batches** to compare how often each trajectory is "
                "drawn with its share of the window's rows (T x B over the window's total).")
    else:
        result = stored[1]
        test = result.test
        cols = st.columns(4)
        cols[0].metric("Rows drawn", f"{result.draws:,}",
                       help=f"{result.batches:,} batches of {count:,}, one generator")
        cols[1].metric(
            "chi-square p-value", "n/a" if test.p_value != test.p_value else f"{test.p_value:.3f}",
            help=f"statistic {test.statistic:.1f} on {test.dof} degrees of freedom. A p-value "
            "that is not tiny means the draws fit the expected shares.",
        )
        cols[2].metric("Row coverage", f"{result.coverage:.1%}",
                       help=f"{result.hit:,} distinct of the window's {result.valid:,} rows "
                       "were drawn at least once.")
        cols[3].metric("Trajectories", f"{len(result.labels):,}")
        st.vega_lite_chart(frequency_figure(result.labels, result.expected, result.observed,
                                         unit="trajectory", units="trajectories"),
                        width="stretch")

    st.subheader("Export")
    st.download_button("Download the batch (CSV)", batch_csv(columns),
                       file_name=f"{data.path.name}-seed{seed}.csv", mime="text/csv",
                       on_click="ignore")  # a download changes nothing: no rerun
    # In a popover: a code block costs a fresh tab ~0.2 s of syntax highlighting, and a
    # popover draws its contents only when opened.
    with st.popover("Reproduce this batch in Python", icon=":material/code:"):
        st.caption("With bufcore's TrajectoryReplayBuffer (it reads the window's files into "
                   "memory and writes nothing into the directory):")
        st.code(rlinf_view.snippet(str(data.path), window=window, count=count, seed=seed,
                                   pickled=summary.trajectory_format != "pt"),
                language="python")




def controls(kind: str, sampler: Any) -> LabRequest:
    """The lab's widgets (bound to the URL) as a request; ``sampler`` is the checkpoint's
    saved sampler summary (None: the uniform one)."""
    windowed = kind in (ONLINE, EXPERT)
    cols = st.columns(4)
    batch = cols[0].number_input(
        "Batch size", min_value=1, max_value=65_536, value=256, step=1, key="lab_batch",
        bind="query-params", help="Rows per batch; a multiple of seq_length for windows.",
    )
    seed = cols[1].number_input(
        # No value=: its default is min_value (0), and Resample sets it through session
        # state, which Streamlit warns about for a widget given an explicit default.
        "Seed", min_value=0, max_value=MAX_SEED, step=1, key=SEED_KEY,
        bind="query-params", help="Seeds the draw; Resample moves it to the next seed.",
    )
    seq = weighting = None
    if windowed:
        seq = cols[2].number_input(
            "seq_length", min_value=1, max_value=4096, value=8, step=1, key="lab_seq",
            bind="query-params", help="Rows per window (each window stays in one trajectory).",
        )
        if sampler is not None:
            # The prioritized sampler weighs each window itself: no weighting to choose.
            weighting = "window"
            options = sampler.options
            cols[3].caption(
                f"**Prioritized windows**: a window weighs the {options['reduction']} of its "
                f"rows' priorities, to the power alpha = {options['alpha']:g}; beta of the "
                f"next draw {sampler.beta:.3f}."
            )
        else:
            weighting = cols[3].radio(
                "Weighting", ["trajectory", "window"], key="lab_weighting",
                bind="query-params", horizontal=True,
                help="trajectory: each long-enough trajectory equally likely (times its "
                "priority), then a uniform start; window: every valid window equally likely.",
            )
    return LabRequest(kind, int(batch), None if seq is None else int(seq), weighting, int(seed))


def resample() -> None:
    """Resample's callback: the next seed, set before the widgets are drawn (so the URL,
    the seed box and the snippet all show it)."""
    st.session_state[SEED_KEY] = next_seed(int(st.session_state.get(SEED_KEY, 0)))


def check_pin(path: str, current: str | None) -> None:
    """Warn when the checkpoint at ``path`` is not the one this session last drew from, or
    (on a session's first draw) not the one the link was made on; then pin ``current``."""
    pins: dict[str, str | None] = st.session_state.setdefault(PINS, {})
    linked = st.query_params.get(PIN_KEY)
    if path in pins and pins[path] != current:
        st.warning(f"{literal(path)} now holds another checkpoint than your last draw (manifest "
                   f"{pins[path]} -> {current}): this batch and the snippet below come from the "
                   "new one; a snippet copied before refuses to run.")
    elif not pins and linked and linked != current:
        st.warning(f"This link was made on another checkpoint at {literal(path)} (manifest "
                   f"{linked[:16]}); the path now holds {current}, so this batch differs from "
                   "the one shared.")
    pins[path] = current
    if current is None:
        st.query_params.pop(PIN_KEY, None)
    elif linked != current:
        st.query_params[PIN_KEY] = current


@st.fragment
def lab(source: Source, path: Path) -> None:
    """The draw from the buffer at ``path``: widgets, batch, charts, frequencies and export.
    A fragment: Resample, Draw and the draw's widgets rerun this part alone (the page above
    does not depend on them); each run reads the buffer's summary afresh, so a checkpoint
    replaced between two draws is noticed."""
    entry = ui.current_entry(source, path)
    if entry is None or entry.summary is None:
        st.info(f"{literal(path)}: no readable buffer there now; pick another in the menu above.")
        return
    summary = entry.summary
    request = controls(summary.kind, summary.sampler)
    priorities = ui.session_priorities(entry.path) if summary.kind == EXPERT else None
    if priorities is not None:
        # On by default: the Curriculum page's Apply says the lab now samples with them. Not
        # in the URL: the priorities live in this session only, so a link cannot carry them.
        use = st.toggle(
            "Sample with this session's re-prioritized priorities (Curriculum page)",
            value=True, key="lab_reprioritized",
        )
        priorities = priorities if use else None
    if summary.length == 0:
        st.info(f"{literal(entry.path)}: the buffer is empty; there is nothing to sample.")
        return
    try:
        loaded = loaders.index_buffer(entry.path)
    except READ_ERRORS as err:
        st.error(f"{literal(entry.path)}: the buffer cannot be loaded: {literal(err)}")
        return
    try:
        buffer = prepared(loaded, request, priorities)
    except ValueError as err:
        st.error(f"{literal(entry.path)}: {literal(err)}")
        return
    signature = repr((str(entry.path), request, priorities is not None))
    check_pin(str(entry.path), pin(summary.digest or summary.file_stamp))
    buttons = st.columns([1, 2, 2, 3], vertical_alignment="bottom")
    buttons[0].button("Resample", type="primary", help="Draw a new batch: the next seed",
                      on_click=resample)
    seed = request.seed
    repeats = int(buttons[1].number_input(
        "Batches to draw", min_value=1, max_value=10_000, value=200, step=50, key="lab_draws",
        bind="query-params", help="How many batches the button beside draws, from this seed.",
    ))
    draw_n = buttons[2].button(f"Draw {repeats:,} batches",
                               help="Draw that many batches and compare the frequencies")
    try:
        index = draw_index(buffer, request, seed)
    except ValueError as err:
        st.error(f"{literal(entry.path)}: cannot sample: {literal(err)}")
        return
    columns = batch_columns(buffer, request, index)
    windows = ("" if request.seq_length is None else
               f" ({len(columns['row']) // request.seq_length:,} windows of "
               f"{request.seq_length} rows)")
    st.caption(f"Seed {seed}: {len(columns['row']):,} rows{windows}.")

    st.subheader("Where the batch landed")
    if summary.kind == ONLINE and summary.end_key is not None and request.seq_length is not None:
        end_name = "/".join(summary.end_key)
        binned = ui.end_map(entry.path, summary.end_key)
        if binned is not None:
            seq_len = request.seq_length
            st.vega_lite_chart(
                landing_map_figure(
                    binned, summary.cursor, columns["time"][::seq_len],
                    columns["env"][::seq_len], seq_len, end_key=end_name, full=summary.full,
                ),
                width="stretch",
            )
    else:
        unit = "z vector" if summary.kind == ZVECTORS else "row"
        segments = None
        if summary.kind == EXPERT:
            table = buffer.trajectories()
            segments = (table.start.numpy(), np.asarray(buffer.motion_ids))
        st.vega_lite_chart(
            row_landing_figure(columns["row"], len(buffer), unit=unit, segments=segments),
            width="stretch",
        )
    with ui.lazy_expander("The batch as a table", key="lab_table") as shown:
        if shown:
            st.dataframe(pd.DataFrame(columns), hide_index=True, width="stretch", height=300)

    st.subheader("Frequencies over many draws")
    if draw_n:
        with st.spinner(f"Drawing {repeats:,} batches..."):
            try:
                drawn = draw_many(buffer, request, seed, repeats)
                st.session_state[RESULT] = (signature, seed, frequencies(buffer, request, drawn))
            except ValueError as err:
                st.error(f"{literal(entry.path)}: cannot sample: {literal(err)}")
    stored = st.session_state.get(RESULT)
    if stored is None or stored[0] != signature:
        st.info(f"Press **Draw {repeats:,} batches** to compare how often each "
                + ("motion" if summary.kind == EXPERT else "trajectory"
                   if summary.kind == ONLINE else "row bin")
                + " is drawn with what the sampler promises.")
    else:
        result = stored[2]
        test = result.test
        drawn_unit = "windows" if request.windowed else (
            "z vectors" if summary.kind == ZVECTORS else "rows")
        cols = st.columns(5)
        cols[0].metric("Batches drawn", f"{result.batches:,}",
                       help=f"from seed {stored[1]}, one generator for all of them")
        cols[1].metric(
            f"{drawn_unit.capitalize()} drawn", f"{result.draws:,}",
            help=f"{result.batches:,} batches x {result.draws // max(result.batches, 1):,} "
            f"{drawn_unit} per batch",
        )
        cols[2].metric(
            "chi-square p-value", "n/a" if test.p_value != test.p_value else f"{test.p_value:.3f}",
            help=f"statistic {test.statistic:.1f} on {test.dof} degrees of freedom ({test.bins} "
            "bins after merging those expecting < 5 draws). A p-value that is not tiny means "
            "the draws fit the expected frequencies.",
        )
        cols[3].metric(
            "Window coverage" if request.windowed else "Row coverage",
            f"{result.coverage:.1%}",
            help=f"{result.hit:,} distinct of {result.valid:,} valid window starts (or rows) were "
            "hit at least once.",
        )
        cols[4].metric(result.units.capitalize(), f"{len(result.labels):,}")
        st.vega_lite_chart(
            frequency_figure(result.labels, result.expected, result.observed, unit=result.unit,
                             units=result.units),
            width="stretch",
        )

    st.subheader("Export")
    # A prioritized sampler weighs windows itself: the snippet needs no weighting view.
    saved_weighting = (request.weighting if summary.sampler is not None
                       else getattr(loaded, "weighting", None))
    st.download_button(
        "Download the batch (CSV)", batch_csv(columns), file_name=f"{entry.name}-seed{seed}.csv",
        mime="text/csv", on_click="ignore",  # a download changes nothing: no rerun
    )
    # In a popover: see the RLinf lab's export.
    with st.popover("Reproduce this batch in Python", icon=":material/code:"):
        st.caption("From the checkpoint with bufcore (the snippet checks that the path still "
                   "holds the checkpoint drawn from):")
        st.code(snippet(str(entry.path), request, seed, saved_weighting=saved_weighting,
                        priorities=priorities, digest=summary.digest,
                        file_stamp=summary.file_stamp), language="python")


source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if data is not None and ui.is_rlinf(data):
    rlinf_lab(data)
    st.stop()
st.caption(
    "Draws real batches with the buffer's own sampler (a seeded generator; the buffer's stream "
    "is untouched). The seed, sizes and weighting are in the URL, and Resample moves the seed "
    "on: a shared link shows the same batch, and says so when its checkpoint was replaced."
)
entry = ui.choose_buffer(data, kinds=SAMPLING_KINDS) if data is not None else None
if source is not None and data is not None and entry is not None and entry.summary is not None:
    st.caption(f"Sampling from `{entry.path}` ({entry.summary.kind}, "
               f"{entry.summary.length:,} rows).")
    ui.show_moments(data, None)
    lab(source, entry.path)
