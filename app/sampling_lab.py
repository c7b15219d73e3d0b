"""The Sampling lab's draws: real batches from bufcore's samplers, where they landed, how often
each trajectory or motion was hit against what the sampler promises, and the export.

Every draw goes through the buffer's own ``sample_index`` with a ``torch.Generator`` seeded by
the lab's seed (the buffer's stream is never touched; Resample moves on to :func:`next_seed`),
so the Python snippet from :func:`snippet`, run on the checkpoint it pins, reads exactly the
rows the lab shows. Expected
probabilities are :func:`bufcore.inspect.window_weights`, the weights the sampler draws from: with
``"trajectory"`` weighting each trajectory long enough for a window is equally likely (times its
priority); with ``"window"`` each valid window is (so a trajectory weighs its window count,
times its priority). The rows a window needs come from :func:`bufcore.inspect.window_settings`.
A buffer whose sampler is a :class:`bufcore.PrioritizedSampler` promises what that sampler's
weights say (:func:`bufcore.inspect.window_shares` for windows, ``row_weights`` for rows), and
is drawn from a copy: such a sampler anneals ``beta`` with every draw, and the cached buffer all
sessions share must stay as saved so that a link shows the same weights.
"""

from __future__ import annotations

import copy
import csv
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from app.curriculum_view import sampling_probability
from app.run_data import EXPERT, ONLINE, TRANSITIONS, ZVECTORS
from bufcore.inspect import window_counts, window_settings, window_shares

WINDOWED = (ONLINE, EXPERT)
SAMPLING_KINDS = (ONLINE, EXPERT, TRANSITIONS, ZVECTORS)
# Seeds are drawn into [0, 2**63) (torch.Generator.manual_seed takes any such int).
_SEED_SPAN = 2**63
# The largest seed the lab's seed box takes (Resample wraps past it to 0).
MAX_SEED = 2**31 - 1
# Characters of a checkpoint's digest that a link carries to pin it.
PIN_CHARS = 16
# Row bins of the frequency test for buffers without trajectories.
ROW_BINS = 50


@dataclass(frozen=True)
class LabRequest:
    """What the lab draws.

    Attributes:
        kind: The buffer's class name (one of :data:`SAMPLING_KINDS`).
        batch_size: Rows per batch (``num`` for a ZBuffer).
        seq_length: Window length (trajectory buffers), else None.
        weighting: ``"trajectory"`` or ``"window"`` (trajectory buffers), else None.
        seed: The user's seed (>= 0).

    Raises:
        ValueError: an unknown kind, a size below 1, a negative seed, or a window option on
            a buffer without windows (or missing on one with them).
    """

    kind: str
    batch_size: int
    seq_length: int | None
    weighting: str | None
    seed: int

    def __post_init__(self) -> None:
        if self.kind not in SAMPLING_KINDS:
            raise ValueError(f"kind: expected one of {SAMPLING_KINDS}, got {self.kind!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: expected >= 1, got {self.batch_size}")
        if not 0 <= self.seed < _SEED_SPAN:
            raise ValueError(f"seed: expected in [0, 2**63), got {self.seed}")
        windowed = self.kind in WINDOWED
        if windowed != (self.seq_length is not None) or windowed != (self.weighting is not None):
            raise ValueError(
                "seq_length, weighting: expected both for a trajectory buffer and neither for "
                f"{self.kind}, got {self.seq_length!r}, {self.weighting!r}"
            )
        if self.seq_length is not None and self.seq_length < 1:
            raise ValueError(f"seq_length: expected >= 1, got {self.seq_length}")

    @property
    def windowed(self) -> bool:
        """Whether the buffer samples windows of trajectories."""
        return self.kind in WINDOWED


def next_seed(seed: int) -> int:
    """The seed Resample draws with after ``seed``: the next one, 0 after :data:`MAX_SEED`.

    The seed is the only thing that changes between draws, so it is all a link needs to show
    the same batch.

    Raises:
        ValueError: ``seed`` outside ``[0, MAX_SEED]``.
    """
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed: expected in [0, {MAX_SEED}], got {seed}")
    return 0 if seed == MAX_SEED else seed + 1


def pin(digest: str | None) -> str | None:
    """The part of a checkpoint's digest a link carries to name it (None without one)."""
    return None if digest is None else digest[:PIN_CHARS]


