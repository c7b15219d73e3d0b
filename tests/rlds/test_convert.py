"""RLDS -> transitions (REFERENCE §10.2-10.3, DESIGN §2 decision 9): the reference's worked
examples, its error messages, and bufcore's stricter checks, all raised before a transition is
yielded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import (
    convert_rlds_to_trajectories,
    create_trajectory_data_spec,
    get_rlds_step_features,
)
from bufcore.tree import LeafSpec
from tests.rlds.episodes import complete, episode, single, stacked, stepwise, truncated

FORMS = [
    pytest.param({"form": "stacked"}, id="stacked-numpy"),
    pytest.param({"form": "stacked", "torch_leaves": True}, id="stacked-torch"),
    pytest.param({"form": "steps"}, id="steps-numpy"),
    pytest.param({"form": "steps", "torch_leaves": True}, id="steps-torch"),
]


def as_tuples(rlds_data: Any) -> list[tuple[Any, ...]]:
    """Transitions as the reference's tests write them: (step_type, obs, action, policy_info,
    next_step_type, reward, discount)."""
    return [
        (
            t["step_type"].item(),
            t["observation"].tolist(),
            t["action"].tolist(),
            t["policy_info"].tolist() if "policy_info" in t else (),
            t["next_step_type"].item(),
            t["reward"].item(),
            t["discount"].item(),
        )
        for t in convert_rlds_to_trajectories(rlds_data)
    ]


COMPLETE = [
    (0, [1.0, 2.0], [11.0], (), 1, 1.0, 1.0),
    (1, [3.0, 4.0], [21.0], (), 2, 2.0, 1.0),
    (2, [5.0, 6.0], [31.0], (), 0, 3.0, 0.0),
]
TRUNCATED = [*COMPLETE[:2], (2, [5.0, 6.0], [31.0], (), 0, 3.0, 1.0)]
SINGLE = [(2, [1.0, 2.0], [11.0], (), 2, 1.0, 1.0)]


def test_the_step_features_are_the_references_seven_in_its_order() -> None:
    assert get_rlds_step_features() == [
        "observation", "action", "reward", "discount", "is_first", "is_last", "is_terminal",
    ]


@pytest.mark.parametrize("options", FORMS)
def test_a_complete_episode_ends_with_discount_zero_and_next_step_first(
    options: dict[str, Any],
) -> None:
    assert as_tuples([complete(**options)]) == COMPLETE


@pytest.mark.parametrize("options", FORMS)
def test_a_truncated_episode_keeps_its_last_discount(options: dict[str, Any]) -> None:
    assert as_tuples([truncated(**options)]) == TRUNCATED


@pytest.mark.parametrize("options", FORMS)
def test_a_single_step_episode_is_last_then_last(options: dict[str, Any]) -> None:
    assert as_tuples([single(**options)]) == SINGLE


@pytest.mark.parametrize("options", FORMS)
def test_several_episodes_concatenate_their_transitions(options: dict[str, Any]) -> None:
    data = [complete(**options), single(**options), truncated(**options)]
    assert as_tuples(data) == [*COMPLETE, *SINGLE, *TRUNCATED]


def test_a_terminal_single_step_episode_has_discount_zero() -> None:
    assert as_tuples([episode([True], [True], [True])]) == [
        (2, [1.0, 2.0], [11.0], (), 2, 1.0, 0.0)
    ]


def test_the_dtypes_are_int32_step_types_and_the_data_own() -> None:
    transition = next(convert_rlds_to_trajectories([complete()]))
    assert transition["step_type"].dtype == transition["next_step_type"].dtype == torch.int32
    assert transition["observation"].dtype == torch.float32
    assert list(transition) == [
        "step_type", "observation", "action", "next_step_type", "reward", "discount",
    ]


def test_the_spec_of_the_references_test_data_is_its_trajectory_spec() -> None:
    scalar_int, scalar_float = LeafSpec((), torch.int32), LeafSpec((), torch.float32)
    assert create_trajectory_data_spec([complete(), single()]) == {
        ("step_type",): scalar_int,
        ("observation",): LeafSpec((2,), torch.float32),
        ("action",): LeafSpec((1,), torch.float32),
        ("next_step_type",): scalar_int,
        ("reward",): scalar_float,
        ("discount",): scalar_float,
    }


def test_the_spec_does_not_check_the_steps_sequence_as_the_reference() -> None:
    bad = episode([False, False], [False, True], [False, False])
    assert create_trajectory_data_spec([bad])[("observation",)] == LeafSpec((2,), torch.float32)


def test_the_spec_of_data_without_any_step_is_refused() -> None:
    with pytest.raises(ValueError, match="no episode holds a step"):
        create_trajectory_data_spec([{"steps": []}])


def test_nested_observations_keep_their_structure() -> None:
    steps = stacked([True, False], [False, True], [False, True])
    steps["observation"] = {"state": np.zeros((2, 3), np.float32),
                            "camera": {"depth": torch.ones(2, 4, 4, dtype=torch.float16)}}
    transitions = list(convert_rlds_to_trajectories([{"steps": steps}]))
    assert transitions[0]["observation"]["camera"]["depth"].shape == (4, 4)
    spec = create_trajectory_data_spec([{"steps": steps}])
    assert spec[("observation", "camera", "depth")] == LeafSpec((4, 4), torch.float16)
    assert spec[("observation", "state")] == LeafSpec((3,), torch.float32)


def test_extra_step_features_and_episode_keys_are_left_alone() -> None:
    steps = stacked([True], [True], [False])
    steps["language_instruction"] = ["not a number"]
    data = [{"steps": steps, "episode_metadata": {"file": "x.h5"}}]
    assert as_tuples(data) == SINGLE


def test_a_generator_of_episodes_is_read_once() -> None:
    def episodes() -> Iterator[dict[str, Any]]:
        yield complete()
        yield single()

    assert as_tuples(episodes()) == [*COMPLETE, *SINGLE]


def test_data_without_steps_gives_no_transition() -> None:
    assert as_tuples([]) == []
    assert as_tuples([{"steps": []}, {"steps": []}]) == []


def test_an_empty_episode_between_others_changes_nothing() -> None:
    assert as_tuples([complete(), {"steps": []}, single()]) == [*COMPLETE, *SINGLE]


def test_integer_flags_zero_and_one_read_as_bools() -> None:
    steps = stacked([True, False, False], [False, False, True], [False, False, True])
    for name in ("is_first", "is_last", "is_terminal"):
        steps[name] = steps[name].astype(np.int64)
    assert as_tuples([{"steps": steps}]) == COMPLETE


def test_float64_leaves_of_a_later_episode_are_cast_to_the_first_episodes_float32() -> None:
    later = stacked([True], [True], [False])
    later["observation"] = later["observation"].astype(np.float64)
    transitions = list(convert_rlds_to_trajectories([complete(), {"steps": later}]))
    assert transitions[-1]["observation"].dtype == torch.float32


def test_python_numbers_in_step_dicts_are_read() -> None:
    steps = [{"observation": [0.5, 1.5], "action": 1, "reward": 2.0, "discount": 1.0,
              "is_first": True, "is_last": True, "is_terminal": False}]
    (transition,) = convert_rlds_to_trajectories([{"steps": steps}])
    assert transition["action"].item() == 1 and transition["step_type"].item() == 2


def test_policy_info_fn_sees_each_step_and_the_next_one_padded_after_the_last() -> None:
    seen: list[tuple[list[float], bool, list[float]]] = []

    def policy_info(step: dict[str, Any], following: dict[str, Any]) -> Any:
        seen.append((step["observation"].tolist(), bool(following["is_first"]),
                     following["observation"].tolist()))
        return {"log_prob": step["reward"] * 10}

    transitions = list(convert_rlds_to_trajectories([complete()], policy_info))
    assert seen == [
        ([1.0, 2.0], False, [3.0, 4.0]),
        ([3.0, 4.0], False, [5.0, 6.0]),
        ([5.0, 6.0], True, [0.0, 0.0]),  # the padding: zeros, is_first
    ]
    assert [t["policy_info"]["log_prob"].item() for t in transitions] == [10.0, 20.0, 30.0]
    assert list(transitions[0])[3] == "policy_info"


@pytest.mark.parametrize("empty", [None, (), {}])
def test_a_policy_info_fn_returning_nothing_gives_no_policy_info(empty: Any) -> None:
    transitions = list(convert_rlds_to_trajectories([complete()], lambda s, n: empty))
    assert "policy_info" not in transitions[0]


def test_a_policy_info_missing_for_some_steps_only_is_refused() -> None:
    def policy_info(step: dict[str, Any], following: dict[str, Any]) -> Any:
        return None if bool(following["is_first"]) else step["reward"]

    with pytest.raises(ValueError, match=r"returned nothing, but a policy info for an earlier"):
        convert_rlds_to_trajectories([complete()], policy_info)


def test_policy_infos_of_different_shapes_are_refused() -> None:
    def policy_info(step: dict[str, Any], following: dict[str, Any]) -> Any:
        return torch.zeros(int(step["reward"]))

    with pytest.raises(ValueError, match=r"\['steps'\]\[1\]: returned"):
        convert_rlds_to_trajectories([complete()], policy_info)


# --------------------------------------------------------------------------------- errors
def test_an_episode_without_steps_gets_the_references_message() -> None:
    with pytest.raises(
        ValueError, match=r"^No dataset representing RLDS steps exist in the data\. "
        r"\(rlds_data\[1\] holds \['random'\]\)$"
    ):
        convert_rlds_to_trajectories([complete(), {"random": True}])


def test_a_step_missing_a_feature_gets_the_references_message() -> None:
    steps = {"random1": [True, True], "random2": [False, False]}
    expected = (
        "Invalid RLDS step spec. Features expected are ['observation', 'action', 'reward', "
        "'discount', 'is_first', 'is_last', 'is_terminal'], but found ['random1', 'random2'] "
        "(rlds_data[0]['steps'])"
    )
    with pytest.raises(ValueError) as caught:
        convert_rlds_to_trajectories([{"steps": steps}])
    assert str(caught.value) == expected


def test_a_step_dict_missing_a_feature_names_the_step() -> None:
    steps = stepwise(stacked([True, False], [False, True], [False, False]))
    del steps[1]["discount"]
    where = r"\(rlds_data\[0\]\['steps'\]\[1\]\)"
    with pytest.raises(ValueError, match=f"Invalid RLDS step spec.*{where}"):
        convert_rlds_to_trajectories([{"steps": steps}])


SEQUENCE_ERRORS = [
    pytest.param(
        [True, False, False], [False, False, True], [False, True, True],
        r"Terminal step must be the last step of an episode\. \(rlds_data\[0\]\['steps'\]\[1\]\)",
        id="terminal-not-last",
    ),
    pytest.param(
        [True, False, False], [False, False, False], [False, False, False],
        r"Mid step should not be followed by a first step\. \(rlds_data\[0\]\['steps'\]\[2\]\)",
        id="mid-then-end-of-data",
    ),
    pytest.param(
        [True, False, True], [False, False, True], [False, False, False],
        r"Mid step should not be followed by a first step\. \(rlds_data\[0\]\['steps'\]\[1\]\)",
        id="mid-then-first",
    ),
    pytest.param(
        [True, False, False], [False, True, True], [False, False, False],
        r"Last step of an episode must be followed by a first step\. "
        r"\(rlds_data\[0\]\['steps'\]\[1\]\)",
        id="last-then-mid",
    ),
    # DESIGN §2 decision 9: checks the reference lacks.
    pytest.param(
        [False, False, False], [False, False, True], [False, False, True],
        r"The first step of an episode must be a first step\. \(rlds_data\[0\]\['steps'\]\[0\]\)",
        id="first-step-not-first",
    ),
    pytest.param(
        [True, True, False], [False, False, True], [False, False, True],
        r"A first step that is not last should not be followed by a first step\. "
        r"\(rlds_data\[0\]\['steps'\]\[0\]\)",
        id="first-not-last-then-first",
    ),
    pytest.param(
        [True], [False], [False],
        r"A first step that is not last should not be followed by a first step\. "
        r"\(rlds_data\[0\]\['steps'\]\[0\]\)",
        id="first-not-last-then-end-of-data",
    ),
]


@pytest.mark.parametrize(("first", "last", "terminal", "message"), SEQUENCE_ERRORS)
def test_a_bad_sequence_raises_at_the_call_naming_the_step(
    first: list[bool], last: list[bool], terminal: list[bool], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        convert_rlds_to_trajectories([episode(first, last, terminal)])


def test_a_bad_episode_after_good_ones_raises_before_any_transition_is_yielded() -> None:
    bad = episode([True, False], [False, False], [False, False])
    with pytest.raises(ValueError, match=r"Mid step .* \(rlds_data\[2\]\['steps'\]\[1\]\)"):
        convert_rlds_to_trajectories([complete(), single(), bad])


def test_an_episode_continuing_the_previous_one_is_refused() -> None:
    head = episode([True, False], [False, False], [False, False])
    tail = episode([False], [True], [False])
    with pytest.raises(ValueError, match=r"The first step of an episode .*rlds_data\[1\]"):
        convert_rlds_to_trajectories([head, tail])


def test_stacked_features_of_different_lengths_are_refused() -> None:
    steps = stacked([True, False], [False, True], [False, False])
    steps["reward"] = steps["reward"][:1]
    with pytest.raises(ValueError, match=r"every feature needs one row per step, got .*"
                       r"\['reward'\]: 1"):
        convert_rlds_to_trajectories([{"steps": steps}])


def test_a_later_episode_with_another_observation_shape_is_refused() -> None:
    later = stacked([True], [True], [False])
    later["observation"] = np.zeros((1, 3), np.float32)
    with pytest.raises(ValueError, match=r"rlds_data\[1\]\['steps'\]\['observation'\]: "
                       r"expected \[2\] per step"):
        convert_rlds_to_trajectories([complete(), {"steps": later}])


def test_a_later_episode_with_other_observation_keys_is_refused() -> None:
    later = stacked([True], [True], [False])
    later["observation"] = {"state": later["observation"]}
    with pytest.raises(ValueError, match=r"keys differ from the first episode's \(missing: "
                       r"\['observation'\]; unexpected: \['observation'\]\['state'\]\)"):
        convert_rlds_to_trajectories([complete(), {"steps": later}])


def test_a_step_with_another_shape_than_the_first_step_is_refused() -> None:
    steps = stepwise(stacked([True, False], [False, True], [False, False]))
    steps[1]["action"] = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match=r"\['steps'\]\[1\]\['action'\]: expected shape \[1\]"):
        convert_rlds_to_trajectories([{"steps": steps}])


def test_float_rewards_after_integer_ones_are_refused() -> None:
    later = stacked([True], [True], [False])
    first = stacked([True], [True], [False])
    first["reward"] = np.array([1], dtype=np.int64)
    with pytest.raises(TypeError, match="cannot be cast safely"):
        convert_rlds_to_trajectories([{"steps": first}, {"steps": later}])


@pytest.mark.parametrize(
    ("flags", "error", "message"),
    [
        (np.array([2]), ValueError, "expected flags 0 or 1, got 2 at step 0"),
        (np.array([1.0]), TypeError, "expected bool flags, got dtype float64"),
        (np.array([[True]]), ValueError, r"expected one scalar flag per step, got shape \[1, 1\]"),
    ],
)
def test_flags_that_are_not_scalar_bools_are_refused(
    flags: Any, error: type[Exception], message: str
) -> None:
    steps = stacked([True], [True], [False])
    steps["is_last"] = flags
    with pytest.raises(error, match=message):
        convert_rlds_to_trajectories([{"steps": steps}])


def test_a_non_numeric_observation_is_refused_naming_it() -> None:
    steps = stacked([True], [True], [False])
    steps["observation"] = np.array(["text"])
    with pytest.raises(TypeError, match=r"rlds_data\[0\]\['steps'\]\['observation'\]"):
        convert_rlds_to_trajectories([{"steps": steps}])


@pytest.mark.parametrize("data", [{"steps": []}, "episodes", 3])
def test_rlds_data_that_is_not_an_iterable_of_episodes_is_refused(data: Any) -> None:
    with pytest.raises(TypeError, match="rlds_data: expected an iterable of episodes"):
        convert_rlds_to_trajectories(data)


def test_steps_that_are_neither_a_dict_nor_a_list_are_refused() -> None:
    with pytest.raises(TypeError, match="expected a dict of stacked arrays or an iterable"):
        convert_rlds_to_trajectories([{"steps": 3}])
