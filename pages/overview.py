"""Overview: a health check of the chosen run or checkpoint (what is damaged or unusable, and
why; what the run lacks), the moment it shows, every buffer and its spec, the latest metrics."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import loaders, ui
from app.overview import (
    buffer_health,
    buffer_rows,
    health_problems,
    healthy_text,
    latest_records,
    missing_parts,
    rank_rows,
    scalar_items,
    spec_rows,
    verify_size,
    verify_text,
)
from app.rlinf_view import PKL_NOTE, leaf_rows, overview_items, rlinf_problems
from app.run_data import SourceData
from app.text import literal

# Buffers up to this size are verified on every new checkpoint version; larger ones on request
# (hashing reads the whole file).
VERIFY_AUTO_BYTES = 1 << 30
VERIFY_REQUESTS = "overview_verify"



def rlinf_overview(data: SourceData) -> None:
    """An RLinf buffer directory: its health, counts, window, cache and leaves."""
    st.caption(f"{data.kind}: `{data.path}`")
    loaded = ui.rlinf_source(data)
    st.subheader("Health")
    if loaded is None:
        return
    summary, index, window, cache = loaded
    problems = rlinf_problems(summary, index)
    for problem in problems:
        st.error(problem)
    newest = index.positions(1)
    reads, errors = ([], []) if summary.trajectory_format != "pt" or len(newest) == 0 else (
        loaders.rlinf_trajectories(index, [int(index.ids[newest[0]])]))
    for error in errors:
        st.error(f"The newest trajectory file cannot be read: {literal(error)}")
    if not problems and not errors:
        st.success(
            "Healthy: the index and metadata.json agree and every indexed trajectory file is "
            "there" + (" (the newest was read and matches its index entry; Trajectories reads "
                       "more)." if reads else ".")
        )
    if summary.orphans:
        st.warning(
            f"{summary.orphans:,} files here are not named by the index (a crash between a "
            "file and the index naming it). Loads ignore them; "
            "`TrajectoryReplayBuffer.remove_orphan_files()` removes them."
        )
    cols = st.columns(5)
    cols[0].metric("Trajectories", f"{summary.trajectories:,}")
    cols[1].metric("Samples (rows)", f"{summary.samples:,}")
    cols[2].metric("In the window", f"{len(index.positions(window)):,}",
                   help=f"sample_window_size = {window} (0: all), set in the sidebar.")
    cols[3].metric("Cached", f"{len(index.positions(cache)) if cache else 0:,}",
                   help=f"cache_size = {cache}, set in the sidebar.")
    cols[4].metric("Format", summary.trajectory_format)
    items = overview_items(summary, index, window=window, cache=cache)
    st.dataframe(pd.DataFrame(items, columns=["what", "value"]), hide_index=True,
                 width="stretch", height=36 * (len(items) + 1))
    st.subheader("Stored leaves")
    if summary.trajectory_format != "pt":
        st.info(PKL_NOTE)
    elif reads:
        st.caption(f"Rows of trajectory {reads[0].trajectory_id} (the newest), flattened to "
                   "`[T*B, ...]` as the buffer samples them.")
        st.dataframe(pd.DataFrame(leaf_rows(reads[0])), hide_index=True, width="stretch")
    else:
        st.info("No trajectory file could be read, so the leaves are unknown.")


st.title("Overview")
source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if source is not None and ui.is_rlinf(data) and data is not None:
    rlinf_overview(data)
    st.stop()
if source is not None and data is not None:
    st.caption(f"{data.kind}: `{data.path}`")
    log = loaders.load_log(source.path) if data.has_log else None
    ui.show_moments(data, None if log is None else log.records)

    st.subheader("Health")
    requested: set[str] = st.session_state.setdefault(VERIFY_REQUESTS, set())
    damage: dict[str, str] = {}
    health: dict[str, str] = {}
    deferred = []
    for entry in data.buffers:
        size = verify_size(entry)
        verify = size is not None and (size <= VERIFY_AUTO_BYTES or str(entry.path) in requested)
        if size is not None and not verify:
            deferred.append((entry, size))
        found = None
        if size is not None and verify:
            with st.spinner(f"Verifying {verify_text(entry, size)} against its manifest..."):
                found = loaders.row_damage(entry)
            if found is not None:
                damage[entry.name] = found
        health[entry.name] = buffer_health(entry, found, verified=verify)
    problems = health_problems(data, damage)
    for problem in problems:
        st.error(problem)
    for entry, size in deferred:
        if st.button(f"Verify {verify_text(entry, size)}: reads all of it",
                     key=f"verify-{entry.name}"):
            requested.add(str(entry.path))
            st.rerun()
    if not problems and data.buffers:
        st.success(healthy_text(data, health))
    missing = missing_parts(data)
    if missing:
        st.info("What this run lacks:\n" + "".join(f"\n- {line}" for line in missing))

    run, status = data.run, data.train_status
    if run is not None:
        cols = st.columns(4)
        cols[0].metric("Checkpoint step", run.step)
        cols[1].metric("Curriculum round", run.round)
        cols[2].metric("Seed", "none" if run.seed is None else run.seed)
        if run.curriculum is not None and run.curriculum.last_mean_emd is not None:
            cols[3].metric("Last mean EMD", f"{run.curriculum.last_mean_emd:.3f}")
    elif status is not None:
        st.columns(4)[0].metric(
            "Checkpoint env step", f"{status.time:,}",
            help="BFM-Zero's checkpoint/train_status.json: env steps trained when it saved.",
        )
    st.subheader("Buffers")
    if not data.buffers:
        st.info("No buffer checkpoints here yet (a run saves them at its first checkpoint).")
    else:
        rows = buffer_rows(data.buffers, health)
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        ranks = rank_rows(data.buffers, () if data.run is None else data.run.replicated)
        if ranks:
            st.subheader("Ranks")
            st.caption(
                f"Saved by {len(ranks[0]) - 3} ranks (`checkpoint/buffers/<name>/rank_<r>/`): "
                "the rows each rank's buffer holds, of its capacity. A sharded buffer's rows "
                "differ by rank; a replicated one's are the same on every rank, so its rows "
                "in all are one rank's."
            )
            st.dataframe(pd.DataFrame(ranks), hide_index=True, width="stretch")
        for entry in data.buffers:
            if entry.summary is not None:
                with ui.lazy_expander(f"{entry.name}: stored leaves ({len(entry.summary.spec)})",
                                      key=f"ov_leaves_{entry.name}") as shown:
                    if shown:
                        spec = spec_rows(entry.summary)
                        if spec:
                            st.dataframe(pd.DataFrame(spec), hide_index=True, width="stretch")
                        else:
                            st.write("Nothing written yet.")
    if log is not None:
        st.subheader("Latest metrics")
        st.caption(f"{len(log.records)} records in `{source.path / 'metrics.jsonl'}`")
        ui.show_problems(log.problems, what="log lines")
        for kind, record in latest_records(log).items():
            with ui.lazy_expander(f"{kind} at step {record['step']}", key=f"ov_latest_{kind}",
                                  expanded=kind == "train") as shown:
                if shown:
                    st.dataframe(
                        pd.DataFrame(scalar_items(record), columns=["metric", "value"]),
                        hide_index=True,
                        width="stretch",
                    )
