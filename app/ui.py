"""Widgets and messages every page shares: the source and buffer pickers, the moment a view
shows, what a source lacks, skipped lines, lazy expanders, and the reads whose failure a page
reports (:mod:`app.loaders` does the cached reading). With :mod:`app.loaders` and
:mod:`app.main`, the only modules of app/ that import Streamlit.

State that a teammate's link should reproduce (source, buffer, seed, sizes, knobs) lives in
widgets bound to the URL's query parameters (``bind="query-params"``, the key is the
parameter's name). Streamlit keeps only the drawn widgets' parameters in the URL: a widget a
run does not draw (in a closed tab, say) leaves the link, and its value comes back from the
session, not from the link, when it is drawn again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import streamlit as st

from app import loaders
from app.curriculum_history import (
    CurriculumHistory,
    UnmappedRecords,
    history_from_checkpoint,
    history_from_records,
)
from app.moments import checkpoint_moment, disagreements, log_moment
from app.query import infinite_values
from app.ring import BinnedMap
from app.run_data import (
    READ_ERRORS,
    BufferEntry,
    SourceData,
    checkpoint_dir,
    contents,
)
from app.sources import (
    DashboardConfig,
    OutsideRootsError,
    Source,
    resolve_under_roots,
)
from app.text import literal
from app.trajectory_stats import (
    MotionLengths,
    Trajectories,
    expert_from_leaves,
    from_end_flags,
)
from bufcore.inspect import (
    METRICS_FILE,
    RLINF_DIRECTORY,
    CheckpointSummary,
    RLinfIndex,
    RLinfSummary,
    WindowSettings,
    source_kind,
    window_settings,
)

# session_state key of the re-prioritized expert priorities (Curriculum page -> Sampling lab).
REPRIORITIZED = "reprioritized"

# Query-parameter names (also the widget keys).
SOURCE_KEY = "run"
BUFFER_KEY = "buffer"
OPEN_KEY = "open_path"


def drop_unusable_query_values() -> None:
    """Remove query parameters no widget can take (see :mod:`app.query`); call before any
    widget is drawn. The free-text path and the source and buffer names are left alone."""
    params = st.query_params.to_dict()
    for key in infinite_values(params, keep=(OPEN_KEY, SOURCE_KEY, BUFFER_KEY)):
        del st.query_params[key]


def choose_source() -> Source | None:
    """The sidebar's source picker; None (with a message drawn) when there is nothing to show.

    The picked source is bound to the ``run`` query parameter. A path typed under "Open a
    path" must resolve inside the dashboard's roots.
    """
    config = loaders.dashboard_config()
    sources = loaders.known_sources()
    typed = st.sidebar.text_input(
        "Open a path",
        key=OPEN_KEY,
        bind="query-params",
        placeholder="runs/exp1 or a checkpoint directory",
        help="Any run directory, run checkpoint, buffer checkpoint, BFM-Zero work directory "
        "or RLinf buffer directory inside the dashboard's roots: "
        + ", ".join(map(str, config.roots)),
    )
    opened, refusal = _open_typed(typed, config) if typed else (None, "")
    if opened is not None:
        st.sidebar.caption("Showing the typed path; clear the box to pick from the list.")
        return opened
    if typed:
        # In the main area too: the page must not go on showing the run picked before. The
        # list's picker is still drawn below, so its choice stays in the URL.
        st.sidebar.error(refusal)
        st.error(f"Not opened: {refusal}")
        st.info("Clear **Open a path** in the sidebar to pick a run from the list again.")
    if not sources:
        if not typed:
            roots = ", ".join(map(str, config.roots))
            st.info(
                f"No runs found under {roots}. Start one with `bufcore demo --out runs/demo "
                "--live` or open a path in the sidebar."
            )
        return None
    labels = [source.label for source in sources]
    label = st.sidebar.selectbox(
        "Run or checkpoint",
        labels,
        key=SOURCE_KEY,
        bind="query-params",
        help="Everything found under the roots; the choice is kept in the page's URL.",
    )
    if typed:
        return None
    return sources[labels.index(label)] if label in labels else sources[0]


def _open_typed(typed: str, config: DashboardConfig) -> tuple[Source | None, str]:
    """The typed path as a source, or None and why it is refused (escaped for Markdown: it
    names what was typed)."""
    try:
        path = resolve_under_roots(typed, config.roots)
    except (OutsideRootsError, ValueError) as err:
        return None, literal(err)
    try:
        kind = source_kind(path)
    except OSError as err:  # e.g. a name too long for the file system
        return None, literal(f"{path!s:.300}: cannot be opened ({err.strerror})")
    if kind is None:
        return None, literal(
            f"{path}: not a run directory, run checkpoint, buffer checkpoint, BFM-Zero work "
            "directory or RLinf buffer directory"
        )
    return Source(path, kind, typed.strip()), ""


def source_data(source: Source) -> SourceData | None:
    """The source's summaries, or None with the error drawn."""
    try:
        return loaders.load_source(source.path)
    except READ_ERRORS as err:
        st.error(literal(err))
        return None


