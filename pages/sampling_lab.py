"""Sampling lab: draw real batches with bufcore's sampler, see where they land, test the
frequencies against the sampler's promise, and export the draw."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import ui
from app.ring import boundary_map
from app.run_data import EXPERT, ONLINE, READ_ERRORS, ZVECTORS
from app.sampling_figures import frequency_figure, landing_map_figure, row_landing_figure
from app.sampling_lab import (
    SAMPLING_KINDS,
    LabRequest,
    batch_columns,
    batch_csv,
    draw_index,
    draw_many,
    draw_seed,
    frequencies,
    prepared,
    snippet,
)

COUNTER = "lab_draw_counter"
RESULT = "lab_frequencies"

st.title("Sampling lab")
st.caption(
    "Draws real batches with the buffer's own sampler (a seeded generator; the buffer's stream "
    "is untouched). The seed, sizes and weighting are in the URL: a shared link shows the same "
    "first batch."
)
source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
entry = ui.choose_buffer(data, kinds=SAMPLING_KINDS) if data is not None else None


def controls(kind: str) -> LabRequest:
    """The lab's widgets (bound to the URL) as a request."""
    windowed = kind in (ONLINE, EXPERT)
    cols = st.columns(4)
    batch = cols[0].number_input(
        "Batch size", min_value=1, max_value=65_536, value=256, step=1, key="lab_batch",
        bind="query-params", help="Rows per batch; a multiple of seq_length for windows.",
    )
    seed = cols[1].number_input(
        "Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="lab_seed",
        bind="query-params", help="Seeds the first draw; Resample moves on from it.",
    )
    seq = weighting = None
    if windowed:
        seq = cols[2].number_input(
            "seq_length", min_value=1, max_value=4096, value=8, step=1, key="lab_seq",
            bind="query-params", help="Rows per window (each window stays in one trajectory).",
        )
        weighting = cols[3].radio(
            "Weighting", ["trajectory", "window"], key="lab_weighting", bind="query-params",
            horizontal=True,
            help="trajectory: each long-enough trajectory equally likely (times its priority), "
            "then a uniform start; window: every valid window equally likely.",
        )
    return LabRequest(kind, int(batch), None if seq is None else int(seq), weighting, int(seed))


if entry is not None and entry.summary is not None:
    summary = entry.summary
    request = controls(summary.kind)
    priorities = ui.session_priorities(entry.path) if summary.kind == EXPERT else None
    if priorities is not None:
        use = st.toggle(
            "Sample with this session's re-prioritized priorities (Curriculum page)",
            key="lab_reprioritized",
        )
        priorities = priorities if use else None
    if summary.length == 0:
        st.info(f"{entry.path}: the buffer is empty; there is nothing to sample.")
        st.stop()
    try:
        loaded = ui.index_buffer(entry.path)
    except READ_ERRORS as err:
        st.error(f"{entry.path}: the buffer cannot be loaded: {err}")
        st.stop()
    try:
        buffer = prepared(loaded, request, priorities)
    except ValueError as err:
        st.error(f"{entry.path}: {err}")
        st.stop()
    signature = repr((str(entry.path), request, priorities is not None))
    counters = st.session_state.setdefault(COUNTER, {})
    buttons = st.columns([1, 1, 2, 4])
    if buttons[0].button("Resample", type="primary", help="Draw a new batch"):
        counters[signature] = counters.get(signature, 0) + 1
    draw = counters.get(signature, 0)
    seed = draw_seed(request.seed, draw)
    repeats = buttons[2].number_input(
        "N", min_value=1, max_value=10_000, value=200, step=50, key="lab_draws",
        bind="query-params", label_visibility="collapsed",
        help="How many batches Draw N draws.",
    )
    draw_n = buttons[1].button(f"Draw {int(repeats)}", help="Repeat the draw N times")
    try:
        index = draw_index(buffer, request, seed)
    except ValueError as err:
        st.error(f"{entry.path}: cannot sample: {err}")
        st.stop()
    columns = batch_columns(buffer, request, index)
    st.caption(f"Draw #{draw + 1} (generator seed {seed}): {len(columns['row']):,} rows.")

    st.subheader("Where the batch landed")
    if summary.kind == ONLINE and summary.end_key is not None and request.seq_length is not None:
        end_name = "/".join(summary.end_key)
        flags = ui.end_flags(entry.path, summary.end_key)
        if flags is not None:
            seq_len = request.seq_length
            st.plotly_chart(
                landing_map_figure(
                    boundary_map(flags), summary.cursor, columns["time"][::seq_len],
                    columns["env"][::seq_len], seq_len, end_key=end_name, full=summary.full,
                ),
                width="stretch",
            )
    else:
        unit = "z vector" if summary.kind == ZVECTORS else "row"
        st.plotly_chart(
            row_landing_figure(columns["row"], len(buffer), unit=unit), width="stretch"
        )
    with st.expander("The batch as a table", expanded=False):
        st.dataframe(pd.DataFrame(columns), hide_index=True, width="stretch", height=300)

    st.subheader("Frequencies over many draws")
    if draw_n:
        with st.spinner(f"Drawing {int(repeats)} batches..."):
            try:
                drawn = draw_many(buffer, request, seed, int(repeats))
                st.session_state[RESULT] = (signature, seed, frequencies(buffer, request, drawn))
            except ValueError as err:
                st.error(f"{entry.path}: cannot sample: {err}")
    stored = st.session_state.get(RESULT)
    if stored is None or stored[0] != signature:
        st.info(f"Press **Draw {int(repeats)}** to compare how often each "
                + ("motion" if summary.kind == EXPERT else "trajectory"
                   if summary.kind == ONLINE else "row bin")
                + " is drawn with what the sampler promises.")
    else:
        result = stored[2]
        test = result.test
        cols = st.columns(4)
        cols[0].metric("Draws", f"{result.draws:,}")
        cols[1].metric(
            "chi-square p-value", "n/a" if test.p_value != test.p_value else f"{test.p_value:.3f}",
            help=f"statistic {test.statistic:.1f} on {test.dof} degrees of freedom ({test.bins} "
            "bins after merging those expecting < 5 draws). A p-value that is not tiny means "
            "the draws fit the expected frequencies.",
        )
        cols[2].metric(
            "Coverage of valid windows" if request.windowed else "Coverage of rows",
            f"{result.coverage:.1%}",
            help=f"{result.hit:,} distinct of {result.valid:,} possible starts were hit at least "
            "once.",
        )
        cols[3].metric(f"{result.unit.capitalize()}s", f"{len(result.labels):,}")
        st.plotly_chart(
            frequency_figure(result.labels, result.expected, result.observed, unit=result.unit),
            width="stretch",
        )

    st.subheader("Export")
    saved_weighting = getattr(loaded, "weighting", None)
    st.download_button(
        "Download the batch (CSV)", batch_csv(columns), file_name=f"{entry.name}-seed{seed}.csv",
        mime="text/csv",
    )
    st.caption("Reproduce this batch from the checkpoint with bufcore:")
    st.code(snippet(str(entry.path), request, seed, saved_weighting=saved_weighting,
                    priorities=priorities), language="python")
