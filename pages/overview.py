"""Overview: every buffer of the chosen run or checkpoint, its spec, and the latest metrics."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import ui
from app.overview import buffer_rows, latest_records, scalar_items, spec_rows

st.title("Overview")
source = ui.choose_source()
if source is not None:
    data = ui.source_data(source)
    if data is not None:
        st.caption(f"{data.kind}: `{data.path}`")
        for error in data.errors:
            st.error(error)
        if data.run is not None:
            run = data.run
            cols = st.columns(4)
            cols[0].metric("Checkpoint step", run.step)
            cols[1].metric("Curriculum round", run.round)
            cols[2].metric("Seed", "none" if run.seed is None else run.seed)
            if run.curriculum is not None and run.curriculum.last_mean_emd is not None:
                cols[3].metric("Last mean EMD", f"{run.curriculum.last_mean_emd:.3f}")
        st.subheader("Buffers")
        if not data.buffers:
            st.info("No buffer checkpoints here yet (a run saves them at its first checkpoint).")
        else:
            rows = buffer_rows(data.buffers)
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
            for entry in data.buffers:
                if entry.error is not None:
                    st.error(f"{entry.name}: {entry.error}")
                elif entry.summary is not None:
                    with st.expander(f"{entry.name}: stored leaves ({len(entry.summary.spec)})"):
                        spec = spec_rows(entry.summary)
                        if spec:
                            st.dataframe(pd.DataFrame(spec), hide_index=True, width="stretch")
                        else:
                            st.write("Nothing written yet.")
        if data.has_log:
            log = ui.load_log(source.path)
            st.subheader("Latest metrics")
            st.caption(f"{len(log.records)} records in `{source.path / 'metrics.jsonl'}`")
            ui.show_problems(log.problems, what="log lines")
            for kind, record in latest_records(log).items():
                with st.expander(f"{kind} at step {record['step']}", expanded=kind == "train"):
                    st.dataframe(
                        pd.DataFrame(scalar_items(record), columns=["metric", "value"]),
                        hide_index=True,
                        width="stretch",
                    )
