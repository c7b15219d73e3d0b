"""TD-EMA: the TD-error EMA against each batch's statistics, and a preview of the TD weights
other beta / clip settings would give (from the logged TD error distribution where the run
logged one, else under a labelled Normal assumption)."""

from __future__ import annotations

import math

import streamlit as st

from app import loaders, ui
from app.td_figures import clip_figure, stat_figure, weight_histogram_figure
from app.td_view import (
    clip_gap,
    preview_weights,
    spread_rows,
    td_settings,
    warmup_end,
)

# Steps previewed in the clipped-fraction chart, and samples per step there / in the histogram.
PREVIEW_STEPS, CHART_SAMPLES, HISTOGRAM_SAMPLES = 400, 1024, 8192

st.title("TD-EMA")
st.caption(
    "The value function's TD errors are normalised by an exponential moving average (EMA) of "
    "their mean and std; each token's weight is clip(exp((td - mean) / std / beta), min, max)."
)
source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if source is not None and data is not None:
    for error in data.errors:
        st.warning(error)
    log = loaders.load_log(source.path)
    if data.metrics is None and not log.records and not log.problems:
        ui.show_lack(data, "`train` records with TD statistics (td/ema_mean, ...) in "
                     "metrics.jsonl")
        st.stop()
    # Curves from the log; warmup and settings may come from the checkpoint's run.json.
    ui.show_moments(data, log.records)
    ui.show_problems(log.problems, what="log lines")
    series = loaders.td_series_of(source.path)
    if not len(series):
        st.info(
            f"{source.path / 'metrics.jsonl'}: no train record with TD statistics "
            "(td/ema_mean) yet; they appear after the run's first update."
        )
        st.stop()
    run_record = next((r for r in log.records if r.get("kind") == "run"), None)
    options = run_record.get("options") if run_record else None
    if not isinstance(options, dict) and data.run is not None:
        options = data.run.options
    saved = data.run.td_ema.warmup_steps if data.run and data.run.td_ema else None
    settings = td_settings(options if isinstance(options, dict) else None, saved)
    end = warmup_end(series.steps, settings.warmup)

    st.subheader("EMA against batch statistics")
    smoothing = st.slider(
        "Smoothing of the batch curves", 0.0, 0.99, 0.6, 0.01, key="td_smooth",
        bind="query-params",
        help="Exponential smoothing of the drawn batch curves only (the raw curve stays faint "
        "behind); 0 draws them raw. The EMA curve is drawn as logged.",
    )
    warmup_text = (
        f"The shaded region is the EMA's warmup ({settings.warmup} updates, ending at step "
        f"{end}): batches are blended in with growing weight before the EMA momentum applies."
        if end is not None else "No warmup is marked (none recorded, or the log ends inside it)."
    )
    st.caption(
        f"{len(series):,} updates. Red: the EMA training normalised with; blue: each batch's "
        f"own statistic. {warmup_text}"
    )
    left, right = st.columns(2)
    for column, stat in ((left, "mean"), (right, "std")):
        column.vega_lite_chart(
            stat_figure(series, stat, smoothing=smoothing, warmup_step=end,
                        warmup=settings.warmup),
            width="stretch",
        )

    st.subheader("Weight preview")
    logged_distribution = series.quantiles is not None
    basis = (
        "Each update logged the distribution of its normalised TD errors (td - EMA mean) / "
        "EMA std as quantiles (`td/norm_quantiles`), so the preview reads the fraction any "
        "beta and bounds clip **from the logged distribution**, within 0.5 points of what "
        "training counted at the same settings (with 201 levels)."
        if logged_distribution else
        "This log holds each batch's TD mean and std but not its distribution "
        "(`td/norm_quantiles`; log it with `TDWeighting(..., quantiles=201)`), so the preview "
        "**assumes each batch's TD errors were Normal(batch mean, batch std)**: skewed or "
        "heavy-tailed TD errors clip differently from what it shows."
    )
    st.caption(
        basis + " Weights use the EMA as it stood before each update (as training did). "
        "Defaults are the run's own settings"
        + ("." if settings.recorded else " (this run did not record them: bufcore's defaults).")
    )
    cols = st.columns(4)
    beta = cols[0].slider(
        "beta (temperature)", 0.05, max(5.0, 2 * settings.beta), settings.beta, 0.05,
        key="td_beta", bind="query-params",
        help="Larger beta flattens the weights towards 1.",
    )
    min_weight = cols[1].slider(
        "min weight", 0.0, max(1.0, 2 * settings.min_weight), settings.min_weight, 0.01,
        key="td_min_weight", bind="query-params",
    )
    max_weight = cols[2].slider(
        "max weight", 1.0, max(20.0, 2 * settings.max_weight), settings.max_weight, 0.1,
        key="td_max_weight", bind="query-params",
    )
    steps = [int(s) for s in series.steps]
    step = cols[3].select_slider(
        "Step shown in the histogram", steps, steps[-1], key="td_step", bind="query-params",
    )
    if min_weight > max_weight:
        st.error(f"min weight {min_weight:g} is above max weight {max_weight:g}: lower it.")
        st.stop()
    row = steps.index(step) if step in steps else len(steps) - 1
    single = preview_weights(series, [row], beta=beta, min_weight=min_weight,
                             max_weight=max_weight, samples=HISTOGRAM_SAMPLES)
    rows = spread_rows(len(series), PREVIEW_STEPS)
    preview = preview_weights(series, rows, beta=beta, min_weight=min_weight,
                              max_weight=max_weight, samples=CHART_SAMPLES)
    at_run = settings.recorded and (beta, min_weight, max_weight) == (
        settings.beta, settings.min_weight, settings.max_weight
    )
    metrics = st.columns(4)
    kind = "preview" if single.empirical[0] else "preview, Normal"
    metrics[0].metric(f"Clipped at min ({kind})", f"{single.clip_min[0]:.1%}")
    metrics[1].metric(f"Clipped at max ({kind})", f"{single.clip_max[0]:.1%}")
    if at_run:
        for column, name, values in ((metrics[2], "min", series.clip_min),
                                     (metrics[3], "max", series.clip_max)):
            logged = values[row]
            column.metric(f"Clipped at {name} (logged)",
                          "n/a" if math.isnan(logged) else f"{logged:.1%}")
    left, right = st.columns(2)
    left.vega_lite_chart(
        weight_histogram_figure(single.weights, min_weight=min_weight, max_weight=max_weight,
                                step=step, empirical=bool(single.empirical[0])),
        width="stretch",
    )
    right.vega_lite_chart(
        clip_figure(preview, series, logged=at_run, smoothing=smoothing, warmup_step=end),
        width="stretch",
    )
    if at_run:
        low_gap, high_gap = clip_gap(preview, series, rows)
        meaning = (
            "from the logged distribution it stays below 0.5 points (the quantiles' spacing)."
            if preview.empirical.all() else
            "under the Normal assumption a gap above about 1 point means the TD errors were "
            "not Normal (skewed or heavy-tailed)."
        )
        st.caption(
            f"At the run's own settings the wide pale lines are what training logged. Mean gap "
            f"preview vs logged: {low_gap:.2%} (min bound), {high_gap:.2%} (max bound); "
            + meaning
        )
    else:
        st.caption(
            "Logged fractions are drawn only at the run's own settings (training logged "
            "those); move the sliders back to compare."
        )
