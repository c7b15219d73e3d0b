"""RLinf's buffer directory: its file names and its two JSON files, written and parsed.

A directory (REFERENCE §9.2, DESIGN §3) holds

- ``trajectory_{id}_{model_weights_id}.pt`` (or ``.pkl``): one trajectory each;
- ``trajectory_index.json``: ``{"trajectory_index": {"<id>": entry}, "trajectory_id_list":
  [ids]}``, each entry ``{"num_samples", "trajectory_id", "max_episode_length", "shape",
  "model_weights_id"}``;
- ``metadata.json``: ``{"trajectory_format", "size", "total_samples", "trajectory_counter",
  "seed"}``.

The keys and their order are RLinf's, so each side reads the other's directories. Parsing is
strict where RLinf trusts the file: every entry is checked (types, ``num_samples`` equal to
``shape[0] * shape[1]``, the id list naming each indexed id once), and a weights id that would
make the file name a path (``/``, NUL) is refused, so an index cannot name a file outside its
directory. The counts of ``metadata.json`` are not trusted (REFERENCE §9.7 bug 10): a loader
recomputes them from the index, which is published after the files it names and after the
metadata (the index is the commit point).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bufcore.checks import check_choice
from bufcore.errors import CorruptCheckpointError, StateError
from bufcore.fields import Field
from bufcore.persist.checkpoint.format import parse_json

METADATA = "metadata.json"
INDEX = "trajectory_index.json"
Format = Literal["pt", "pkl"]
FORMATS: tuple[Format, ...] = ("pt", "pkl")
# Bounds on what a load reads of the two JSON files (an index entry takes about 130 bytes).
MAX_METADATA_BYTES = 1 << 20
MAX_INDEX_BYTES = 1 << 30
_MAX_NAME_BYTES = 255  # NAME_MAX
_MAX_AXES = 32
_FILE_NAME = re.compile(r"^trajectory_(?P<id>[0-9]+)_(?P<weights>.*)\.(?P<ext>pt|pkl)$", re.S)


def check_format(value: object, argument: str = "trajectory_format") -> Format:
    """``"pt"`` or ``"pkl"``.

    Raises:
        ValueError: anything else.
    """
    return check_choice(value, argument, FORMATS)


def trajectory_file_name(
    trajectory_id: int, model_weights_id: str, trajectory_format: Format
) -> str:
    """``trajectory_{id}_{model_weights_id}.pt`` (``.pkl`` for the pickle format).

    Raises:
        ValueError: the weights id contains ``/`` or NUL (the name would be a path), or the
            name is longer than a file name may be.
    """
    if "/" in model_weights_id or "\0" in model_weights_id:
        raise ValueError(
            f"model_weights_id: {model_weights_id!r:.80} contains '/' or NUL; it is part of a "
            "file name"
        )
    name = f"trajectory_{trajectory_id}_{model_weights_id}.{trajectory_format}"
    if len(os.fsencode(name)) > _MAX_NAME_BYTES:
        raise ValueError(
            f"model_weights_id: {model_weights_id!r:.80} makes the file name longer than "
            f"{_MAX_NAME_BYTES} bytes"
        )
    return name


def is_trajectory_file_name(name: str) -> bool:
    """Whether ``name`` is named as a trajectory file (``trajectory_<id>_<weights>.pt|pkl``)."""
    return _FILE_NAME.match(name) is not None


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One trajectory of the index (the in-memory index holds only these)."""

    trajectory_id: int
    num_samples: int
    max_episode_length: int
    shape: tuple[int, ...]
    model_weights_id: str

    def file_name(self, trajectory_format: Format) -> str:
        """Its file's name."""
        return trajectory_file_name(self.trajectory_id, self.model_weights_id, trajectory_format)

    def to_json(self) -> dict[str, object]:
        """RLinf's entry, keys in its order."""
        return {
            "num_samples": self.num_samples,
            "trajectory_id": self.trajectory_id,
            "max_episode_length": self.max_episode_length,
            "shape": list(self.shape),
            "model_weights_id": self.model_weights_id,
        }


@dataclass(frozen=True)
class Metadata:
    """``metadata.json``."""

    trajectory_format: Format
    size: int
    total_samples: int
    trajectory_counter: int
    seed: int | None

    def to_json(self) -> dict[str, object]:
        return {
            "trajectory_format": self.trajectory_format,
            "size": self.size,
            "total_samples": self.total_samples,
            "trajectory_counter": self.trajectory_counter,
            "seed": self.seed,
        }