def prepared(buffer: Any, request: LabRequest, priorities: np.ndarray | None = None) -> Any:
    """The buffer to sample from: ``buffer`` itself, a weighting view of it, or (with
    ``priorities``, expert buffers only) a deep copy carrying them. ``buffer`` is never changed.

    Raises:
        ValueError: ``priorities`` for another kind of buffer, or priorities the buffer refuses.
    """
    target = buffer
    if request.weighting is not None and request.weighting != buffer.weighting:
        target = buffer.with_weighting(request.weighting)
    if priorities is not None:
        if request.kind != EXPERT:
            raise ValueError(f"priorities: only an expert buffer has them, not {request.kind}")
        target = copy.deepcopy(target)
        values = torch.as_tensor(np.asarray(priorities, dtype=np.float64))
        target.update_priorities(values, torch.arange(len(values)))
    return target


def is_prioritized(buffer: Any) -> bool:
    """Whether ``buffer`` draws with a :class:`bufcore.PrioritizedSampler`."""
    return getattr(getattr(buffer, "sampler", None), "kind", None) == "prioritized"


def drawn_from(buffer: Any) -> Any:
    """The buffer a draw uses: a copy of a prioritized one (see the module docstring)."""
    return copy.deepcopy(buffer) if is_prioritized(buffer) else buffer


def draw_index(buffer: Any, request: LabRequest, seed: int) -> Any:
    """One batch's :class:`bufcore.SampleIndex`, drawn as ``buffer.sample`` would with a
    generator seeded with ``seed``.

    Raises:
        ValueError: what the buffer's sampler raises (empty buffer, no long enough trajectory,
            batch size not a multiple of seq_length, ...).
    """
    generator = torch.Generator().manual_seed(seed)
    buffer = drawn_from(buffer)
    if request.windowed:
        return buffer.sample_index(request.batch_size, request.seq_length, generator=generator)
    return buffer.sample_index(request.batch_size, generator=generator)


def batch_columns(buffer: Any, request: LabRequest, index: Any) -> dict[str, np.ndarray]:
    """The batch as table columns, one row per sampled row: ``row`` (flat storage row),
    ``time``, ``env``, and for trajectory buffers ``window``, ``trajectory`` (position in
    ``buffer.trajectories()``), plus ``motion_id`` and ``priority`` for expert buffers."""
    columns: dict[str, np.ndarray] = {}
    rows = index.rows.numpy()
    if request.windowed and request.seq_length is not None:
        window = np.arange(len(rows)) // request.seq_length
        columns["window"] = window
    columns["row"] = rows
    columns["time"] = index.time.numpy()
    columns["env"] = index.env.numpy()
    if request.windowed and index.trajectory is not None:
        trajectory = index.trajectory.numpy()[columns["window"]]
        columns["trajectory"] = trajectory
        if request.kind == EXPERT:
            motions = np.asarray(buffer.motion_ids, dtype=np.int64)
            columns["motion_id"] = motions[trajectory]
            columns["priority"] = buffer.priorities.double().numpy()[trajectory]
    return columns


