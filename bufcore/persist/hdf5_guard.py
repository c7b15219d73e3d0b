"""What bufcore reads from an HDF5 file (objects stored in it, nothing else) and what it names.

HDF5 can make one file read others: an *external link* names an object in another file, a
dataset with *external storage* keeps its bytes in other (any) files, a *virtual dataset* maps
regions of other files, and *object references* point anywhere. A checkpoint or episode file
from an untrusted source could use any of them to make a load read ``/etc/passwd`` into a buffer,
or hang on a FIFO. Every HDF5 object bufcore reads goes through :func:`local_members` first, which
refuses all of them (and soft links, which could loop), naming the file and the object.

A file can also make a small read allocate much: HDF5 reads a chunked dataset a whole chunk at a
time, and a resizable dataset may declare chunks longer than its rows, so 4 rows stored in one
gzip chunk declared 2**26 rows long make reading them allocate a gigabyte from a 1 MB file.
:func:`check_local_dataset` refuses a chunk larger than both the dataset's own bytes and
:data:`CHUNK_ALLOWANCE`, from the metadata, before any read.

A damaged file fails inside h5py with whatever its C library reports: ``KeyError`` ("Unable to
open object"), ``RuntimeError`` ("Link iteration failed"), ``ValueError`` (a datatype numpy
cannot represent, a name that is not UTF-8), ``TypeError`` (an unknown string encoding),
``OSError``. :func:`damage_reported` turns those into the caller's :class:`CorruptFileError`
naming the file, so damage always reads as damage.

Every file bufcore writes (a checkpoint's ``buffer.hdf5``, an episode file) names its datasets
and groups after the user's keys; :func:`check_hdf5_name` refuses a key HDF5 would read as
something else, before any file is touched.

Needed by: ``tests/fault/test_untrusted_files.py`` (no external links, external storage, virtual
datasets, references, or chunks far larger than their data) and
``tests/persist/test_hdf5_guard.py`` (damaged metadata is a ``CorruptFileError`` in every
reader).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeAlias

import h5py

from bufcore.errors import CorruptFileError

Member: TypeAlias = h5py.Group | h5py.Dataset

# How many bytes a chunk may exceed its dataset by. h5py's own chunks are at most 1 MiB; a
# resizable dataset may keep room for rows still to come, which this leaves ample space for.
CHUNK_ALLOWANCE = 16 * 2**20


# What h5py raises when what it reads is damaged (UnicodeDecodeError is a ValueError).
H5_FAILURES = (KeyError, RuntimeError, ValueError, TypeError, OverflowError, OSError)


@contextmanager
def damage_reported(path: Path, error: type[CorruptFileError] = CorruptFileError) -> Iterator[None]:
    """Report h5py's failures on damaged metadata inside the block as ``error`` naming ``path``.

    Wrap only h5py calls in it: bufcore's own errors raised inside pass through unchanged.

    Raises:
        CorruptFileError: (``error``) h5py raised one of its failures.
    """
    try:
        yield
    except CorruptFileError:
        raise
    except H5_FAILURES as err:
        raise error(path, f"damaged HDF5 metadata ({type(err).__name__}: {err})") from err


def local_members(
    group: h5py.Group, path: Path, error: type[CorruptFileError] = CorruptFileError
) -> dict[str, Member]:
    """The members of ``group``, each a group or a checked dataset stored in this file.

    Args:
        group: The group (or file) whose members to list.
        path: The file, for messages.
        error: The error type to raise (a :class:`CorruptFileError`).

    Raises:
        CorruptFileError: a member is a soft or external link, a committed datatype, or a
            dataset refused by :func:`check_local_dataset`; or the metadata is damaged.
    """
    with damage_reported(path, error):
        return _local_members(group, path, error)


def _local_members(
    group: h5py.Group, path: Path, error: type[CorruptFileError]
) -> dict[str, Member]:
    members: dict[str, Member] = {}
    for name in group:  # names only: nothing is resolved yet
        link = group.get(name, getlink=True)
        where = f"{group.name.rstrip('/')}/{name}"
        if isinstance(link, h5py.ExternalLink):
            raise error(path, f"{where} is an external link to {link.filename}; refused")
        if not isinstance(link, h5py.HardLink):
            raise error(path, f"{where} is a soft link; only objects stored here are read")
        member = group[name]
        if isinstance(member, h5py.Dataset):
            check_local_dataset(member, path, error)
        elif not isinstance(member, h5py.Group):
            raise error(path, f"{where} is a {type(member).__name__}, not a group or dataset")
        members[name] = member
    return members


def check_local_dataset(
    dataset: h5py.Dataset, path: Path, error: type[CorruptFileError] = CorruptFileError
) -> None:
    """Refuse a dataset whose bytes live in other files, that holds object references, or
    whose chunk is far larger than its data (reading it would allocate the whole chunk).

    Raises:
        CorruptFileError: a virtual dataset, external storage, a reference dtype, or a chunk
            larger than both the dataset's bytes and :data:`CHUNK_ALLOWANCE`.
    """
    if dataset.is_virtual:
        raise error(path, f"dataset {dataset.name} is a virtual dataset (data in other files)")
    if dataset.id.get_create_plist().get_external_count():
        raise error(path, f"dataset {dataset.name} keeps its data in external files; refused")
    if h5py.check_ref_dtype(dataset.dtype) is not None:
        raise error(path, f"dataset {dataset.name} holds object references, not numbers")
    if dataset.chunks is not None:
        item = dataset.dtype.itemsize
        chunk = math.prod(dataset.chunks) * item
        data = math.prod(dataset.shape) * item
        if chunk > max(data, CHUNK_ALLOWANCE):
            raise error(
                path,
                f"dataset {dataset.name} stores {dataset.shape[0] if dataset.shape else 0} rows "
                f"({data} bytes) in chunks of {list(dataset.chunks)} ({chunk} bytes); a chunk "
                f"larger than its data and than {CHUNK_ALLOWANCE} bytes is refused (reading it "
                "would allocate the whole chunk)",
            )


def check_hdf5_name(name: str, where: str) -> None:
    """Refuse a name HDF5 cannot give a dataset or group: empty, ``.``, or containing ``/``
    (HDF5 reads it as a path of groups).

    Raises:
        ValueError: such a name; the message starts with ``where``.
    """
    if name in ("", ".") or "/" in name:
        raise ValueError(
            f"{where} {name!r} cannot name an HDF5 dataset or group (empty, '.', or containing '/')"
        )