def index_bytes(entries: Iterable[IndexEntry]) -> bytes:
    """``trajectory_index.json`` for ``entries``, in id-list order."""
    listed = list(entries)
    document = {
        "trajectory_index": {str(e.trajectory_id): e.to_json() for e in listed},
        "trajectory_id_list": [e.trajectory_id for e in listed],
    }
    return json.dumps(document).encode("utf-8")


def metadata_bytes(metadata: Metadata) -> bytes:
    """``metadata.json``."""
    return json.dumps(metadata.to_json()).encode("utf-8")


def parse_metadata(raw: bytes, path: Path) -> Metadata:
    """The metadata in ``raw`` (the content of ``path``).

    ``trajectory_format`` defaults to ``"pt"`` and ``seed`` to None when absent, as RLinf
    reads them; the counts must be ints >= 0.

    Raises:
        CorruptCheckpointError: not JSON, or a field of the wrong type or value.
    """
    document = Field(parse_json(raw, path), "metadata", part="config")
    try:
        trajectory_format = document.optional("trajectory_format", "pt").parse(check_format)
        seed_field = document.optional("seed", None)
        seed = None if seed_field.value is None else seed_field.integer(
            minimum=-(2**63), maximum=2**64 - 1
        )
        return Metadata(
            trajectory_format=trajectory_format,
            size=document.optional("size", 0).integer(minimum=0),
            total_samples=document.optional("total_samples", 0).integer(minimum=0),
            trajectory_counter=document.optional("trajectory_counter", 0).integer(minimum=0),
            seed=seed,
        )
    except StateError as err:
        raise CorruptCheckpointError(path, str(err)) from err


def parse_index(raw: bytes, path: Path, trajectory_format: Format) -> list[IndexEntry]:
    """The entries of the index in ``raw`` (the content of ``path``), in id-list order.

    Raises:
        CorruptCheckpointError: not JSON; an entry of the wrong shape (its key not its
            ``trajectory_id``, ``num_samples`` not ``shape[0] * shape[1]``, a weights id that
            makes no plain file name); the id list naming an id twice, an id with no entry,
            or leaving an entry out.
    """
    document = Field(parse_json(raw, path), "index", part="state")
    try:
        table = document.key("trajectory_index").mapping()
        listed = document.key("trajectory_id_list").items()
        entries: dict[int, IndexEntry] = {}
        for key, value in table.items():
            where = f"trajectory_index[{key!r}]"
            entry = _entry(Field(value, where, part="state"), trajectory_format)
            if key != str(entry.trajectory_id):
                raise StateError(
                    "state",
                    f"trajectory_index[{key!r}]: holds trajectory_id {entry.trajectory_id}",
                )
            entries[entry.trajectory_id] = entry
        order: list[IndexEntry] = []
        seen: set[int] = set()
        for item in listed:
            trajectory_id = item.integer(minimum=0)
            if trajectory_id in seen:
                raise item.error(f"id {trajectory_id} is listed twice")
            if trajectory_id not in entries:
                raise item.error(f"id {trajectory_id} has no entry in trajectory_index")
            seen.add(trajectory_id)
            order.append(entries[trajectory_id])
        if len(order) != len(entries):
            missing = sorted(set(entries) - seen)[:5]
            raise StateError(
                "state", f"trajectory_id_list: leaves out indexed ids such as {missing}"
            )
    except StateError as err:
        raise CorruptCheckpointError(path, str(err)) from err
    return order


def _entry(field: Field, trajectory_format: Format) -> IndexEntry:
    shape = tuple(dim.integer(minimum=0) for dim in field.key("shape").items())
    if not 2 <= len(shape) <= _MAX_AXES:
        raise field.key("shape").error(
            f"expected [T, B, ...] with 2 to {_MAX_AXES} axes, got {list(shape)}"
        )
    num_samples = field.key("num_samples").integer(minimum=1)
    if num_samples != shape[0] * shape[1]:
        raise field.key("num_samples").error(
            f"expected shape[0] * shape[1] = {shape[0] * shape[1]}, got {num_samples}"
        )
    entry = IndexEntry(
        trajectory_id=field.key("trajectory_id").integer(minimum=0),
        num_samples=num_samples,
        max_episode_length=field.optional("max_episode_length", 0).integer(),
        shape=shape,
        model_weights_id=field.optional("model_weights_id", "").text(),
    )
    try:
        entry.file_name(trajectory_format)
    except ValueError as err:  # a weights id that would make the name a path
        raise field.error(str(err)) from err
    return entry

