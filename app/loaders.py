"""Cached reads every page shares: summaries, the metrics log, single leaves, index-only
buffers, replay figures and RLinf indexes, each read once per version of the files under it.

Each loader of a path calls a Streamlit cache keyed on the path and its
:func:`~app.fingerprint.fingerprint`, so an entry goes stale exactly when a file under the path
changes. Those that read a checkpoint or an RLinf directory first check that it resolves
inside the dashboard's roots (:func:`confined`); the source and its log were checked when the
source was chosen (:mod:`app.sources`), and :func:`load_source` reads only the parts inside
them. They return immutable summaries or fresh numpy arrays (``st.cache_data`` copies), or the
one shared index-only buffer (``st.cache_resource``, never to be mutated). What cannot be read
is raised as :data:`~app.run_data.READ_ERRORS`, except where a docstring says the loader
returns it (the log's problems, a row verification's reason, unreadable RLinf files): drawing
why is :mod:`app.ui`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from app.fingerprint import Fingerprint, fingerprint
from app.ring import BinnedMap, boundary_map
from app.run_data import (
    READ_ERRORS,
    BufferEntry,
    MetricsLog,
    SourceData,
    read_log,
    read_source,
)
from app.sources import DashboardConfig, Source, discover, inside_roots
from app.td_view import TDSeries, td_series
from app.trajectory_stats import end_matrix
from bufcore import load_buffer
from bufcore.inspect import (
    METRICS_FILE,
    ReplayItems,
    RLinfIndex,
    RLinfTrajectory,
    WindowShares,
    read_leaf,
    read_rlinf_index,
    read_rlinf_trajectory,
    replay_items,
    summarize_checkpoint,
    window_shares,
)


def dashboard_config() -> DashboardConfig:
    """The run directories and roots the dashboard was started with."""
    return DashboardConfig.from_environment()


def confined(path: Path) -> Path:
    """``path`` resolved, checked to lie inside the dashboard's roots before anything under
    it is read (entries come from a summary that was checked already; this holds even if a
    link was swapped in since).

    Raises:
        OutsideRootsError: it resolves outside every root (a ValueError, so in READ_ERRORS).
    """
    return inside_roots(path, dashboard_config().roots)



@st.cache_data(show_spinner=False, max_entries=64)
def _cached_source(path: str, roots: tuple[str, ...], key: Fingerprint) -> SourceData:
    del key  # part of the cache key only
    return read_source(Path(path), roots=tuple(map(Path, roots)))


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_log(path: str, key: Fingerprint) -> MetricsLog:
    del key
    return read_log(Path(path))


def load_source(path: Path) -> SourceData:
    """The source's summaries, cached until a file under it changes (the log excluded); only
    the parts that resolve inside the dashboard's roots are read."""
    roots = tuple(map(str, dashboard_config().roots))
    return _cached_source(str(path), roots, fingerprint(path, skip=(METRICS_FILE,)))


def load_log(path: Path) -> MetricsLog:
    """The source's metrics log, cached until the file changes.

    A log that cannot be read at all gives no records and one problem saying why (pages list
    problems with :func:`app.ui.show_problems`), never an exception.
    """
    log = path / METRICS_FILE
    try:
        return _cached_log(str(log), fingerprint(log))
    except READ_ERRORS as err:
        return MetricsLog((), (str(err),), 0)


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_td_series(path: str, key: Fingerprint) -> TDSeries:
    return td_series(_cached_log(path, key).records)


def td_series_of(path: Path) -> TDSeries:
    """The TD statistics of the source's metrics log (:func:`app.td_view.td_series`), cached
    until the file changes: reading every record's logged quantiles took a third of the
    TD-EMA page's script. None logged (or no readable log): an empty series.
    """
    log = path / METRICS_FILE
    try:
        return _cached_td_series(str(log), fingerprint(log))
    except READ_ERRORS:
        return td_series(())



@st.cache_data(show_spinner=False, max_entries=32)
def _cached_damage(path: str, key: Fingerprint) -> str | None:
    del key
    try:
        summarize_checkpoint(path, verify=True)
    except READ_ERRORS as err:
        return str(err)
    return None


def row_damage(entry: BufferEntry) -> str | None:
    """Why the buffer's rows fail verification against its manifest, or None when every block
    matches. Hashes all of buffer.hdf5, once per checkpoint version (shared by sessions)."""
    return _cached_damage(str(confined(entry.path)), fingerprint(entry.path))



@st.cache_resource(show_spinner="Reading the buffer's index...", max_entries=16)
def _cached_index(path: str, key: Fingerprint) -> Any:
    del key
    return load_buffer(path, device="cpu", leaves=[])