def choose_buffer(
    data: SourceData,
    *,
    kinds: Sequence[str] = (),
    label: str = "Buffer",
    accept: Callable[[CheckpointSummary], bool] | None = None,
    need: str | None = None,
) -> BufferEntry | None:
    """A picker over the source's readable buffers (optionally only the given kinds, or
    those ``accept`` takes; ``need`` says what the page needs when none fits).

    Returns:
        The chosen :class:`~app.run_data.BufferEntry` (its ``summary`` is set), or None (a
        message drawn) when none fits.
    """
    entries = [
        entry for entry in data.buffers
        if entry.summary is not None and (not kinds or entry.summary.kind in kinds)
        and (accept is None or accept(entry.summary))
    ]
    show_unusable(data, others_usable=bool(entries))
    if not entries:
        show_lack(data, need or "a " + (" or ".join(kinds) if kinds else "buffer") + " checkpoint")
        return None
    names = [entry.name for entry in entries]
    name = st.selectbox(label, names, key=BUFFER_KEY, bind="query-params")
    return entries[names.index(name)] if name in names else entries[0]


def show_unusable(data: SourceData, *, others_usable: bool) -> None:
    """Each buffer of the source that cannot be read, with the reason: a warning where the
    page has another buffer to show (``others_usable``), an error where it has none."""
    for entry in data.buffers:
        if entry.error is not None:
            (st.warning if others_usable else st.error)(
                f"Buffer `{entry.name}` is unusable: {literal(entry.error)}"
            )


def show_lack(data: SourceData, need: str) -> None:
    """Say plainly what the page (or one of its views) needs and what this source holds
    instead, rather than draw an empty chart."""
    st.info(f"This needs {need}. {contents(data)}")


def show_problems(problems: Sequence[str], *, what: str) -> None:
    """A collapsed warning listing the lines or files that were skipped."""
    if problems:
        with st.expander(f"{len(problems)} {what} skipped", expanded=False):
            for problem in problems[:50]:
                st.text(problem)
            if len(problems) > 50:
                st.text(f"... and {len(problems) - 50} more")


@contextmanager
def lazy_expander(label: str, *, key: str, expanded: bool = False) -> Iterator[bool]:
    """An expander whose contents the page draws only while it is open: yields whether it is,
    and elements made inside the ``with`` go into it.

    Opening it reruns the page (or the fragment it is in), which then draws them. A table in a
    closed plain expander still costs a fresh tab its grid: the Replay page's four cost 0.4 s
    of its first render when it drew both its parts at once (``bench.dashboard_browser``).
    ``key`` holds the open state in the session (``st.session_state[key]``), so a table stays
    open across a page's reruns.
    """
    with st.expander(label, expanded=expanded, key=key, on_change="rerun") as box:
        yield bool(box.open)


def session_priorities(buffer_path: Path) -> np.ndarray | None:
    """Priorities the Curriculum page applied to this session's copy of an expert buffer."""
    stored = st.session_state.get(REPRIORITIZED, {}).get(str(buffer_path))
    return None if stored is None else np.array(stored, dtype=np.float64)


def set_session_priorities(buffer_path: Path, priorities: np.ndarray | None) -> None:
    """Keep (or with None, drop) re-prioritized priorities for this session's copy."""
    copies = dict(st.session_state.get(REPRIORITIZED, {}))
    if priorities is None:
        copies.pop(str(buffer_path), None)
    else:
        copies[str(buffer_path)] = np.array(priorities, dtype=np.float64)
    st.session_state[REPRIORITIZED] = copies


def end_map(path: Path, key_path: Sequence[str]) -> BinnedMap | None:
    """:func:`app.loaders.end_map_of`, or None with an error on the page naming the file and
    the leaf when they cannot be read."""
    try:
        return loaders.end_map_of(path, key_path)
    except READ_ERRORS as err:
        st.error(f"{literal(path)}: cannot read the end flags {'/'.join(key_path)!r}: "
                 f"{literal(err)}")
        return None


@overload
def trajectories_of(
    entry: BufferEntry, *, expert: Literal[False]
) -> tuple[WindowSettings, Trajectories] | None: ...


@overload
def trajectories_of(
    entry: BufferEntry, *, expert: Literal[True]
) -> tuple[WindowSettings, MotionLengths] | None: ...


