"""Which directories the dashboard may open, and what each one is.

The dashboard is started on some run directories and/or run roots (``bufcore dashboard RUN
--root DIR``); it passes them to the Streamlit process in two environment variables. Every
path the dashboard opens, whether listed at start or typed in the UI, must resolve (symbolic
links followed) inside one of the *roots*: the given roots plus each given run directory. A
typed path outside them is refused with :class:`OutsideRootsError`, so a dashboard shared on a
network never becomes a file browser for the whole machine; :func:`inside_roots` is the one
check, also applied to each part of a listed run (any of which may be a link out).

A *source* is a directory :func:`bufcore.inspect.inspect_path` understands: a run
directory, a run checkpoint, a single buffer checkpoint or a BFM-Zero work directory.
:func:`discover` finds them under the roots by looking at entry names only (nothing is read).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bufcore.inspect import source_kind

# The environment variables `python -m app` sets for the Streamlit process (os.pathsep-joined).
RUNS_ENV = "BUFCORE_DASHBOARD_RUNS"
ROOTS_ENV = "BUFCORE_DASHBOARD_ROOTS"
# How deep under a root discovery looks (root/group/run/checkpoint/buffers/name is depth 5).
MAX_DEPTH = 3
# Discovery stops after this many sources: a root pointed at a huge tree stays responsive.
MAX_SOURCES = 200


class OutsideRootsError(ValueError):
    """A path resolves outside every configured root."""


@dataclass(frozen=True)
class Source:
    """A directory the dashboard can show.

    Attributes:
        path: The resolved directory.
        kind: What :func:`~bufcore.inspect.source_kind` says it is.
        label: A short name for menus: the path relative to its root (the root's own name when
            the source is the root).
    """

    path: Path
    kind: str
    label: str


@dataclass(frozen=True)
class DashboardConfig:
    """What the dashboard was started on.

    Attributes:
        runs: Directories named at start (resolved), shown first.
        roots: Every directory a path must resolve under (the given roots and the runs).
    """

    runs: tuple[Path, ...]
    roots: tuple[Path, ...]

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> DashboardConfig:
        """The configuration `python -m app` passed in :data:`RUNS_ENV` and :data:`ROOTS_ENV`.

        With neither set, the root is ``runs/`` under the working directory when it exists,
        else the working directory itself.
        """
        env = os.environ if environ is None else environ
        runs = _paths(env.get(RUNS_ENV, ""))
        roots = _paths(env.get(ROOTS_ENV, ""))
        if not runs and not roots:
            default = Path.cwd() / "runs"
            roots = (default.resolve() if default.is_dir() else Path.cwd().resolve(),)
        return cls(runs, _unique((*roots, *runs)))

    def environment(self) -> dict[str, str]:
        """The environment variables that give this configuration to a Streamlit process."""
        return {
            RUNS_ENV: os.pathsep.join(map(str, self.runs)),
            ROOTS_ENV: os.pathsep.join(map(str, self.roots)),
        }


def _paths(text: str) -> tuple[Path, ...]:
    return _unique(Path(part).expanduser().resolve() for part in text.split(os.pathsep) if part)


def _unique(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(paths))


def resolve_under_roots(text: str | os.PathLike[str], roots: Iterable[Path]) -> Path:
    """``text`` as an absolute, resolved path, if it lies inside one of ``roots``.

    A relative path is taken relative to each root in turn (the first that exists wins, else
    the first root).

    Raises:
        ValueError: ``text`` is empty, names an unknown user's home (``~name``) or holds a
            null byte.
        OutsideRootsError: the resolved path is outside every root (names the path and roots).
    """
    roots = tuple(roots)
    typed = os.fspath(text).strip()
    try:
        raw = Path(typed).expanduser()
    except RuntimeError:  # "~name" of an unknown user, or no home directory at all
        raise ValueError(f"{typed:.200}: no such home directory") from None
    if not str(raw) or str(raw) == ".":
        raise ValueError("path: expected a directory, got an empty path")
    candidates = [raw] if raw.is_absolute() else [root / raw for root in roots]
    if "\0" in typed:
        raise ValueError(f"{typed!r:.200}: a path cannot hold a null byte")
    resolved = [candidate.resolve() for candidate in candidates]
    chosen = next((path for path in resolved if _exists(path)), resolved[0] if resolved else raw)
    return inside_roots(chosen, roots)


def inside_roots(path: Path, roots: Iterable[Path]) -> Path:
    """``path`` resolved (every symbolic link on the way followed), if it lies inside a root.

    The one check behind every path the dashboard reads or writes: a typed path, and each part
    of a listed run (its ``checkpoint/``, each buffer, ``run.json``, ``reprioritized/``), since
    any of them may be a link out of the roots.

    Raises:
        OutsideRootsError: it resolves outside every root (names where it leads and the roots).
    """
    roots = tuple(roots)
    resolved = path.resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        allowed = ", ".join(map(str, roots)) or "none configured"
        leads = "" if resolved == path else f" (it leads to {resolved})"
        raise OutsideRootsError(
            f"{path}{leads}: outside the dashboard's roots ({allowed}); start it with "
            f"`bufcore dashboard --root DIR` to open other directories"
        )
    return resolved


def _exists(path: Path) -> bool:
    # Path.exists raises for a name too long for the file system; such a path exists nowhere.
    try:
        return path.exists()
    except OSError:
        return False


def discover(config: DashboardConfig) -> list[Source]:
    """The sources named at start, then those found under each root, without duplicates.

    Only directory entries are looked at (nothing is opened). Hidden directories (a save's
    staging area) and the insides of a source are not searched.
    """
    found: dict[Path, Source] = {}
    for run in config.runs:
        kind = source_kind(run)
        if kind is not None:
            found[run] = Source(run, kind, _label(run, config.roots))
    for root in config.roots:
        for path, kind in _walk(root, 0):
            if len(found) >= MAX_SOURCES:
                return list(found.values())
            found.setdefault(path, Source(path, kind, _label(path, config.roots)))
    return list(found.values())


def _walk(directory: Path, depth: int) -> Iterable[tuple[Path, str]]:
    kind = source_kind(directory)
    if kind is not None:
        yield directory, kind
        return
    if depth >= MAX_DEPTH:
        return
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path), depth + 1)


def _label(path: Path, roots: tuple[Path, ...]) -> str:
    """``path`` relative to the innermost root holding it that is not the path itself."""
    holders = [root for root in roots if path != root and path.is_relative_to(root)]
    if not holders:
        return path.name or str(path)
    root = max(holders, key=lambda r: len(r.parts))
    return str(path.relative_to(root))
