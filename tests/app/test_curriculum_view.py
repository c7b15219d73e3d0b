"""Curriculum data without Streamlit: history from the log and from run.json, ordering, the
exact sampling probability, re-prioritized priorities and saving a new checkpoint version."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app import curriculum_view
from app.curriculum_history import (
    UnmappedRecords,
    history_from_checkpoint,
    history_from_records,
    motion_order,
)
from app.curriculum_view import (
    SHOWN_DECIMALS,
    duplicate_version,
    new_priorities,
    next_version,
    per_motion,
    same_when_shown,
    sampling_probability,
    save_reprioritized,
    version_path,
)
from app.run_data import read_log
from bufcore import load_buffer
from bufcore.inspect import summarize_checkpoint
from bufcore.persist.checkpoint import write as checkpoint_write


def test_history_from_the_log_matches_the_history_saved_in_run_json(demo_run: Path) -> None:
    logged = history_from_records(read_log(demo_run / "metrics.jsonl").records)
    saved = history_from_checkpoint(demo_run / "checkpoint")
    assert logged is not None and saved is not None
    assert logged.steps.tolist() == saved.steps.tolist()
    order = np.argsort(logged.motion_ids)
    np.testing.assert_allclose(logged.emd[:, order], saved.emd)
    np.testing.assert_allclose(logged.probability.sum(axis=1), 1.0, rtol=1e-5)


def test_a_record_with_other_motions_is_skipped_with_a_message() -> None:
    good = {"kind": "eval", "step": 1, "motion_ids": [1, 2], "emd": [1.0, 2.0],
            "priority": [1.0, 3.0]}
    other = {**good, "step": 2, "motion_ids": [1, 3]}
    history = history_from_records([good, other])
    assert history is not None and history.rounds == 1
    assert len(history.problems) == 1


def per_episode_record(step: int, episodes: dict[int, int], emd: dict[int, float]
                       ) -> dict[str, object]:
    """An eval record of an expert buffer holding ``episodes[m]`` episodes of motion ``m``:
    one entry per episode, as the demo logs ``buffer.motion_ids`` (each episode gets its
    motion's EMD and priority; probability is the buffer's, per episode)."""
    ids = [m for m, n in episodes.items() for _ in range(n)]
    priority = [2.0 * emd[m] for m in ids]
    total = sum(priority)
    return {"kind": "eval", "step": step, "motion_ids": ids, "emd": [emd[m] for m in ids],
            "priority": priority, "probability": [p / total for p in priority]}


@pytest.mark.parametrize("episodes", [{7: 2, 3: 1}, {7: 3, 3: 3, 9: 2}, {4: 5}])
def test_records_with_several_episodes_per_motion_give_one_column_per_motion(
    episodes: dict[int, int],
) -> None:
    rounds = [{m: 1.0 + r + m / 10 for m in episodes} for r in range(3)]
    history = history_from_records(
        [per_episode_record(10 * r, episodes, emd) for r, emd in enumerate(rounds)]
    )
    assert history is not None and history.per_episode
    assert history.motion_ids.tolist() == list(episodes)
    assert history.steps.tolist() == [0, 10, 20]
    np.testing.assert_allclose(history.emd, [[emd[m] for m in episodes] for emd in rounds])
    np.testing.assert_allclose(history.priority, 2.0 * history.emd)
    # A motion's probability is the sum over its episodes.
    weights = np.array([n * 2.0 * rounds[-1][m] for m, n in episodes.items()])
    np.testing.assert_allclose(history.probability[-1], weights / weights.sum())
    np.testing.assert_allclose(history.probability.sum(axis=1), 1.0)


def test_one_episode_per_motion_is_not_marked_per_episode(demo_run: Path) -> None:
    history = history_from_records(read_log(demo_run / "metrics.jsonl").records)
    assert history is not None and not history.per_episode


def test_rounds_listing_episodes_in_another_order_line_up_by_motion() -> None:
    first = per_episode_record(1, {1: 2, 2: 1}, {1: 1.0, 2: 2.0})
    second = per_episode_record(2, {2: 1, 1: 2}, {1: 3.0, 2: 4.0})
    history = history_from_records([first, second])
    assert history is not None
    assert history.motion_ids.tolist() == [1, 2]
    np.testing.assert_allclose(history.emd, [[1.0, 2.0], [3.0, 4.0]])


def test_eval_records_that_cannot_be_mapped_raise_saying_why() -> None:
    broken = {"kind": "eval", "step": 5, "motion_ids": [1, 2], "emd": [1.0],
              "priority": [1.0, 1.0]}
    with pytest.raises(UnmappedRecords, match=r"1 eval records.*step 5.*do not match"):
        history_from_records([broken])


def test_a_log_without_eval_records_has_no_history() -> None:
    assert history_from_records([{"kind": "train", "step": 1}]) is None


@pytest.mark.parametrize("count", [1, 2, 5])
def test_entropy_and_effective_motions_are_maximal_for_uniform_priorities(count: int) -> None:
    record = {"kind": "eval", "step": 0, "motion_ids": list(range(count)),
              "emd": [1.0] * count, "priority": [2.0] * count}
    history = history_from_records([record])
    assert history is not None
    assert history.entropy[0] == pytest.approx(np.log(count))
    assert history.effective_motions[0] == pytest.approx(count)


def test_motions_sort_by_last_emd_highest_first_ties_by_id() -> None:
    records = [{"kind": "eval", "step": s, "motion_ids": [5, 6, 7], "emd": emd,
                "priority": [1.0, 1.0, 1.0]} for s, emd in ((0, [9.0, 0.0, 0.0]),
                                                             (1, [1.0, 2.0, 2.0]))]
    history = history_from_records(records)
    assert history is not None
    assert history.motion_ids[motion_order(history, "last EMD")].tolist() == [6, 7, 5]
    assert history.motion_ids[motion_order(history, "mean EMD")].tolist() == [5, 6, 7]


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_a_trajectory_shorter_than_the_window_is_never_sampled(weighting: str) -> None:
    p = sampling_probability(np.array([0.9, 0.1]), np.array([2, 10]), need=3,
                             weighting=weighting)
    assert p.tolist() == [0.0, 1.0]


def test_window_weighting_scales_by_the_number_of_window_starts() -> None:
    p = sampling_probability(np.array([0.5, 0.5]), np.array([3, 5]), need=3, weighting="window")
    np.testing.assert_allclose(p, [1 / 4, 3 / 4])


def test_per_motion_sums_the_trajectories_of_each_motion() -> None:
    out = per_motion(np.array([0.2, 0.3, 0.5]), np.array([4, 4, 9]), np.array([9, 4, 1]))
    np.testing.assert_allclose(out, [0.5, 0.5, 0.0])


def test_the_mode_changes_the_new_priorities() -> None:
    emd = np.array([0.5, 1.0, 1.2, 2.0])
    lin = new_priorities(emd, mode="lin", min_val=0.5, max_val=2.0, scale=2.0)
    exp = new_priorities(emd, mode="exp", min_val=0.5, max_val=2.0, scale=2.0)
    assert lin.sum() == pytest.approx(1.0) and exp.sum() == pytest.approx(1.0)
    assert not np.allclose(lin, exp)


def test_saving_twice_writes_two_versions_and_leaves_the_source_byte_identical(
    run_copy: Path,
) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    count = len(load_buffer(source).motion_ids)
    wanted = np.arange(1, count + 1, dtype=np.float64)
    first = save_reprioritized(source, run_copy, "lin", wanted)
    second = save_reprioritized(source, run_copy, "lin", wanted[::-1].copy())
    assert first != second and first.name == "expert-lin-1" and second.name == "expert-lin-2"
    np.testing.assert_allclose(load_buffer(first).priorities.numpy(), wanted / wanted.sum(),
                               rtol=1e-6)
    np.testing.assert_allclose(load_buffer(second).priorities.numpy(),
                               wanted[::-1] / wanted.sum(), rtol=1e-6)
    assert {p.name: p.read_bytes() for p in source.iterdir()} == before


def test_two_sessions_that_pick_the_same_version_both_keep_their_checkpoint(
    run_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    count = len(load_buffer(source).motion_ids)
    ours, theirs = np.arange(1.0, count + 1), np.arange(count, 0.0, -1)
    # Both sessions looked before either saved: both pick version 1.
    monkeypatch.setattr(curriculum_view, "next_version", lambda run_dir, mode: 1)
    first = save_reprioritized(source, run_copy, "exp", theirs)
    second = save_reprioritized(source, run_copy, "exp", ours)
    assert (first.name, second.name) == ("expert-exp-1", "expert-exp-2")
    np.testing.assert_allclose(load_buffer(first).priorities.numpy(), theirs / theirs.sum(),
                               rtol=1e-6)
    np.testing.assert_allclose(load_buffer(second).priorities.numpy(), ours / ours.sum(),
                               rtol=1e-6)


def test_a_version_saved_by_another_session_while_this_one_writes_is_not_replaced(
    run_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    count = len(load_buffer(source).motion_ids)
    ours, theirs = np.arange(1.0, count + 1), np.arange(count, 0.0, -1)
    write_files = checkpoint_write._write_files

    def other_session_saves_meanwhile(*args: object, **kwargs: object) -> None:
        write_files(*args, **kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(checkpoint_write, "_write_files", write_files)
        # It picked the same version (1, still free) and publishes it first.
        assert save_reprioritized(source, run_copy, "bin", theirs).name == "expert-bin-1"

    monkeypatch.setattr(checkpoint_write, "_write_files", other_session_saves_meanwhile)
    mine = save_reprioritized(source, run_copy, "bin", ours)
    assert mine.name == "expert-bin-2"
    np.testing.assert_allclose(
        load_buffer(version_path(run_copy, "bin", 1)).priorities.numpy(),
        theirs / theirs.sum(), rtol=1e-6,
    )
    np.testing.assert_allclose(load_buffer(mine).priorities.numpy(), ours / ours.sum(),
                               rtol=1e-6)


def test_the_version_picker_returns_the_smallest_free_number(run_copy: Path) -> None:
    for n in (1, 3):
        version_path(run_copy, "lin", n).mkdir(parents=True)
    assert next_version(run_copy, "lin") == 2
    assert next_version(run_copy, "exp") == 1


def test_priorities_of_the_wrong_size_are_refused_before_anything_is_written(
    run_copy: Path,
) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    with pytest.raises(ValueError, match="one per trajectory"):
        save_reprioritized(source, run_copy, "lin", np.ones(10_000))
    assert not (run_copy / "reprioritized").exists()


def test_the_motion_history_figure_refuses_an_unrecorded_motion() -> None:
    import numpy as np
    import pytest

    from app.curriculum_figures import motion_history
    from app.curriculum_history import CurriculumHistory

    history = CurriculumHistory(np.array([10]), np.array([4]), np.ones((1, 1)), np.ones((1, 1)),
                                np.ones((1, 1)), "test")
    assert "Motion 4" in motion_history(history, 4)["title"]["text"]
    with pytest.raises(ValueError, match="motion ids"):
        motion_history(history, 5)


def test_the_motion_history_probability_axis_ticks_on_its_own_values_from_zero() -> None:
    from app.curriculum_figures import motion_history
    from app.curriculum_history import CurriculumHistory

    history = CurriculumHistory(np.array([10, 20]), np.array([4]), np.ones((2, 1)),
                                np.full((2, 1), 0.05), np.ones((2, 1)), "test")
    spec = motion_history(history, 4)
    assert spec["resolve"] == {"scale": {"y": "independent"}}
    probability = spec["layer"][1]["layer"][0]["encoding"]["y"]
    assert probability["field"] == "probability"
    # No scale of its own: Vega-Lite's default starts at 0 and rounds out to readable ticks.
    assert "scale" not in probability
    assert probability["axis"]["orient"] == "right" and probability["axis"]["grid"] is False


def _held(*paths: Path) -> list[tuple[Path, str | None]]:
    return [(p, summarize_checkpoint(p).rows_digest) for p in paths]


def test_a_version_holding_the_same_rows_and_priorities_is_a_duplicate(run_copy: Path) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    count = len(load_buffer(source).motion_ids)
    wanted = np.arange(1, count + 1, dtype=np.float64)
    saved = save_reprioritized(source, run_copy, "lin", wanted)
    rows = summarize_checkpoint(source).rows_digest
    assert duplicate_version(wanted / wanted.sum(), rows, _held(source, saved)) == saved
    assert duplicate_version(wanted[::-1] / wanted.sum(), rows, _held(source, saved)) is None


def test_the_checkpoints_own_priorities_are_a_duplicate_of_the_checkpoint(
    run_copy: Path,
) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    own = load_buffer(source).priorities.double().numpy()
    rows = summarize_checkpoint(source).rows_digest
    assert duplicate_version(own, rows, _held(source)) == source


def test_the_same_priorities_over_other_rows_are_not_a_duplicate(run_copy: Path) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    own = load_buffer(source).priorities.double().numpy()
    assert duplicate_version(own, "other rows", _held(source)) is None


def test_rows_without_a_digest_are_never_called_duplicates(run_copy: Path) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    own = load_buffer(source).priorities.double().numpy()
    assert duplicate_version(own, None, [(source, None)]) is None


@pytest.mark.parametrize(("gap", "same"), [(0.0, True), (0.4, True), (0.6, False)])
def test_values_are_the_same_when_shown_within_half_a_last_decimal(gap: float,
                                                                   same: bool) -> None:
    unit = 10.0**-SHOWN_DECIMALS
    a = np.array([0.25, 0.5])
    assert same_when_shown(a, a + gap * unit) == same


def _rules(spec: dict) -> list[dict]:  # type: ignore[type-arg]
    return [one for one in spec["layer"] if one["mark"]["type"] == "rule"]


def test_the_uniform_level_is_named_in_the_legend_not_written_over_the_bars() -> None:
    from app.curriculum_figures import current_priority_bars, priority_lines
    from app.curriculum_history import CurriculumHistory

    history = CurriculumHistory(np.array([10, 20]), np.array([4, 5, 6]), np.ones((2, 3)),
                                np.full((2, 3), 1 / 3), np.ones((2, 3)), "test")
    for spec in (priority_lines(history), current_priority_bars(history, np.arange(3))):
        assert not [one for one in spec["layer"] if one["mark"]["type"] == "text"]
        (rule,) = _rules(spec)
        assert rule["data"]["values"] == [{"y": 1 / 3, "label": "uniform"}]
        assert "uniform" in rule["encoding"]["color"]["scale"]["domain"]


def test_every_series_of_the_priority_bars_has_a_name_for_the_legend() -> None:
    from app.curriculum_figures import current_priority_bars, saved_probability_bars
    from app.curriculum_history import CurriculumHistory

    history = CurriculumHistory(np.array([10, 20]), np.array([4, 5, 6]), np.ones((2, 3)),
                                np.full((2, 3), 1 / 3), np.ones((2, 3)), "test")
    specs = (current_priority_bars(history, np.arange(3)),
             saved_probability_bars(np.array([4, 5, 6]), np.full(3, 1 / 3)))
    for spec in specs:
        domain = spec["layer"][0]["encoding"]["color"]["scale"]["domain"]
        assert set(spec["datasets"]["bars"]["series"]) <= set(domain)
        assert all(domain)
