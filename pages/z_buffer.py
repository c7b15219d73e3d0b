"""Z-buffer: a seeded subset of the stored z in 2D (PCA), coloured by age or source, with the
explained variance, the norms, and each z's cosine similarity to the mean z."""

from __future__ import annotations

import streamlit as st

from app import ui
from app.run_data import READ_ERRORS, ZVECTORS
from app.text import literal
from app.z_figures import histogram_figure, projection_figure, variance_figure
from app.zspace import (
    cosine_to_mean,
    norms,
    pca_2d,
    read_sources,
    read_z,
    slot_ages,
    subset_slots,
)

DEFAULT_POINTS, MAX_POINTS = 2_000, 20_000
SEED_KEY = "z_seed"


def _next_subset() -> None:
    # A new seed (kept in the URL) rather than hidden state, so a shared link shows this subset.
    st.session_state[SEED_KEY] = int(st.session_state.get(SEED_KEY, 0)) + 1


st.title("Z-buffer")
st.caption(
    "The z buffer holds the latent task vectors z the policy explores with. This page projects a "
    "random subset of them onto their two main directions of variation (PCA) to show how they "
    "spread, how old they are, and where they came from."
)
source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
entry = ui.choose_buffer(data, kinds=(ZVECTORS,), label="Z buffer") if data else None
if source is not None and data is not None and entry is not None and entry.summary is not None:
    summary = entry.summary
    st.caption(f"`{entry.path}`: {summary.length:,} of {summary.capacity:,} slots written, "
               f"cursor {summary.cursor}, {'wrapped' if summary.full else 'not wrapped yet'}.")
    ui.show_moments(data, None)
    if summary.length == 0:
        st.info(f"{entry.path}: the z buffer is empty (nothing has been written to it yet).")
        st.stop()
    cols = st.columns([1, 1, 1, 2])
    points = int(cols[0].number_input(
        "Vectors shown", 1, MAX_POINTS, DEFAULT_POINTS, 500, key="z_points",
        bind="query-params", help=f"A random subset of at most {MAX_POINTS:,} stored z.",
    ))
    # No default value: Resample sets this key through session state, and a widget with
    # both logs a warning. Without one it starts at min_value, 0.
    seed = int(cols[1].number_input(
        "Subset seed", min_value=0, max_value=2**31 - 1, step=1, key=SEED_KEY,
        bind="query-params",
        help="Seeds the torch.Generator that picks the subset; the same seed shows the same z.",
    ))
    cols[2].button("Resample subset", on_click=_next_subset, help="Draw another subset.")
    colour = cols[3].segmented_control(
        "Colour by", ["age", "source"], default="age", key="z_colour", bind="query-params",
    ) or "age"

    slots = subset_slots(summary.length, points, seed)
    try:
        z = read_z(entry.path, slots)
    except (*READ_ERRORS, IndexError) as err:
        st.error(f"{literal(entry.path)}: cannot read the stored z ({literal(err)})")
        st.stop()
    ages = slot_ages(slots, summary.cursor, summary.length)
    sources = None
    if colour == "source":
        try:
            # The tags live in the run's run.json (a bare buffer checkpoint has none).
            tags = None if data.run is None else read_sources(data.run.path.parent,
                                                              summary.length)
        except READ_ERRORS as err:
            st.warning(f"z sources cannot be read, colouring by age instead: {literal(err)}")
            tags = None
        else:
            if tags is None:
                st.info("This run did not record z sources (run.json has no z_source), so "
                        "the z are coloured by age.")
        sources = None if tags is None else tags.names(slots)

    projection = pca_2d(z)
    shown = f"{len(slots):,} of {summary.length:,} stored z (seed {seed})"
    left, right = st.columns([2, 1])
    left.vega_lite_chart(
        projection_figure(projection.coords, projection.explained, slots=slots, ages=ages,
                          sources=sources),
        width="stretch",
    )
    right.vega_lite_chart(variance_figure(projection.explained), width="stretch")
    how = (
        "Colour: where each z came from (expert: a motion's encoding; random: a random z of "
        "similar norm)." if sources is not None else
        "Colour: age, the number of z written after it (yellow: newest, dark: oldest)."
    )
    st.caption(
        f"{shown}. Each dot is one z; nearby dots are similar vectors. The axes are the two "
        f"directions along which the shown z vary most; the bar chart says how much of the "
        f"total variance each direction holds (low shares: z spread over many directions). {how}"
    )
    groups = sources
    left, right = st.columns(2)
    left.vega_lite_chart(
        histogram_figure(norms(z), title="Norm of each z", x="‖z‖ (Euclidean norm)",
                         groups=groups),
        width="stretch",
    )
    right.vega_lite_chart(
        histogram_figure(cosine_to_mean(z), title="Cosine similarity to the mean z",
                         x="cos(z, mean z)", groups=groups),
        width="stretch",
    )
    st.caption(
        f"Both over the {shown}. Cosine near 1: z point the same way as the mean (a collapsed "
        "buffer); spread around 0: they point in many directions."
    )
