"""The bufcore dashboard: data access and figure builders for the Streamlit pages.

Everything here except :mod:`app.ui`, :mod:`app.loaders`, :mod:`app.main` and
:mod:`app.serve` is plain Python that runs without Streamlit: functions that find runs, read
summaries lazily, reduce long series and build Vega-Lite chart specs (:mod:`app.vega`) from
numpy arrays. The page scripts in ``pages/`` read widgets, call these and draw. Data flows one
way: the dashboard reads what a run wrote through bufcore and writes only through bufcore's
checkpoint API (a re-prioritized buffer is saved as a new checkpoint).
"""