def index_buffer(path: Path) -> Any:
    """The buffer checkpoint at ``path`` loaded index-only (``leaves=[]``: the ring position,
    the saved state and the leaves its sampler reads, such as end flags and motion ids, with
    their blocks verified), once per version and shared by sessions.

    It draws exactly the ``sample_index`` of a full load and holds no rows, so a 4.7 GB buffer
    costs the lab a few MB. Callers must not mutate it: sample with ``generator=`` (the
    buffer's own stream stays put) and apply changes to a copy.

    Raises:
        Whatever :func:`bufcore.load_buffer` raises for a damaged checkpoint (READ_ERRORS).
    """
    return _cached_index(str(confined(path)), fingerprint(path))



@st.cache_data(show_spinner="Reading one stored leaf...", max_entries=16)
def _cached_leaf(path: str, key_path: tuple[str, ...], key: Fingerprint) -> np.ndarray:
    del key
    return read_leaf(path, key_path)


def stored_leaf(path: Path, key_path: Sequence[str]) -> np.ndarray:
    """Every stored row of one leaf of the buffer checkpoint at ``path`` (physical order),
    read lazily (no other leaf is read) and cached per checkpoint version.

    Raises:
        READ_ERRORS for a damaged checkpoint; KeyPathError: no leaf at ``key_path``.
    """
    return _cached_leaf(str(confined(path)), tuple(key_path), fingerprint(path))


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_end_map(path: str, key_path: tuple[str, ...], key: Fingerprint) -> BinnedMap:
    return boundary_map(end_matrix(_cached_leaf(path, key_path, key)))



def end_map_of(path: Path, key_path: Sequence[str]) -> BinnedMap:
    """The episode-end map of the trajectory buffer at ``path`` (:func:`app.ring.boundary_map`
    of its end flags at ``key_path``), cached per checkpoint version: a Resample redraws the
    map without pooling the flags again.

    Raises:
        READ_ERRORS for a damaged checkpoint; KeyPathError: no leaf at ``key_path``.
    """
    return _cached_end_map(str(confined(path)), tuple(key_path), fingerprint(path))


def known_sources() -> list[Source]:
    """Every source under the dashboard's roots (what the sidebar's picker lists)."""
    return discover(dashboard_config())



@st.cache_data(show_spinner="Reading the buffer's priorities...", max_entries=16)
def _cached_replay_items(path: str, key: Fingerprint) -> ReplayItems:
    del key
    return replay_items(path)


def replay_items_of(path: Path) -> ReplayItems:
    """:func:`bufcore.inspect.replay_items` of the checkpoint at ``path``, cached per
    checkpoint version.

    Raises:
        READ_ERRORS for a damaged checkpoint or one without replay figures.
    """
    return _cached_replay_items(str(confined(path)), fingerprint(path))


@st.cache_data(show_spinner="Weighing every window...", max_entries=16)
def _cached_window_shares(path: str, seq_length: int, key: Fingerprint) -> WindowShares:
    return window_shares(_cached_index(path, key), seq_length)


def window_shares_of(path: Path, seq_length: int) -> WindowShares:
    """:func:`bufcore.inspect.window_shares` of the trajectory buffer checkpoint at ``path``
    (loaded index-only, as :func:`index_buffer`), cached per checkpoint version and length.

    Raises:
        READ_ERRORS for a damaged checkpoint, or a length no trajectory holds; TypeError: it
            samples windows without a PrioritizedSampler.
    """
    return _cached_window_shares(str(confined(path)), seq_length, fingerprint(path))



@st.cache_data(show_spinner="Reading the RLinf index...", max_entries=16)
def _cached_rlinf_index(path: str, key: Fingerprint) -> RLinfIndex:
    del key
    return read_rlinf_index(path)


@st.cache_data(show_spinner=False, max_entries=1024)
def _cached_rlinf_trajectory(path: str, trajectory_id: int, key: Fingerprint) -> RLinfTrajectory:
    return read_rlinf_trajectory(_cached_rlinf_index(path, key), trajectory_id)


def rlinf_index_of(path: Path) -> RLinfIndex:
    """The index of the RLinf buffer directory at ``path``, cached per directory version.

    Raises:
        READ_ERRORS: the index or metadata cannot be read.
    """
    return _cached_rlinf_index(str(confined(path)), fingerprint(path))


def rlinf_trajectories(
    index: RLinfIndex, ids: Sequence[int]
) -> tuple[list[RLinfTrajectory], list[str]]:
    """The trajectory files of ``ids`` read through the library (``weights_only``), cached
    per directory version; and one message per file that could not be read (naming it)."""
    path = str(confined(index.path))
    key = fingerprint(index.path)
    reads: list[RLinfTrajectory] = []
    errors: list[str] = []
    with st.spinner(f"Reading {len(ids):,} trajectory files..."):
        for trajectory_id in ids:
            try:
                reads.append(_cached_rlinf_trajectory(path, int(trajectory_id), key))
            except (*READ_ERRORS, KeyError) as err:
                errors.append(str(err))
    return reads, errors
