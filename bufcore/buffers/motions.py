"""Build the expert buffer from a list of episode files (REFERENCE §5, BFM-Zero's ``load_data``).

:func:`load_expert_trajectories` reads a ``.txt`` list of episode-based HDF5 files
(:func:`bufcore.persist.episodes.read_motion_list`), reads every episode of every file
(:func:`bufcore.persist.episodes.load_episode_based_h5`), casts the observation to float32,
optionally maps it, and lays all episodes end to end in one
:class:`~bufcore.buffers.expert.TrajectoryDictBuffer`.

Differences from the reference: an empty list, an episode without ``observation`` or
``motion_id``, a string leaf other than ``file_name``, or episodes whose keys differ across files
raise an error naming the file and the episode (the reference fails later with a bare
``KeyError`` or builds misaligned columns); ``file_name`` is dropped when present instead of
being required. The buffer's ``file_names`` (which BFM-Zero sets only in its simulator loader)
name the file each trajectory was read from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from bufcore.buffers.episode_rows import EpisodeRows
from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.windowed import DEFAULT_END_KEY
from bufcore.persist.episodes import EPISODE_PREFIX, load_episode_based_h5, read_motion_list
from bufcore.tree import check_cast, flatten, format_key_path, to_tensor, unflatten

OBSERVATION = "observation"
MOTION_ID = "motion_id"
FILE_NAME = "file_name"

ObsMapper = Callable[[Any], Any]


def load_expert_trajectories(
    motions: str | os.PathLike[str],
    motions_root: str | os.PathLike[str],
    seq_length: int,
    device: str | torch.device,
    obs_dict_mapper: ObsMapper | None = None,
    *,
    seed: int | None = None,
) -> TrajectoryDictBuffer:
    """Read the listed episode files into one read-only expert buffer.

    Every listed file is read in list order, its episodes in ``ep_0, ep_1, ...`` order; each
    episode becomes one trajectory (``motion_ids[i]`` is the ``motion_id`` of its first row).
    Every observation leaf is cast to float32; then ``obs_dict_mapper``, if given, replaces the
    observation with ``obs_dict_mapper(observation)`` (e.g. splitting a flat array into
    ``{"state": ..., "privileged_state": ...}``). A string ``file_name`` dataset is dropped;
    ``file_names[i]`` is the file trajectory ``i`` was read from instead (its resolved path as
    a str, as humenv's ``file_name``), so several trajectories of one file share a name.

    Args:
        motions: The ``.txt`` list: one file per line, ``#`` comments and blank lines skipped,
            spaces removed, relative paths taken relative to ``motions_root``.
        motions_root: Directory the relative entries are relative to.
        seq_length: Default window length of the buffer.
        device: Where the buffer's rows live.
        obs_dict_mapper: Optional function applied to each episode's (float32) observation.
        seed: Seed of the buffer's generator (bufcore's addition; ``None``, the default, gives
            a nondeterministic one as before).

    Returns:
        A :class:`~bufcore.buffers.expert.TrajectoryDictBuffer` with the default end and motion-id
        keys (``"done"`` is added True on each episode's last row; ``"motion_id"``) and
        ``file_names`` set.

    Raises:
        FileNotFoundError: The list or a listed file does not exist (naming the list line).
        ValueError: The list names no file or its files hold no episode; an episode lacks
            ``observation`` or ``motion_id``; episodes' keys differ (naming both files and
            episodes); or a file is malformed (see
            :func:`~bufcore.persist.episodes.load_episode_based_h5`).
        TypeError: An episode holds a string leaf other than ``file_name``, or a leaf the
            buffer cannot store (naming the file and episode).
    """
    files = read_motion_list(motions, motions_root)
    if not files:
        raise ValueError(f"{motions}: the motion list names no file")
    episodes: list[dict[str, Any]] = []
    names: list[str] = []
    sources: list[str] = []
    for file in files:
        for index, raw in enumerate(load_episode_based_h5(file)):
            name = f"{file}: {EPISODE_PREFIX}{index}"
            episodes.append(_prepare(raw, name, obs_dict_mapper))
            names.append(name)
            sources.append(str(file))
    if not episodes:
        raise ValueError(f"{motions}: the listed files hold no episode")
    # Laid out here so that every error names the file and episode it is about.
    rows = EpisodeRows(
        episodes, end_path=(DEFAULT_END_KEY,), motion_path=(MOTION_ID,), names=names
    )
    buffer = TrajectoryDictBuffer(rows, seq_length=seq_length, device=device, seed=seed)
    # Episodes end trajectories, so each trajectory lies in the episode of its first row.
    ends = torch.tensor(rows.lengths).cumsum(0)
    episode = torch.searchsorted(ends, buffer.start_idx[:, 0].cpu(), right=True)
    buffer.file_names = [sources[i] for i in episode.tolist()]
    return buffer


def _prepare(raw: Mapping[str, Any], where: str, mapper: ObsMapper | None) -> dict[str, Any]:
    """One episode as the buffer takes it: float32 observation, mapped, no ``file_name``.

    Raises:
        ValueError: ``observation`` or ``motion_id`` is missing.
        TypeError: a string leaf other than ``file_name``.
    """
    episode = {key: value for key, value in raw.items() if key != FILE_NAME}
    for key in (OBSERVATION, MOTION_ID):
        if key not in episode:
            raise ValueError(f"{where}: missing {key!r}; the episode holds {sorted(raw)}")
    for path, leaf in flatten(episode, argument=where).items():
        if isinstance(leaf, str) or (isinstance(leaf, np.ndarray) and leaf.dtype.kind in "USO"):
            raise TypeError(
                f"{where}{format_key_path(path)}: a string dataset cannot be stored in the "
                "expert buffer"
            )
    observation = _as_float32(episode[OBSERVATION], where)
    episode[OBSERVATION] = observation if mapper is None else mapper(observation)
    return episode


def _as_float32(observation: Any, where: str) -> Any:
    """The observation (an array or a nested dict of arrays) with every leaf cast to float32.

    Raises:
        TypeError: a leaf is not numeric.
        ValueError: a leaf holds finite values beyond float32's range (they would become inf).
    """
    argument = f"{where}[{OBSERVATION!r}]"
    if isinstance(observation, Mapping):
        flat = flatten(observation, argument=argument)
        return unflatten(
            {p: _leaf_as_float32(v, f"{argument}{format_key_path(p)}") for p, v in flat.items()}
        )
    return _leaf_as_float32(observation, argument)


def _leaf_as_float32(leaf: Any, where: str) -> np.ndarray[Any, Any]:
    tensor = to_tensor(leaf, where)
    check_cast(tensor, torch.float32, where=where)
    return np.asarray(tensor.detach().cpu().numpy(), dtype=np.float32)
