"""Every exception bufcore raises on purpose, beyond Python's own ``TypeError``/``ValueError``.

- :class:`CorruptFileError`: a file bufcore reads is damaged or malformed, or asks for what
  bufcore refuses to do (read another file through a link, say); names the file.
  :class:`CorruptCheckpointError` is the one raised for a checkpoint's files.
- :class:`StateError`: saved state handed back to bufcore (a checkpoint's config or state, a
  curriculum's ``state_dict``) is malformed. It says which part (``"config"``, ``"state"`` or
  ``"rows"``) so that ``bufcore.persist`` can name the file that part came from.
- :class:`KeyPathError`: a key (path) the caller named does not exist. A plain ``KeyError``
  prints its message as a repr (``"'...'"``); this one prints the sentence as written.
- :class:`LeafNotLoadedError`: a buffer loaded with ``leaves=`` was asked to read or write a
  leaf it did not load.
- :class:`WorldSizeError`: a run checkpoint saved by one number of ranks was loaded by another;
  it names both and the reshard call.
- :class:`ResumeError` and its kinds: a run cannot be resumed (:func:`bufcore.resume`):
  :class:`NotARunError` (the directory is not a run), :class:`NoCheckpointError` (a run with no
  checkpoint yet), :class:`NewerFormatError` (a file written by a newer bufcore) and
  :class:`MissingStateError` (the checkpoint lacks a piece resuming needs).

All of them subclass the built-in type a caller would catch for that fault (``ValueError`` or
``KeyError``; ``FileNotFoundError`` for a run or checkpoint that is not there), so
``except ValueError`` keeps working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

StatePart = Literal["config", "state", "rows"]


class CorruptFileError(ValueError):
    """A file is damaged, malformed, or refused (it links to data outside itself, say).

    Attributes:
        path: The file.
        problem: What is wrong with it (the message without the label and path).
    """

    label = "corrupt file"

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.label} {self.path}: {problem}")


class CorruptCheckpointError(CorruptFileError):
    """A checkpoint file is damaged: wrong checksum or size, unreadable, or malformed."""

    label = "corrupt checkpoint file"


class StateError(ValueError):
    """Saved state is malformed: a field is missing, of the wrong type, or inconsistent.

    Attributes:
        part: Which part of the saved state is at fault: ``"config"`` (constructor fields and
            ring position), ``"state"`` (generator, priorities, history) or ``"rows"`` (the
            stored leaves).
    """

    def __init__(self, part: StatePart, problem: str) -> None:
        self.part: StatePart = part
        super().__init__(problem)


class KeyPathError(KeyError):
    """A key or key path that the caller named matches nothing."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class LeafNotLoadedError(ValueError):
    """A buffer loaded with only some of its leaves (``load_buffer(..., leaves=...)``) was asked
    to read or write one it did not load.

    Attributes:
        key_path: The leaf that was not loaded.
    """

    def __init__(self, key_path: tuple[str, ...], message: str) -> None:
        self.key_path = key_path
        super().__init__(message)


class ResumeError(Exception):
    """A run cannot be resumed; the subclasses say why (catch this for all of them)."""


class NotARunError(ResumeError, FileNotFoundError):
    """The directory given as a run is missing, not a directory, or holds neither a run log
    (``metrics.jsonl``) nor a run checkpoint."""


class NoCheckpointError(ResumeError, FileNotFoundError):
    """A run that has not published a run checkpoint yet (nothing to resume from)."""


class NewerFormatError(ResumeError, CorruptCheckpointError):
    """A checkpoint file of a format version above the one this bufcore reads (written by a
    newer bufcore): it is refused rather than half understood."""

    label = "checkpoint file from a newer bufcore"


class MissingStateError(ResumeError, ValueError):
    """A run checkpoint lacks a piece resuming needs (a rank's loop state, a buffer, the
    step...): written by a bufcore from before resuming existed, or by a loop that does not
    save it. Resuming without it would not continue the same run, so it is refused.

    Attributes:
        missing: The pieces that are missing, as the message names them.
    """

    def __init__(self, missing: list[str], problem: str) -> None:
        self.missing = list(missing)
        super().__init__(problem)


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` says an allocation failed: Python's or numpy's ``MemoryError``, torch's
    ``OutOfMemoryError``, a CPU allocator's "can't allocate", or a size too large to compute."""
    if isinstance(err, MemoryError):
        return True
    if not isinstance(err, RuntimeError):
        return False
    text = str(err).lower()
    return (
        type(err).__name__ == "OutOfMemoryError"
        or "out of memory" in text
        or "can't allocate" in text
        or "size calculation overflowed" in text
    )


class WorldSizeError(ValueError):
    """A run checkpoint saved by ``saved`` ranks was loaded by a group of ``world_size``.

    Attributes:
        path: The run checkpoint.
        saved: How many ranks saved it.
        world_size: How many ranks tried to load it.
    """

    def __init__(self, path: str | Path, saved: int, world_size: int) -> None:
        self.path, self.saved, self.world_size = Path(path), saved, world_size
        super().__init__(
            f"{self.path}: saved by {saved} rank{'s' * (saved != 1)}, loaded by {world_size}; "
            f"reshard it first: bufcore.reshard_run_checkpoint({str(self.path)!r}, "
            f"DESTINATION, world_size={world_size}), then load DESTINATION"
        )
