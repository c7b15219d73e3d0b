"""What bufcore agrees to read from an HDF5 file: objects stored in that file, nothing else.

HDF5 can make one file read others: an *external link* names an object in another file, a
dataset with *external storage* keeps its bytes in other (any) files, a *virtual dataset* maps
regions of other files, and *object references* point anywhere. A checkpoint or episode file
from an untrusted source could use any of them to make a load read ``/etc/passwd`` into a buffer,
or hang on a FIFO. Every HDF5 object bufcore reads goes through :func:`local_members` first, which
refuses all of them (and soft links, which could loop), naming the file and the object.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

import h5py

from bufcore.errors import CorruptFileError

Member: TypeAlias = h5py.Group | h5py.Dataset


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
            dataset refused by :func:`check_local_dataset`.
    """
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
    """Refuse a dataset whose bytes live in other files, or that holds object references.

    Raises:
        CorruptFileError: a virtual dataset, external storage, or a reference dtype.
    """
    if dataset.is_virtual:
        raise error(path, f"dataset {dataset.name} is a virtual dataset (data in other files)")
    if dataset.id.get_create_plist().get_external_count():
        raise error(path, f"dataset {dataset.name} keeps its data in external files; refused")
    if h5py.check_ref_dtype(dataset.dtype) is not None:
        raise error(path, f"dataset {dataset.name} holds object references, not numbers")
