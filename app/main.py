"""The dashboard's entry script: ``streamlit run app/main.py``, or ``python -m app``, which
serves it through :mod:`app.serve`.

``streamlit run`` puts only this file's folder on ``sys.path``, so the repository root is added
first: the pages import ``app`` and ``bufcore`` from it. Then ``st.navigation`` runs the chosen
page from ``pages/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
import torch  # noqa: E402

from app import ui  # noqa: E402

PAGES = ROOT / "pages"

# The server's tensor work is small and runs per click: torch's intra-op thread pool only adds
# latency to it, a lot on a busy machine (copying the demo's 3 MB trajectory index for a
# Replay draw: ~1 ms on one thread, ~30 ms median on two with the cores shared).
torch.set_num_threads(1)

st.set_page_config(page_title="bufcore dashboard", layout="wide")
page = st.navigation(
    {
        "Buffers": [
            st.Page(PAGES / "overview.py", title="Overview", default=True),
            st.Page(PAGES / "fifo.py", title="FIFO occupancy"),
            st.Page(PAGES / "trajectories.py", title="Trajectories"),
            st.Page(PAGES / "sampling_lab.py", title="Sampling lab"),
            st.Page(PAGES / "z_buffer.py", title="Z-buffer"),
        ],
        "Training": [
            st.Page(PAGES / "metrics.py", title="Metrics"),
            st.Page(PAGES / "curriculum.py", title="Curriculum"),
            st.Page(PAGES / "td_ema.py", title="TD-EMA"),
            st.Page(PAGES / "replay.py", title="Replay statistics"),
            st.Page(PAGES / "live.py", title="Live"),
            st.Page(PAGES / "compare.py", title="Compare"),
        ],
    }
)
# A hand-edited link must not crash a widget while Streamlit seeds it from the URL.
ui.drop_unusable_query_values()
page.run()
