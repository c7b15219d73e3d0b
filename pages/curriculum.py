"""Curriculum: per-motion EMD across rounds, priorities and their spread, and a re-prioritize
preview that shows the sampling probability each motion would really get."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd
import streamlit as st

from app import loaders, ui
from app.curriculum_figures import (
    current_priority_bars,
    emd_heatmap,
    motion_history,
    preview_figure,
    priority_lines,
    saved_probability_bars,
    spread_figure,
)
from app.curriculum_history import SORTS, effective_size, entropy, motion_order
from app.curriculum_view import (
    MODES,
    SHOWN_DECIMALS,
    duplicate_version,
    format_options,
    motion_view,
    new_priorities,
    per_motion,
    same_when_shown,
    save_reprioritized,
    trajectory_priorities,
)
from app.run_data import EXPERT, READ_ERRORS, REPRIORITIZED_DIR, save_base
from app.sources import OutsideRootsError, resolve_under_roots
from app.text import literal

st.title("Curriculum")
st.caption(
    "Each evaluation round measures how badly every motion is tracked (EMD, lower is better) "
    "and turns those EMDs into the expert buffer's sampling priorities."
)

source = ui.choose_source()
data = ui.source_data(source) if source is not None else None
if source is None or data is None:
    st.stop()
# Rounds come from the log (or run.json), the priorities and the preview from the checkpoint.
ui.show_moments(data, loaders.load_log(source.path).records if data.has_log else None)
expert_entry = next(
    (e for e in data.buffers if e.summary is not None and e.summary.kind == EXPERT), None
)

history = ui.history_of(source, data)
if history is None:
    ui.show_lack(data, "evaluation rounds (`eval` records in metrics.jsonl, or a curriculum "
                 "in checkpoint/run.json) to draw EMDs and priorities across rounds")
    found = ui.trajectories_of(expert_entry, expert=True) if expert_entry else None
    kept = None if found is None else found[0].priorities
    if found is None or expert_entry is None or kept is None:
        st.stop()
    ids = np.unique(found[1].motion_id)
    _, probability = motion_view(
        kept, found[1].length, found[1].motion_id, ids,
        need=found[0].need, weighting=found[0].weighting,
    )
    st.subheader(f"Priorities saved in the expert buffer `{expert_entry.name}`")
    spread = st.columns(3)
    spread[0].metric("Motions", f"{len(ids):,}")
    spread[1].metric("Entropy (nats)", f"{float(entropy(probability)):.3f}",
                     help=f"log {len(ids)} = {np.log(len(ids)):.3f} when uniform")
    spread[2].metric("Effective motions", f"{float(effective_size(probability)):.1f}",
                     help="1 / sum(p^2): how many equally likely motions the sampling is worth")
    st.vega_lite_chart(saved_probability_bars(ids, probability), width="stretch")
    st.caption(
        f"From the priorities saved in `{expert_entry.path}` alone: the exact probability "
        f"that a window of {found[0].seq_length} rows comes from each motion "
        f"(`{found[0].weighting}` weighting). Re-prioritizing needs the EMDs of an "
        "evaluation round, which this run lacks."
    )
    st.stop()
ui.show_problems(history.problems, what="eval records")
st.caption(f"{history.rounds} rounds over {len(history.motion_ids)} motions, from "
           f"`{history.source}`."
           + (" The expert buffer holds several episodes of some motions: each motion's EMD "
              "and priority are the mean over its episodes, its probability their sum."
              if history.per_episode else ""))

# `or`: a selectbox with options never returns None, but its type says it may.
sort = st.selectbox(
    "Sort motions by", SORTS, key="cur_sort", bind="query-params",
    help="Highest first for EMDs and priority; the URL keeps the choice.",
) or SORTS[0]
order = motion_order(history, sort)
st.vega_lite_chart(emd_heatmap(history, order, sort=sort), width="stretch")
left, right = st.columns(2)
left.vega_lite_chart(priority_lines(history), width="stretch")
right.vega_lite_chart(spread_figure(history), width="stretch")
st.vega_lite_chart(current_priority_bars(history, order), width="stretch")
motions = [int(m) for m in history.motion_ids[order]]
# cast: Streamlit's stubs type a bound selectbox of ints as returning None.
focus = cast(int, st.selectbox(
    "Follow one motion", motions, key="motion", bind="query-params",
    help="Its EMD and sampling probability in every round; the URL keeps the motion.",
))
st.vega_lite_chart(motion_history(history, focus), width="stretch")

# ---------------------------------------------------------------- re-prioritize
st.header("Re-prioritize")
if expert_entry is None:
    ui.show_lack(data, f"an expert buffer checkpoint ({EXPERT}) to re-prioritize")
    st.stop()
loaded = ui.trajectories_of(expert_entry, expert=True)
if loaded is None:
    st.stop()
settings, trajectories = loaded
if settings.priorities is None:
    st.error(f"{expert_entry.path}: not an expert buffer with saved priorities")
    st.stop()

saved = data.run.curriculum if data.run is not None else None
defaults = (
    (saved.mode, saved.min_val, saved.max_val, saved.scale)
    if saved is not None else ("exp", 0.5, 2.0, 2.0)
)
st.caption(
    f"New priorities from the last round's EMDs. The run used: {format_options(*defaults)}. "
    f"The buffer samples windows of {settings.seq_length} rows"
    f"{' plus the next row' if settings.offset else ''} with `{settings.weighting}` weighting, "
    "so a motion shorter than that is never sampled, and with `window` weighting longer "
    "motions get more."
)
cols = st.columns(4)
mode = cols[0].segmented_control("mode", MODES, default=defaults[0], key="cur_mode",
                                 bind="query-params") or defaults[0]
min_val = cols[1].number_input("min (EMD clamp)", min_value=0.0, value=float(defaults[1]),
                               step=0.1, key="cur_min", bind="query-params")
max_val = cols[2].number_input("max (EMD clamp)", min_value=0.0, value=float(defaults[2]),
                               step=0.1, key="cur_max", bind="query-params")
scale = cols[3].number_input("scale", min_value=0.001, value=float(defaults[3]), step=0.5,
                             key="cur_scale", bind="query-params")
try:
    motion_new = new_priorities(history.emd[-1], mode=mode, min_val=min_val, max_val=max_val,
                                scale=scale)
    new = trajectory_priorities(motion_new, history.motion_ids, trajectories.motion_id)
except (ValueError, TypeError) as err:
    st.error(f"These options cannot be applied: {literal(err)}")
    st.stop()

session = ui.session_priorities(expert_entry.path)
current = settings.priorities if session is None or len(session) != len(new) else session
need = settings.need
motions = history.motion_ids[order]

view = {"lengths": trajectories.length, "trajectory_motions": trajectories.motion_id,
        "motions": motions, "need": need, "weighting": settings.weighting}
current_priority, current_probability = motion_view(current, **view)
new_priority, new_probability = motion_view(new, **view)
lengths = per_motion(trajectories.length, trajectories.motion_id, motions)
table = pd.DataFrame({
    "motion": motions,
    "last EMD": history.emd[-1, order],
    "length (rows)": lengths.astype(int),
    "P(sampled) now": current_probability,
    "P(sampled) new": new_probability,
    # Rounded to the decimals shown (+ 0.0 turns -0.0 into 0.0), so that float noise
    # does not print as "-0.0000".
    "change": (new_probability - current_probability).round(SHOWN_DECIMALS) + 0.0,
})
# The priority saved differs from what a motion gets only when some motion is too short for
# a window or the weighting counts windows; only then is it a column of its own.
shows_priority = not same_when_shown(new_priority, new_probability)
if shows_priority:
    table.insert(5, "priority new (saved)", new_priority)
what = "the session copy" if current is session else "the checkpoint"
st.caption(
    f"\"now\" is {what}'s priorities. P(sampled) is the exact probability that a sampled "
    "window comes from that motion"
    + (", which differs from the priority saved (its own column) because "
       + ("some trajectory is shorter than a window" if (trajectories.length < need).any()
          else "`window` weighting counts each motion's windows") + "."
       if shows_priority else
       "; here it equals the motion's normalised priority (every motion holds a window and "
       "each trajectory is drawn by its priority alone).")
)
st.vega_lite_chart(preview_figure(motions, current_probability, new_probability),
                   width="stretch")
with ui.lazy_expander("Per motion: last EMD, length, P(sampled) now and new (table)",
                      key="cur_table") as shown:
    if shown:
        st.dataframe(table, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(
                         format=f"%.{SHOWN_DECIMALS}f") for c in table.columns[3:]})

apply_col, save_col = st.columns(2)
if apply_col.button("Apply to session copy", key="cur_apply"):
    ui.set_session_priorities(expert_entry.path, new)
    apply_col.success("Applied: the Sampling lab now samples this expert buffer with these "
                      "priorities (its switch for them starts on; turn it off there to compare).")
if session is not None:
    apply_col.caption("A session copy is active. It applies to this browser session only; "
                      "the checkpoint on disk is unchanged.")
    if apply_col.button("Drop the session copy", key="cur_drop"):
        ui.set_session_priorities(expert_entry.path, None)
        st.rerun()
else:
    apply_col.caption("Applies to this browser session only; nothing is written.")

if save_col.button("Save as new checkpoint", key="cur_save"):
    # A press answers for itself: an earlier press's "Saved" must not stand beside a refusal.
    st.session_state.get("cur_saved", {}).pop(str(expert_entry.path), None)
    config = loaders.dashboard_config()
    # The checkpoint itself and every saved version: one of them may already hold the result.
    held = [(e.path, e.summary.rows_digest) for e in data.buffers if e.summary is not None
            and (e is expert_entry or e.name.startswith(f"{REPRIORITIZED_DIR}/"))]
    try:
        base = resolve_under_roots(save_base(source.path, source.kind), config.roots)
        # The folder the versions go in must stay under the roots too (it could be a link).
        resolve_under_roots(base / REPRIORITIZED_DIR, config.roots)
        rows_digest = None if expert_entry.summary is None else expert_entry.summary.rows_digest
        duplicate = duplicate_version(new, rows_digest, held)
        written = (None if duplicate is not None
                   else save_reprioritized(expert_entry.path, base, mode, new))
    except OutsideRootsError as err:
        save_col.error(f"Not saved: {literal(err)}")
    except (*READ_ERRORS, FileExistsError, IndexError, TypeError) as err:
        save_col.error(f"Not saved: {literal(err)}")
    else:
        if written is None:
            save_col.info(f"Not saved: `{duplicate}` already holds these rows with these "
                          "priorities, so a new version would be identical. Nothing was "
                          "written; change a knob to save another.")
        else:
            # Keyed by the checkpoint saved from, so another run's page does not report it.
            saves = st.session_state.setdefault("cur_saved", {})
            saves[str(expert_entry.path)] = str(written)
saved_to = st.session_state.get("cur_saved", {}).get(str(expert_entry.path))
if saved_to is not None:
    save_col.success(f"Saved a new expert checkpoint: `{saved_to}` (the original is untouched).")
else:
    save_col.caption("Writes a new expert checkpoint under `reprioritized/` in the run; the "
                     "original checkpoint is never changed.")
