"""The Sampling lab's draws, frequency test and export (app/sampling_lab.py), without Streamlit."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.curriculum_view import motion_view, per_motion
from app.sampling_lab import (
    EXPERT,
    MAX_SEED,
    ONLINE,
    TRANSITIONS,
    LabRequest,
    batch_columns,
    batch_csv,
    chi_square,
    draw_index,
    draw_many,
    expected_trajectory_probabilities,
    frequencies,
    next_seed,
    prepared,
    snippet,
)
from app.trajectory_stats import expert_from_leaves
from bufcore import DictBuffer, ZBuffer, load_buffer
from bufcore.inspect import read_leaf, summarize_checkpoint, window_settings, window_shares
from tests.replay_support import prioritized_rows, prioritized_windows

BUFFERS = "checkpoint/buffers"


def _request(
    kind: str, batch: int = 16, seed: int = 3, weighting: str = "trajectory"
) -> LabRequest:
    if kind in (ONLINE, EXPERT):
        return LabRequest(kind, batch, 4, weighting, seed)
    return LabRequest(kind, batch, None, None, seed)


def _dict_buffer(capacity: int, written: int) -> DictBuffer:
    buf = DictBuffer(capacity=capacity, seed=1)
    buf.extend({"x": torch.arange(written, dtype=torch.float32)[:, None]})
    return buf


@pytest.mark.parametrize(("seed", "after"), [(0, 1), (41, 42), (MAX_SEED - 1, MAX_SEED),
                                             (MAX_SEED, 0)])
def test_resample_moves_to_the_next_seed_and_wraps_past_the_largest(seed: int,
                                                                    after: int) -> None:
    assert next_seed(seed) == after


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1])
def test_a_seed_outside_the_seed_box_has_no_next_seed(seed: int) -> None:
    with pytest.raises(ValueError, match="seed"):
        next_seed(seed)


def test_a_negative_seed_is_refused() -> None:
    with pytest.raises(ValueError, match="seed"):
        LabRequest("DictBuffer", 4, None, None, -1)


def test_window_options_on_a_buffer_without_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="seq_length"):
        LabRequest("DictBuffer", 4, 2, "window", 0)


@pytest.mark.parametrize(("capacity", "written"), [(1, 1), (2, 2), (7, 10)])
def test_a_draw_is_what_sample_reads_with_the_same_seed(capacity: int, written: int) -> None:
    buf = _dict_buffer(capacity, written)
    index = draw_index(buf, _request("DictBuffer"), 11)
    batch = buf.sample(16, generator=torch.Generator().manual_seed(11))
    assert torch.equal(batch["x"][:, 0], buf.storage["x"][index.rows, 0])


def test_drawing_leaves_the_buffer_stream_where_it_was() -> None:
    buf = _dict_buffer(7, 7)
    before = buf.sample(8, generator=None)
    buf2 = _dict_buffer(7, 7)
    draw_index(buf2, _request("DictBuffer"), 5)
    assert torch.equal(buf2.sample(8)["x"], before["x"])


def test_a_weighting_view_leaves_the_loaded_buffer_as_it_was(demo_run: Path) -> None:
    loaded = load_buffer(demo_run / BUFFERS / "train")
    view = prepared(loaded, _request(ONLINE, weighting="window"))
    assert view.weighting == "window"
    assert loaded.weighting == "trajectory"


def test_session_priorities_go_to_a_copy_of_the_expert_buffer(demo_run: Path) -> None:
    loaded = load_buffer(demo_run / BUFFERS / "expert")
    before = loaded.priorities.clone()
    priorities = np.zeros(len(before))
    priorities[0] = 1.0
    copy = prepared(loaded, _request(EXPERT), priorities)
    assert torch.equal(loaded.priorities, before)
    index = draw_index(copy, _request(EXPERT, batch=64), 0)
    assert set(index.trajectory.tolist()) == {0}


def test_expert_batch_columns_name_motion_and_priority(demo_run: Path) -> None:
    buf = load_buffer(demo_run / BUFFERS / "expert")
    request = _request(EXPERT)
    columns = batch_columns(buf, request, draw_index(buf, request, 1))
    assert list(columns) == ["window", "row", "time", "env", "trajectory", "motion_id", "priority"]
    assert len(columns["row"]) == 16
    motions = np.asarray(buf.motion_ids)
    assert np.array_equal(columns["motion_id"], motions[columns["trajectory"]])


def test_the_csv_has_a_header_and_one_line_per_row() -> None:
    text = batch_csv({"row": np.array([3, 1]), "priority": np.array([0.5, 0.25])})
    assert text == "row,priority\n3,0.5\n1,0.25\n"


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
@pytest.mark.parametrize("kind", [ONLINE, EXPERT])
def test_draws_of_a_correct_sampler_fit_the_expected_frequencies(
    demo_run: Path, kind: str, weighting: str
) -> None:
    name = "train" if kind == ONLINE else "expert"
    loaded = load_buffer(demo_run / BUFFERS / name)
    request = _request(kind, batch=64, weighting=weighting)
    buf = prepared(loaded, request)
    result = frequencies(buf, request, draw_many(buf, request, 7, 200))
    assert result.draws == 200 * 16
    assert result.test.p_value > 1e-4
    assert 0 < result.coverage <= 1
    assert np.isclose(result.expected.sum(), 1.0)


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
@pytest.mark.parametrize("seq_length", [1, 2, 7, 13])
def test_expected_frequencies_are_the_curriculum_pages_sampling_probabilities(
    demo_run: Path, weighting: str, seq_length: int
) -> None:
    # The lab (a loaded buffer) and the Curriculum page (leaves read lazily) must promise the
    # same probability per motion; seq_length 13 (14 rows with next) leaves the demo's shortest
    # motion (13 rows) unsampled.
    path = demo_run / BUFFERS / "expert"
    buf = load_buffer(path)
    request = LabRequest(EXPERT, seq_length, seq_length, weighting, 0)
    lab = expected_trajectory_probabilities(buf, request)
    settings = window_settings(path)
    motions = expert_from_leaves(read_leaf(path, settings.end_path),
                                 read_leaf(path, settings.motion_path or ()))
    ids = np.unique(motions.motion_id)
    assert settings.priorities is not None
    _, page = motion_view(settings.priorities, motions.length, motions.motion_id, ids,
                          need=settings.need_for(seq_length), weighting=weighting)
    np.testing.assert_allclose(per_motion(lab, np.asarray(buf.motion_ids), ids), page)


@pytest.mark.parametrize("length", [1, 2, 7, 100])
def test_row_frequencies_of_a_uniform_buffer_cover_every_row_bin(length: int) -> None:
    buf = ZBuffer(length, 3)
    buf.add(torch.randn(length, 3))
    request = _request("ZBuffer", batch=32)
    result = frequencies(buf, request, draw_many(buf, request, 0, 50))
    assert len(result.labels) == min(length, 50)
    assert result.observed.sum() == 32 * 50
    assert result.coverage == 1.0


def test_chi_square_rejects_draws_from_another_distribution() -> None:
    test = chi_square(np.array([900.0, 100.0]), np.array([0.5, 0.5]))
    assert test.p_value < 1e-10


def test_chi_square_merges_bins_expecting_fewer_than_five() -> None:
    probs = np.full(100, 0.01)
    test = chi_square(np.ones(100), probs)
    assert test.bins == 20
    assert test.dof == 19


def test_a_draw_in_a_bin_of_probability_zero_fails_the_test() -> None:
    assert chi_square(np.array([5.0, 1.0]), np.array([1.0, 0.0])).p_value == 0.0


@pytest.mark.parametrize(
    ("name", "kind", "weighting", "reprioritize"),
    [
        ("train", ONLINE, "trajectory", False),
        ("train", ONLINE, "window", False),
        ("expert", EXPERT, "window", True),
        ("z", "ZBuffer", None, False),
    ],
)
def test_the_snippet_reproduces_the_rows_of_the_lab(
    demo_run: Path, name: str, kind: str, weighting: str | None, reprioritize: bool
) -> None:
    path = demo_run / BUFFERS / name
    loaded = load_buffer(path)
    request = _request(kind, batch=32, weighting=weighting or "trajectory")
    priorities = None
    if reprioritize:
        priorities = np.linspace(1.0, 2.0, len(loaded.priorities))
    seed = 3
    buf = prepared(loaded, request, priorities)
    lab = batch_columns(buf, request, draw_index(buf, request, seed))
    code = snippet(str(path), request, seed, saved_weighting=getattr(loaded, "weighting", None),
                   priorities=priorities, digest=summarize_checkpoint(path).digest)
    scope: dict[str, Any] = {}
    exec(code, scope)
    assert scope["rows"].tolist() == lab["row"].tolist()
    batch = scope["batch"]
    if kind == "ZBuffer":
        return  # a z buffer exposes no row view; its rows were compared above
    # The sampled data is the stored rows at those flat rows (first output leaf).
    key = loaded.output_key_t[0]
    sampled, stored = batch[key], loaded.storage[key]
    while isinstance(sampled, dict):
        leaf = next(iter(sampled))
        sampled, stored = sampled[leaf], stored[leaf]
    rows_per_time = stored.shape[1] if kind == ONLINE else 1
    flat = stored.reshape(stored.shape[0] * rows_per_time, *stored.shape[1 + (kind == ONLINE):])
    assert torch.equal(sampled, flat[scope["rows"]])


def test_the_snippet_refuses_a_path_that_now_holds_another_checkpoint(run_copy: Path) -> None:
    path = run_copy / BUFFERS / "expert"
    request = _request(EXPERT, batch=32)
    code = snippet(str(path), request, 3, saved_weighting="trajectory",
                   digest=summarize_checkpoint(path).digest)
    exec(code, {})  # the checkpoint drawn from: it runs
    buffer = load_buffer(path)
    buffer.update_priorities(torch.linspace(1.0, 2.0, len(buffer.priorities)),
                             torch.arange(len(buffer.priorities)))
    buffer.save(path)  # a later save over the same path
    with pytest.raises(RuntimeError, match="another checkpoint"):
        exec(code, {})


def test_the_snippet_refuses_a_bfm_zero_checkpoint_rewritten_since(bfm_zero_run: Path) -> None:
    path = bfm_zero_run / "checkpoint" / "buffers" / "train"
    summary = summarize_checkpoint(path)
    assert summary.digest is None and summary.file_stamp is not None  # no manifest
    code = snippet(str(path), _request("DictBuffer"), 3, saved_weighting=None,
                   file_stamp=summary.file_stamp)
    exec(code, {})  # the checkpoint drawn from: it runs
    payload = path / "buffer.hdf5"
    stat = payload.stat()
    os.utime(payload, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # rewritten
    with pytest.raises(RuntimeError, match="another checkpoint"):
        exec(code, {})


def test_a_snippet_without_a_digest_says_it_cannot_pin_the_path() -> None:
    code = snippet("/x", _request("DictBuffer"), 3, saved_weighting=None)
    assert "cannot be pinned" in code and "summarize_checkpoint" not in code


@pytest.mark.parametrize("repeats", [1, 3])
def test_frequencies_count_batches_and_the_windows_in_them(demo_run: Path, repeats: int) -> None:
    buf = load_buffer(demo_run / BUFFERS / "train")
    request = _request(ONLINE, batch=32)  # 8 windows of 4 rows per batch
    result = frequencies(buf, request, draw_many(buf, request, 0, repeats))
    assert (result.batches, result.draws) == (repeats, repeats * 8)
    assert result.units == "trajectories"


def test_prioritized_windows_are_expected_at_the_samplers_own_trajectory_shares() -> None:
    buffer = prioritized_windows()
    request = _request(ONLINE, batch=32, seed=5, weighting="window")
    result = frequencies(buffer, request, draw_many(buffer, request, 5, 400))
    np.testing.assert_allclose(result.expected, window_shares(buffer, 4).share)
    assert result.test.p_value > 1e-3


def test_prioritized_rows_are_expected_at_the_share_of_their_weights_per_bin() -> None:
    buffer = prioritized_rows()
    request = _request(TRANSITIONS, batch=64, seed=2)
    result = frequencies(buffer, request, draw_many(buffer, request, 2, 400))
    weights = buffer.sampler.row_weights().numpy()
    edges = np.append(result.labels, len(buffer))
    expected = [weights[a:b].sum() / weights.sum() for a, b in itertools.pairwise(edges)]
    np.testing.assert_allclose(result.expected, expected)
    assert result.test.p_value > 1e-3


@pytest.mark.parametrize("build", [prioritized_rows, prioritized_windows])
def test_lab_draws_leave_a_prioritized_samplers_annealing_as_loaded(build: Any) -> None:
    buffer = build()
    windowed = isinstance(buffer, type(prioritized_windows()))
    request = _request(ONLINE if windowed else TRANSITIONS, batch=8, weighting="window")
    steps, beta = buffer.sampler.steps, buffer.sampler.beta
    first = draw_index(buffer, request, 7)
    draw_many(buffer, request, 7, 5)
    again = draw_index(buffer, request, 7)
    assert (buffer.sampler.steps, buffer.sampler.beta) == (steps, beta)
    assert torch.equal(first.rows, again.rows) and torch.equal(first.weights, again.weights)
