"""Hostile input to the state idiom and the new buffer surface: malformed state dicts, odd call
sequences, hand-written samplers and priorities set by hand. Each must fail with a typed error
naming what is wrong, and leave the object as it was."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

from bufcore import (
    DictBuffer,
    StateError,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
)
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.samplers import RingPosition


def transitions(capacity: int = 7, **options: Any) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=1, **options)
    buffer.extend({"obs": torch.arange(5.0)[:, None], "nest": {"a": torch.arange(5)}})
    return buffer


def online() -> TrajectoryDictBufferMultiDim:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=7, n_dim=2, output_key_tp1=[], weighting="window", seed=2
    )
    for t in range(5):
        buffer.extend({"observation": torch.full((1, 2, 1), float(t)),
                       "done": torch.tensor([[t % 2 == 1, False]])})
    return buffer


def expert() -> TrajectoryDictBuffer:
    episodes = [
        {"observation": torch.arange(n, dtype=torch.float32)[:, None] + 10 * i,
         "motion_id": torch.full((n,), 4 + i)}
        for i, n in enumerate([4, 3])
    ]
    buffer = TrajectoryDictBuffer(episodes, output_key_tp1=[], seed=3)
    buffer.update_priorities(torch.tensor([1.0, 3.0]), torch.tensor([0, 1]))
    return buffer


def with_rows(rows: dict[Any, Any]) -> dict[str, Any]:
    """A DictBuffer state dict of 5 rows whose rows are replaced by ``rows``."""
    state = transitions().state_dict()
    return {**state, "rows": rows}


OBS = torch.arange(5.0)[:, None]
NEST_A = torch.arange(5)


# ------------------------------------------------------------------------ malformed rows
@pytest.mark.parametrize("key", [1, (), ("nest", 1), ("obs", None)])
def test_a_rows_key_that_is_not_a_key_path_is_a_state_error_naming_it(key: Any) -> None:
    with pytest.raises(StateError, match=r"state_dict\['rows'\].*non-empty tuple of str"):
        DictBuffer.from_state_dict(with_rows({key: OBS, ("nest", "a"): NEST_A}))


def test_a_leaf_named_twice_by_a_str_and_a_tuple_key_is_a_state_error() -> None:
    rows = {"obs": OBS, ("obs",): OBS + 1, ("nest", "a"): NEST_A}
    with pytest.raises(StateError, match="a second time"):
        DictBuffer.from_state_dict(with_rows(rows))


def test_a_leaf_that_is_also_the_group_of_another_is_a_state_error() -> None:
    rows = {("nest",): OBS, ("nest", "a"): NEST_A}
    with pytest.raises(StateError, match=r"leaf \['nest'\] is also a group"):
        DictBuffer.from_state_dict(with_rows(rows))


@pytest.mark.parametrize(
    ("leaf", "problem"),
    [
        (torch.zeros(5, 1, dtype=torch.complex64), "cannot be stored"),
        (torch.zeros(5, 1, dtype=torch.float8_e4m3fn), "cannot be stored"),
        (torch.zeros(5, 1).to_sparse(), "dense"),
        (torch.zeros(5, 1, device="meta"), "meta"),
    ],
    ids=["complex", "float8", "sparse", "meta"],
)
def test_rows_extend_would_refuse_are_a_state_error_naming_the_leaf(
    leaf: torch.Tensor, problem: str
) -> None:
    with pytest.raises(StateError, match=rf"rows\['obs'\].*{problem}"):
        DictBuffer.from_state_dict(with_rows({("obs",): leaf, ("nest", "a"): NEST_A}))


def test_rows_that_require_grad_are_copied_outside_autograd() -> None:
    rows = {("obs",): OBS.clone().requires_grad_(), ("nest", "a"): NEST_A}
    buffer = DictBuffer.from_state_dict(with_rows(rows))
    assert not buffer.state_dict()["rows"][("obs",)].requires_grad
    assert buffer.sample(3)["obs"].shape == (3, 1)  # a gather into rows in a graph raised


def test_non_contiguous_rows_load_with_their_values() -> None:
    strided = torch.arange(10.0).reshape(5, 2)[:, :1]
    buffer = DictBuffer.from_state_dict(with_rows({("obs",): strided, ("nest", "a"): NEST_A}))
    assert torch.equal(buffer.get_full_buffer()["obs"], strided)


@pytest.mark.parametrize(
    ("field", "value"), [("batch_dims", 2), ("batch_dims", "1"), ("nested_key_separator", ".")]
)
def test_layout_fields_that_disagree_with_the_config_are_a_state_error(
    field: str, value: Any
) -> None:
    state = {**transitions().state_dict(), field: value}
    with pytest.raises(StateError, match=rf"state_dict\['{field}'\]: expected"):
        DictBuffer.from_state_dict(state)


def test_an_online_state_dict_whose_rows_have_no_env_is_a_state_error() -> None:
    state = online().state_dict()
    state["rows"] = {("observation",): torch.zeros(5, 0, 1),
                     ("done",): torch.zeros(5, 0, dtype=torch.bool)}
    with pytest.raises(StateError, match="at least one env"):
        TrajectoryDictBufferMultiDim.from_state_dict(state)


# -------------------------------------------------------------------- malformed whole
@pytest.mark.parametrize("state", [None, [1, 2], "state"])
def test_a_state_that_is_not_a_mapping_is_a_type_error_naming_state(state: Any) -> None:
    with pytest.raises(TypeError, match="state: expected"):
        DictBuffer.from_state_dict(state)


def test_an_unknown_target_in_a_state_dict_names_the_state_dict_not_a_config_file() -> None:
    state = {**transitions().state_dict(), "target": "nowhere.Buffer"}
    with pytest.raises(ValueError, match=r"^state_dict: unknown __target__ 'nowhere.Buffer'"):
        DictBuffer.from_state_dict(state)


def test_a_capacity_beyond_any_device_is_a_state_error_before_allocating() -> None:
    state = transitions().state_dict()
    state["config"]["capacity"] = 10**15
    with pytest.raises(StateError, match="capacity"):
        DictBuffer.from_state_dict(state)


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s["config"].update(_idx=9),
        lambda s: s["rows"].update({("obs",): torch.zeros(4, 1)}),
        lambda s: s["rows"].update({("obs",): torch.zeros(5, 1, dtype=torch.complex64)}),
        lambda s: s.update(batch_dims=2),
    ],
    ids=["cursor", "row-count", "dtype", "layout"],
)
def test_a_failed_load_state_dict_leaves_the_buffer_as_it_was(
    edit: Callable[[dict[str, Any]], None]
) -> None:
    buffer = transitions(3)
    before = buffer.get_full_buffer()
    state = transitions(7).state_dict()
    state = {**state, "config": dict(state["config"]), "rows": dict(state["rows"])}
    edit(state)
    with pytest.raises(StateError):
        buffer.load_state_dict(state)
    assert (buffer.capacity, len(buffer), buffer.cursor) == (3, 3, 2)
    assert torch.equal(buffer.get_full_buffer()["obs"], before["obs"])


def test_load_state_dict_after_clear_brings_the_rows_back() -> None:
    buffer = transitions()
    state = transitions().state_dict()
    buffer.clear()
    buffer.load_state_dict({**state, "rows": {p: r.clone() for p, r in state["rows"].items()}})
    assert buffer.get_full_buffer()["obs"].flatten().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_state_dicts_run_their_checks_with_python_optimisations_on() -> None:
    code = (
        "import torch; from bufcore import DictBuffer, StateError\n"
        "b = DictBuffer(capacity=3); b.extend({'x': torch.zeros(2, 1)})\n"
        "s = b.state_dict(); s['rows'] = {1: torch.zeros(2, 1)}\n"
        "try:\n    DictBuffer.from_state_dict(s)\nexcept StateError:\n    print('refused')\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "refused"


# -------------------------------------------------------------------- with_weighting views
def test_clear_through_a_weighting_view_leaves_the_original_no_stale_trajectory() -> None:
    buffer = online()
    buffer.with_weighting("trajectory").clear()
    buffer.extend({"observation": torch.full((2, 2, 1), 100.0),
                   "done": torch.tensor([[False, False], [True, True]])})
    assert buffer.trajectories().start.tolist() == [0, 0]
    assert bool((buffer.sample(64, 2)["observation"] == 100.0).all())


def test_priorities_updated_through_a_weighting_view_leave_the_original_unchanged() -> None:
    buffer = expert()
    buffer.with_weighting("window").update_priorities(torch.tensor([0.0, 1.0]), [0, 1])
    assert buffer.priorities.tolist() == [0.25, 0.75]


# -------------------------------------------------------------------- priorities setter
@pytest.mark.parametrize(
    ("values", "error"),
    [
        ([0.25, 0.75], TypeError),
        (torch.tensor([0.25, 0.75], dtype=torch.float64), TypeError),
        (torch.tensor([1, 3]), TypeError),
        (torch.tensor([0.25, 0.25, 0.5]), ValueError),
        (torch.tensor([[0.25], [0.75]]), ValueError),
        (torch.tensor([0.25, 0.75], device="meta"), ValueError),
        (torch.tensor([float("nan"), 1.0]), ValueError),
        (torch.tensor([-0.5, 1.5]), ValueError),
        (torch.tensor([0.0, 0.0]), ValueError),
        (torch.tensor([0.7, 0.7]), ValueError),
    ],
    ids=["list", "float64", "int", "count", "2d", "device", "nan", "negative", "zeros",
         "unnormalised"],
)
def test_priorities_set_by_hand_are_checked_and_a_refused_set_changes_nothing(
    values: Any, error: type[Exception]
) -> None:
    buffer = expert()
    with pytest.raises(error, match="priorities"):
        buffer.priorities = values
    assert buffer.priorities.tolist() == [0.25, 0.75]


def test_priorities_set_back_from_a_clone_save_and_load_back() -> None:
    buffer = expert()
    previous = buffer.priorities.clone()
    buffer.update_priorities(torch.tensor([1.0, 1.0]), [0, 1])
    buffer.priorities = previous  # the Curriculum's rollback
    loaded = TrajectoryDictBuffer.from_state_dict(buffer.state_dict())
    assert loaded.priorities.tolist() == [0.25, 0.75]


# -------------------------------------------------------------------- custom samplers
class _Fixed:
    """A hand-written sampler that always answers with ``rows``."""

    def __init__(self, rows: Any, env_count: int = 1) -> None:
        self.rows = rows
        self.env_count = env_count

    def draw(
        self, ring: RingPosition, count: int, generator: torch.Generator, *, window: Any = None
    ) -> Any:
        torch.randint(2, (1,), generator=generator)  # it draws, so a refusal must undo that
        if isinstance(self.rows, torch.Tensor):
            return SampleIndex(self.rows, self.env_count)
        return self.rows


@pytest.mark.parametrize("sampler", [object(), _Fixed, "uniform"], ids=["object", "class", "str"])
def test_a_sampler_without_draw_is_refused_by_the_constructor(sampler: Any) -> None:
    with pytest.raises(TypeError, match="sampler: expected a Sampler"):
        DictBuffer(capacity=3, sampler=sampler)


@pytest.mark.parametrize(
    ("answer", "error", "match"),
    [
        (torch.tensor([5, 6]), ValueError, r"in \[0, 5\)"),  # written never: reads zeros
        (torch.tensor([0, 7]), ValueError, r"in \[0, 5\)"),
        (torch.tensor([-1, 0]), ValueError, r"in \[0, 5\)"),
        (torch.tensor([0, 1, 2]), ValueError, "expected 2 rows"),
        (torch.tensor([0.0, 1.0]), TypeError, "int64 rows"),
        ([0, 1], TypeError, "not a SampleIndex"),
    ],
    ids=["unfilled", "past-capacity", "negative", "count", "float", "list"],
)
@pytest.mark.parametrize("method", ["sample", "sample_index"])
def test_a_sampler_answer_outside_the_filled_rows_is_refused_and_the_stream_kept(
    answer: Any, error: type[Exception], match: str, method: str
) -> None:
    buffer = transitions(sampler=_Fixed(answer))
    state = buffer._generator.get_state()
    with pytest.raises(error, match=match):
        getattr(buffer, method)(2)
    assert torch.equal(buffer._generator.get_state(), state)


def test_a_sampler_answer_with_another_env_count_is_refused() -> None:
    buffer = transitions(sampler=_Fixed(torch.tensor([0, 1]), env_count=2))
    with pytest.raises(ValueError, match="env_count 1"):
        buffer.sample_index(2)


def test_load_state_dict_keeps_the_sampler_the_buffer_was_built_with() -> None:
    buffer = transitions(sampler=_Fixed(torch.tensor([4, 4])))
    buffer.load_state_dict(transitions().state_dict())
    assert buffer.sample_index(2).rows.tolist() == [4, 4]


@pytest.mark.parametrize("env_count", [0, -1])
def test_a_sample_index_needs_at_least_one_env(env_count: int) -> None:
    with pytest.raises(ValueError, match="env_count"):
        SampleIndex(torch.tensor([0]), env_count)
