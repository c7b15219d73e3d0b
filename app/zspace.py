"""The Z-buffer view's data: a seeded subset of stored z, their age and source, a 2D PCA
projection (torch only), norms, and cosine similarity to the mean z.

Only the subset's rows are read (:func:`bufcore.inspect.read_leaf`), never the
whole buffer. A slot's age is how many vectors were written after it (0: the newest), from the
ring's cursor. Sources come from ``run.json``'s ``"z_source"`` (``{"labels": [...], "slots":
[code per slot]}``, written by ``bufcore demo``); a run that did not record it has none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bufcore.inspect import RUN_STATE, read_leaf, read_run_state

Z_KEY = "z"
SOURCE_KEY = "z_source"


def subset_slots(length: int, count: int, seed: int) -> np.ndarray:
    """``min(count, length)`` distinct slots of ``[0, length)``, drawn with a seeded
    ``torch.Generator``, ascending (so rows are read in file order).

    Raises:
        ValueError: ``length`` or ``count`` negative.
    """
    if length < 0:
        raise ValueError(f"length: expected >= 0, got {length}")
    if count < 0:
        raise ValueError(f"count: expected >= 0, got {count}")
    generator = torch.Generator().manual_seed(seed)
    picked = torch.randperm(length, generator=generator)[: min(count, length)]
    return np.sort(picked.numpy()).astype(np.int64)


def read_z(path: str | os.PathLike[str], slots: np.ndarray) -> np.ndarray:
    """The stored z of ``slots`` of the z buffer checkpoint at ``path`` (float64 ``[n, dim]``).

    Raises:
        FileNotFoundError, CorruptCheckpointError, KeyPathError, IndexError: as
            :func:`bufcore.inspect.read_leaf` (a checkpoint without a ``z`` leaf
            raises KeyPathError).
    """
    rows = read_leaf(path, Z_KEY, rows=np.asarray(slots, dtype=np.int64))
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)


def slot_ages(slots: np.ndarray, cursor: int, length: int) -> np.ndarray:
    """Vectors written after each slot: ``(cursor - 1 - slot) mod length`` (0: the newest).

    Holds for a ring that has not wrapped (``cursor == length``) and one that has
    (``length == capacity``).

    Raises:
        ValueError: ``length < 1`` or a slot outside ``[0, length)``.
    """
    index = np.asarray(slots, dtype=np.int64)
    if length < 1:
        raise ValueError(f"length: expected >= 1, got {length}")
    if index.size and (index.min() < 0 or index.max() >= length):
        raise ValueError(
            f"slots: expected slots in [0, {length}), got {index.min()}..{index.max()}"
        )
    return (cursor - 1 - index) % length


@dataclass(frozen=True)
class ZSources:
    """Which kind of z each slot holds.

    Attributes:
        labels: The kinds (``("expert", "random")``).
        codes: One index into ``labels`` per stored slot.
    """

    labels: tuple[str, ...]
    codes: np.ndarray

    def names(self, slots: np.ndarray) -> np.ndarray:
        """The label of each of ``slots`` (an array of str)."""
        names: np.ndarray = np.array(self.labels, dtype=object)
        return np.asarray(names[self.codes[np.asarray(slots, dtype=np.int64)]], dtype=object)


def read_sources(checkpoint: str | os.PathLike[str], length: int) -> ZSources | None:
    """The z sources saved in the run checkpoint's run.json, or None when it has none.

    Args:
        checkpoint: The run checkpoint directory (holding run.json).
        length: Vectors the z buffer holds: the tags must cover exactly these.

    Raises:
        FileNotFoundError, CorruptCheckpointError: run.json cannot be read
            (:func:`~bufcore.inspect.read_run_state`).
        ValueError: ``z_source`` is malformed or does not tag ``length`` slots (names
            run.json and the field).
    """
    state = read_run_state(checkpoint)
    saved = state.get(SOURCE_KEY)
    if saved is None:
        return None
    return parse_sources(saved, length, where=f"{os.fspath(checkpoint)}/{RUN_STATE}")


def parse_sources(saved: Any, length: int, *, where: str = "run.json") -> ZSources:
    """``z_source`` as saved (``{"labels": [str], "slots": [int]}``), checked.

    Raises:
        ValueError: not that shape, a code that is not a label's index, or not ``length``
            slots (the message names ``where`` and the field).
    """
    field = f"{where}: {SOURCE_KEY}"
    if not isinstance(saved, dict):
        raise ValueError(f"{field}: expected an object with labels and slots, got {saved!r:.60}")
    labels, slots = saved.get("labels"), saved.get("slots")
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise ValueError(f"{field}.labels: expected a non-empty list of names, got {labels!r:.60}")
    if not isinstance(slots, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c < len(labels) for c in slots
    ):
        raise ValueError(
            f"{field}.slots: expected one label index in [0, {len(labels)}) per slot"
        )
    if len(slots) != length:
        raise ValueError(
            f"{field}.slots: tags {len(slots)} slots but the z buffer holds {length} vectors"
        )
    return ZSources(tuple(labels), np.array(slots, dtype=np.int64))


@dataclass(frozen=True)
class Projection:
    """A PCA of a set of vectors.

    Attributes:
        coords: ``[n, 2]`` coordinates on the first two components (zeros past the rank).
        explained: Fraction of the total variance along each component, descending
            (``min(n, dim)`` of them; all 0 when the vectors are identical).
    """

    coords: np.ndarray
    explained: np.ndarray


def pca_2d(z: np.ndarray) -> Projection:
    """Project ``z`` (``[n, dim]``) on its first two principal components (torch SVD).

    Each component's sign is fixed so that its largest loading is positive, so the same
    vectors always give the same picture.

    Raises:
        ValueError: ``z`` is not 2-D with at least one row, or holds a non-finite value.
    """
    data = torch.as_tensor(np.asarray(z, dtype=np.float64))
    if data.ndim != 2 or data.shape[0] < 1 or data.shape[1] < 1:
        raise ValueError(f"z: expected a [n >= 1, dim >= 1] array, got shape {tuple(data.shape)}")
    if not bool(torch.isfinite(data).all()):
        raise ValueError("z: holds NaN or infinite values")
    centered = data - data.mean(dim=0)
    u, s, vh = torch.linalg.svd(centered, full_matrices=False)
    signs = torch.sign(vh.gather(1, vh.abs().argmax(dim=1, keepdim=True))).squeeze(1)
    signs[signs == 0] = 1.0
    scores = u * s * signs
    power = s * s
    total = float(power.sum())
    explained = (power / total).numpy() if total > 0 else np.zeros(len(s))
    coords = np.zeros((data.shape[0], 2))
    if total > 0:
        kept = min(2, scores.shape[1])
        coords[:, :kept] = scores[:, :kept].numpy()
    return Projection(coords, explained)


def norms(z: np.ndarray) -> np.ndarray:
    """The Euclidean norm of each row of ``z``."""
    lengths: np.ndarray = np.linalg.norm(np.asarray(z, dtype=np.float64), axis=1)
    return lengths


def cosine_to_mean(z: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``z`` to the rows' mean (NaN for a zero row, or for
    all rows when the mean is the zero vector)."""
    data = np.asarray(z, dtype=np.float64)
    mean = data.mean(axis=0) if len(data) else np.zeros(data.shape[1:])
    lengths = norms(data) * float(np.linalg.norm(mean))
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = (data @ mean) / lengths
    cosine[lengths == 0] = np.nan
    return np.clip(cosine, -1.0, 1.0)