def trajectories_of(
    entry: BufferEntry, *, expert: bool
) -> tuple[WindowSettings, Trajectories | MotionLengths] | None:
    """A trajectory buffer's window settings and its trajectories (online: per env, from the
    end flags; expert: one per motion), read lazily; None with the reason drawn when the
    buffer is empty or unreadable."""
    summary = entry.summary
    if summary is None:
        st.error(f"{literal(entry.path)}: cannot be read: {literal(entry.error)}")
        return None
    if summary.length == 0:
        st.info(f"{literal(entry.path)}: the buffer is empty (nothing written yet).")
        return None
    try:
        settings = window_settings(loaders.confined(entry.path))
        end = loaders.stored_leaf(entry.path, settings.end_path)
        if expert:
            if settings.motion_path is None:
                st.error(f"{literal(entry.path)}: config.json names no motion_id_key")
                return None
            motion = loaders.stored_leaf(entry.path, settings.motion_path)
            return settings, expert_from_leaves(end, motion)
        return settings, from_end_flags(end, cursor=summary.cursor, full=summary.full)
    except READ_ERRORS as err:
        st.error(f"{literal(entry.path)}: cannot read its trajectories: {literal(err)}")
        return None


def show_moments(
    data: SourceData,
    records: Sequence[dict[str, Any]] | None,
    *,
    where: Any = None,
) -> None:
    """Say which moment the view shows: the checkpoint's step and time and, for a view that
    also draws the log (``records`` given, even empty), the log's last step and time, with a
    warning for each way they disagree (:func:`app.moments.disagreements`).

    Args:
        data: The source's summaries.
        records: The log's records the view draws, or None for a view of the checkpoint alone.
        where: A column or container to draw in (default: the page).
    """
    target = st if where is None else where
    checkpoint = checkpoint_moment(data)
    parts = ["**Checkpoint:** " + ("none readable" if checkpoint is None else
                                   f"{checkpoint.describe()} (`{checkpoint.where.name}`)")]
    log = None
    if records is not None:
        log = log_moment(records, data.path / METRICS_FILE)
        parts.append("**Log:** " + ("no records" if log is None else
                                    f"last record {log.last.describe()} (`{METRICS_FILE}`)"))
    target.caption(" · ".join(parts))
    for problem in disagreements(checkpoint, log):
        target.warning(problem)


def history_of(source: Source, data: SourceData) -> CurriculumHistory | None:
    """The source's curriculum history (the log's eval records, else run.json's state), or
    None when it has none; problems are listed on the page."""
    if data.has_log:
        log = loaders.load_log(source.path)
        show_problems(log.problems, what="log lines")
        try:
            history = history_from_records(log.records)
        except UnmappedRecords as err:
            st.info(f"{source.path / METRICS_FILE}: its evaluation rounds cannot be mapped to "
                    f"motions, so they are not shown ({literal(err)}).")
            history = None
        if history is not None:
            return history
    checkpoint = checkpoint_dir(source.path)
    if checkpoint is None or data.run is None:
        return None
    try:
        return history_from_checkpoint(checkpoint)
    except READ_ERRORS as err:
        st.warning(f"{literal(checkpoint)}: the curriculum state cannot be read: {literal(err)}")
        return None


# ------------------------------------------------------------------ RLinf buffer directories
# Query-parameter names (also the widget keys) of the loading buffer's options.
RLINF_WINDOW_KEY = "rl_window"
RLINF_CACHE_KEY = "rl_cache"


def is_rlinf(data: SourceData | None) -> bool:
    """Whether the source is an RLinf buffer directory."""
    return data is not None and data.kind == RLINF_DIRECTORY


def rlinf_source(data: SourceData) -> tuple[RLinfSummary, RLinfIndex, int, int] | None:
    """An RLinf directory's summary and index, and the sidebar's ``sample_window_size`` and
    ``cache_size`` (RLinf's defaults, bound to the URL) of the buffer that would load it; None,
    with the reason drawn as an error, when its index cannot be read."""
    summary = data.rlinf
    if summary is None:
        for error in data.errors:
            st.error(f"The RLinf directory cannot be read: {literal(error)}")
        return None
    try:
        index = loaders.rlinf_index_of(data.path)
    except READ_ERRORS as err:
        st.error(f"The RLinf directory cannot be read: {literal(err)}")
        return None
    st.sidebar.caption("An RLinf directory saves no window or cache size: they are options of "
                       "the buffer that loads it.")
    window = int(st.sidebar.number_input(
        "sample_window_size", min_value=0, max_value=10**9, value=summary.window_size, step=1,
        key=RLINF_WINDOW_KEY, bind="query-params",
        help="Samples come from the newest this many trajectories whose files are there "
        "(0: all). RLinf's default is 100.",
    ))
    cache = int(st.sidebar.number_input(
        "cache_size", min_value=0, max_value=10**9, value=summary.cache_size, step=1,
        key=RLINF_CACHE_KEY, bind="query-params",
        help="With auto_save the buffer keeps the newest this many trajectories in memory "
        "(without it, its whole window). RLinf's default is 5.",
    ))
    return summary, index, window, cache


def current_entry(source: Source, path: Path) -> BufferEntry | None:
    """The readable buffer at ``path`` as ``source`` holds it now (None: gone or unreadable,
    with any read error drawn). A fragment rerun calls this rather than reuse the entry of
    the page's last full run, whose summary may describe a checkpoint since replaced."""
    data = source_data(source)
    if data is None:
        return None
    return next((entry for entry in data.buffers
                 if entry.path == path and entry.summary is not None), None)