def batch_csv(columns: dict[str, np.ndarray]) -> str:
    """The columns as CSV text (a header line, then one line per row)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(list(columns))
    writer.writerows(zip(*(c.tolist() for c in columns.values()), strict=True))
    return out.getvalue()


def expected_trajectory_probabilities(buffer: Any, request: LabRequest) -> np.ndarray:
    """The probability a window comes from each trajectory of ``buffer.trajectories()``:
    :func:`app.curriculum_view.sampling_probability`, the formula behind the Curriculum
    page's P(sampled), so the two pages promise the same frequencies.

    Raises:
        ValueError: ``request`` has no ``seq_length``, or no trajectory holds a window.
    """
    if request.seq_length is None or request.weighting is None:
        raise ValueError("request: expected a trajectory buffer's request")
    if is_prioritized(buffer):
        shares: np.ndarray = window_shares(buffer, request.seq_length).share
        return shares
    need = window_settings(buffer).need_for(request.seq_length)
    lengths = buffer.trajectories().lengths.numpy()
    priorities = (
        buffer.priorities.double().numpy() if request.kind == EXPERT
        else np.ones(len(lengths), dtype=np.float64)
    )
    probabilities = sampling_probability(
        priorities, lengths, need=need, weighting=request.weighting
    )
    if probabilities.sum() <= 0:
        raise ValueError(f"no trajectory can hold a window of {need} rows")
    return probabilities


@dataclass(frozen=True)
class ChiSquare:
    """A chi-square goodness-of-fit test after merging bins with expected count < 5.

    Attributes:
        statistic: ``sum((observed - expected)**2 / expected)`` over the merged bins.
        dof: Merged bins minus one.
        p_value: Probability of a statistic this large if the sampler is right (NaN if
            fewer than two merged bins remain).
        bins: Merged bins tested.
    """

    statistic: float
    dof: int
    p_value: float
    bins: int


def chi_square(observed: np.ndarray, probabilities: np.ndarray, *, min_expected: float = 5.0
               ) -> ChiSquare:
    """Test observed counts against probabilities (bins of probability 0 hit are a misfit).

    Bins are merged in increasing order of expected count until each merged bin expects at
    least ``min_expected`` (a leftover joins the last); p is the regularized upper incomplete
    gamma ``Q(dof / 2, statistic / 2)``.

    Raises:
        ValueError: shapes differ, no observations, or probabilities that do not sum to 1.
    """
    counts = np.asarray(observed, dtype=np.float64)
    probs = np.asarray(probabilities, dtype=np.float64)
    if counts.shape != probs.shape or counts.ndim != 1:
        raise ValueError(f"observed, probabilities: expected one 1-D shape, got {counts.shape}, "
                         f"{probs.shape}")
    total = counts.sum()
    if total <= 0:
        raise ValueError("observed: expected at least one observation")
    if not np.isclose(probs.sum(), 1.0, atol=1e-6) or (probs < 0).any():
        raise ValueError(f"probabilities: expected non-negative values summing to 1, got sum "
                         f"{probs.sum()}")
    impossible = (probs == 0) & (counts > 0)
    if impossible.any():
        return ChiSquare(np.inf, max(int((probs > 0).sum()) - 1, 1), 0.0, len(probs))
    expected = probs * total
    keep = probs > 0
    expected, counts = expected[keep], counts[keep]
    order = np.argsort(expected, kind="stable")
    merged_e: list[float] = []
    merged_o: list[float] = []
    acc_e = acc_o = 0.0
    for i in order:
        acc_e += expected[i]
        acc_o += counts[i]
        if acc_e >= min_expected:
            merged_e.append(acc_e)
            merged_o.append(acc_o)
            acc_e = acc_o = 0.0
    if acc_e > 0:
        if merged_e:
            merged_e[-1] += acc_e
            merged_o[-1] += acc_o
        else:
            merged_e.append(acc_e)
            merged_o.append(acc_o)
    e, o = np.array(merged_e), np.array(merged_o)
    statistic = float(((o - e) ** 2 / e).sum())
    dof = len(e) - 1
    if dof < 1:
        return ChiSquare(statistic, 0, float("nan"), len(e))
    p = torch.special.gammaincc(
        torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(statistic / 2, dtype=torch.float64)
    )
    return ChiSquare(statistic, dof, float(p), len(e))


@dataclass(frozen=True)
class Frequencies:
    """Draw N's result.

    Attributes:
        unit: What a bin is: ``"trajectory"``, ``"motion"`` or ``"row bin"``.
        labels: One label per bin (trajectory position, motion id, or first row of the bin).
        expected: Expected probability per bin.
        observed: Draws per bin.
        batches: Batches drawn.
        draws: Windows (or rows) drawn in all, over every batch.
        test: The chi-square test.
        coverage: Fraction of distinct valid window starts (or rows) hit at least once.
        valid: Valid window starts (or filled rows) that could be hit.
        hit: Distinct ones hit.
    """

    unit: str
    labels: np.ndarray
    expected: np.ndarray
    observed: np.ndarray
    batches: int
    draws: int
    test: ChiSquare
    coverage: float
    valid: int
    hit: int

    @property
    def units(self) -> str:
        """The plural of :attr:`unit` (``"trajectories"``, ``"motions"``, ``"row bins"``)."""
        return self.unit[:-1] + "ies" if self.unit.endswith("y") else self.unit + "s"


def draw_many(buffer: Any, request: LabRequest, seed: int, repeats: int) -> list[Any]:
    """``repeats`` batches from one generator seeded with ``seed``.

    Raises:
        ValueError: ``repeats < 1``, or what the sampler raises.
    """
    if repeats < 1:
        raise ValueError(f"repeats: expected >= 1, got {repeats}")
    generator = torch.Generator().manual_seed(seed)
    buffer = drawn_from(buffer)
    if request.windowed:
        return [
            buffer.sample_index(request.batch_size, request.seq_length, generator=generator)
            for _ in range(repeats)
        ]
    return [buffer.sample_index(request.batch_size, generator=generator) for _ in range(repeats)]


def frequencies(buffer: Any, request: LabRequest, indices: list[Any]) -> Frequencies:
    """Empirical against expected frequency of the drawn ``indices`` (from :func:`draw_many`).

    Raises:
        ValueError: no indices.
    """
    if not indices:
        raise ValueError("indices: expected at least one drawn batch")
    if not request.windowed or request.seq_length is None:
        weights = buffer.sampler.row_weights().numpy() if is_prioritized(buffer) else None
        return _row_frequencies(len(buffer), indices, weights)
    seq = request.seq_length
    trajectory = torch.cat([index.trajectory for index in indices]).numpy()
    starts = torch.cat([index.rows[::seq] for index in indices]).numpy()
    probs = expected_trajectory_probabilities(buffer, request)
    observed = np.bincount(trajectory, minlength=len(probs)).astype(np.float64)
    need = window_settings(buffer).need_for(seq)
    counts = window_counts(buffer.trajectories(), need).numpy()
    valid = int(counts[probs > 0].sum())
    hit = len(np.unique(starts))
    labels: np.ndarray = np.arange(len(probs))
    unit = "trajectory"
    if request.kind == EXPERT:
        motions = np.asarray(buffer.motion_ids, dtype=np.int64)
        labels, inverse = np.unique(motions, return_inverse=True)
        probs = np.bincount(inverse, weights=probs, minlength=len(labels)).astype(float)
        observed = np.bincount(inverse, weights=observed, minlength=len(labels)).astype(float)
        unit = "motion"
    return Frequencies(
        unit, labels, probs, observed, len(indices), len(trajectory),
        chi_square(observed, probs), hit / valid if valid else 0.0, valid, hit,
    )


def _row_frequencies(
    length: int, indices: list[Any], weights: np.ndarray | None = None
) -> Frequencies:
    """Drawn rows per equal bin of ``[0, length)`` against the bin's share: of the rows
    (uniform rows) or of the rows' ``weights`` (``[length]``, a prioritized sampler's)."""
    rows = torch.cat([index.rows for index in indices]).numpy()
    bins = min(length, ROW_BINS)
    edges = np.linspace(0, length, bins + 1).round().astype(np.int64)
    observed: np.ndarray = np.histogram(rows, bins=edges)[0].astype(np.float64)
    if weights is None:
        probs = np.diff(edges).astype(np.float64) / length
    else:
        probs = np.add.reduceat(weights, edges[:-1]) / weights.sum()
    hit = len(np.unique(rows))
    return Frequencies(
        "row bin", edges[:-1], probs, observed, len(indices), len(rows),
        chi_square(observed, probs), hit / length, length, hit,
    )


def snippet(
    path: str, request: LabRequest, seed: int, *, saved_weighting: str | None,
    priorities: np.ndarray | None = None, digest: str | None = None,
    file_stamp: str | None = None,
) -> str:
    """Python that reproduces the draw with bufcore from the checkpoint at ``path``: it
    defines ``batch`` (the sampled data) and ``rows`` (the flat storage rows it read).

    With the checkpoint's ``digest`` (:attr:`bufcore.inspect.CheckpointSummary.digest`), or
    for a checkpoint without a manifest its ``file_stamp``, the snippet first checks that
    ``path`` still holds that checkpoint and raises otherwise, so a path that a run has saved
    over since does not quietly give another batch.
    """
    if request.windowed:
        args = f"{request.batch_size}, {request.seq_length}"
    else:
        args = f"{request.batch_size}"
    lines = [
        "import torch",
        "from bufcore import load_buffer",
    ]
    # (summary field, its value, what it covers) of the checkpoint drawn from.
    pinned: tuple[str, str, str] | None = None
    if digest is not None:
        pinned = ("digest", digest, "its manifest checksum")
    elif file_stamp is not None:
        pinned = ("file_stamp", file_stamp,
                  "no manifest: its config and buffer.hdf5's size and modification time")
    if pinned is not None:
        lines.append("from bufcore.inspect import summarize_checkpoint")
    lines += ["", f"path = {path!r}"]
    if pinned is not None:
        field, value, covers = pinned
        lines += [
            f"# The checkpoint the lab drew from ({covers}):",
            f"if summarize_checkpoint(path).{field} != {value!r}:",
            "    raise RuntimeError(f'{path} now holds another checkpoint than the one the "
            "lab drew from')",
        ]
    else:
        lines.append("# Neither a manifest nor a file stamp: the path cannot be pinned.")
    lines.append("buf = load_buffer(path, device='cpu')")
    if request.weighting is not None and request.weighting != saved_weighting:
        lines.append(f"buf = buf.with_weighting({request.weighting!r})")
    if priorities is not None:
        values = ", ".join(repr(float(v)) for v in np.asarray(priorities, dtype=np.float64))
        lines += [
            "# The session's re-prioritized priorities (Curriculum page):",
            f"priorities = torch.tensor([{values}], dtype=torch.float64)",
            "buf.update_priorities(priorities, torch.arange(len(priorities)))",
        ]
    lines += [
        f"g = torch.Generator().manual_seed({seed})",
        f"batch = buf.sample({args}, generator=g)",
        "# The flat storage rows that batch read (the same draw, as an index):",
        f"rows = buf.sample_index({args}, generator=torch.Generator().manual_seed({seed})).rows",
    ]
    return "\n".join(lines) + "\n"
