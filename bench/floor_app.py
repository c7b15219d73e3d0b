"""The floor of the browser bench: a Streamlit page with a title and, with ``?chart=vega``, one
small Vega-Lite chart (what every dashboard chart is) and a Resample button that redraws it;
with ``?chart=1``, the same chart drawn by Plotly (the ``bench`` extra), what the dashboard paid
per fresh tab before its charts moved to Vega-Lite.

``bench.dashboard_browser`` serves it beside the dashboard and measures it the same way, so each
run reports what Streamlit's frontend start-up, a rerun and Plotly's bundle cost on that machine
at that moment: a page's first render and Resample can only be judged against that floor.
"""

from __future__ import annotations

import numpy as np
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
        import plotly.graph_objects as go  # only this floor needs it: the bench extra

        st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=points)))
    else:
        st.vega_lite_chart(
            {"values": [{"x": x, "y": float(y)} for x, y in zip((1, 2, 3), points, strict=True)]},
            {"mark": "line", "encoding": {"x": {"field": "x", "type": "quantitative"},
                                          "y": {"field": "y", "type": "quantitative"}}},
        )
