"""The floor of the browser bench: a Streamlit page with a title and, with ``?chart=1``, one
small Plotly chart and a Resample button that redraws it; with ``?chart=vega``, the same chart
drawn by Streamlit's own Vega-Lite instead (what replacing Plotly would save).

``bench.dashboard_browser`` serves it beside the dashboard and measures it the same way, so each
run reports what Streamlit's frontend start-up, a rerun and Plotly's bundle cost on that machine
at that moment: a page's first render and Resample can only be judged against that floor.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.title("Floor")
chart = st.query_params.get("chart")
if chart in ("1", "vega"):
    if st.button("Resample"):
        st.session_state.seed = st.session_state.get("seed", 0) + 1
    seed = st.session_state.get("seed", 0)
    st.query_params["lab_seed"] = str(seed)
    st.caption(f"Seed {seed}: three points")
    points = np.random.default_rng(seed).random(3)
    if chart == "1":
        st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=points)))
    else:
        st.vega_lite_chart(
            {"values": [{"x": x, "y": float(y)} for x, y in zip((1, 2, 3), points, strict=True)]},
            {"mark": "line", "encoding": {"x": {"field": "x", "type": "quantitative"},
                                          "y": {"field": "y", "type": "quantitative"}}},
        )
