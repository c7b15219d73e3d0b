"""Random episode-boundary flags against a step-by-step model of REFERENCE §10.2 plus DESIGN §2
decision 9: the same transitions, or the same first error at the same step; and a push that
fails leaves the buffer exactly as it was."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from bufcore import DictBuffer, convert_rlds_to_trajectories, push_rlds_to_buffer

Flags = tuple[bool, bool, bool]  # is_first, is_last, is_terminal


def model(episodes: list[list[Flags]]) -> list[tuple[int, int, float]] | str:
    """The transitions ``(step_type, next_step_type, discount)``, or the first error message,
    computed one pair at a time as the reference does, with decision 9's two extra rules."""
    steps = [
        (e, s, *flags) for e, episode in enumerate(episodes) for s, flags in enumerate(episode)
    ]
    padded = [*steps, (-1, -1, True, False, False)]
    out = []
    for (e, s, first, last, terminal), (_, _, next_first, next_last, _) in zip(
        steps, padded[1:], strict=True
    ):
        where = f" (rlds_data[{e}]['steps'][{s}])"
        if s == 0 and not first:
            return "The first step of an episode must be a first step." + where
        if terminal and not last:
            return "Terminal step must be the last step of an episode." + where
        if not first and not last and next_first:
            return "Mid step should not be followed by a first step." + where
        if last and not next_first:
            return "Last step of an episode must be followed by a first step." + where
        if first and not last and next_first:
            return "A first step that is not last should not be followed by a first step." + where
        kind = 0 if first else 2 if last else 1
        next_kind = 0 if next_first else 2 if next_last else 1
        if kind == next_kind == 0:
            kind = next_kind = 2
        out.append((kind, next_kind, 0.0 if last and terminal else 0.5))
    return out


def as_rlds(episodes: list[list[Flags]], stacked: bool) -> list[dict[str, Any]]:
    data = []
    for episode in episodes:
        n = len(episode)
        steps = {
            "observation": {"x": np.arange(n, dtype=np.float32)[:, None]},
            "action": np.zeros((n, 1), np.float32),
            "reward": np.ones(n, np.float32),
            "discount": np.full(n, 0.5, np.float32),
            "is_first": np.array([f[0] for f in episode], dtype=bool),
            "is_last": np.array([f[1] for f in episode], dtype=bool),
            "is_terminal": np.array([f[2] for f in episode], dtype=bool),
        }
        if not stacked:
            data.append({"steps": [
                {k: ({"x": v["x"][i]} if k == "observation" else v[i]) for k, v in steps.items()}
                for i in range(n)
            ]})
        else:
            data.append({"steps": steps})
    return data


flags = st.tuples(st.booleans(), st.booleans(), st.booleans())
# Mostly well-formed episodes (so that conversions succeed often), some arbitrary flags.
well_formed = st.integers(1, 4).flatmap(
    lambda n: st.lists(st.booleans(), min_size=n, max_size=n).map(
        lambda terminal: [(i == 0, i == len(terminal) - 1, t and i == len(terminal) - 1)
                          for i, t in enumerate(terminal)]
    )
)
episodes_strategy = st.lists(
    st.one_of(well_formed, st.lists(flags, max_size=4)), max_size=4
)


@given(episodes_strategy, st.booleans())
def test_conversion_matches_the_step_by_step_model(
    episodes: list[list[Flags]], stacked: bool
) -> None:
    expected = model(episodes)
    data = as_rlds(episodes, stacked)
    if isinstance(expected, str):
        try:
            convert_rlds_to_trajectories(data)
        except ValueError as err:
            assert str(err) == expected
        else:
            raise AssertionError(f"no error; expected {expected!r}")
        return
    got = [
        (t["step_type"].item(), t["next_step_type"].item(), t["discount"].item())
        for t in convert_rlds_to_trajectories(data)
    ]
    assert got == expected


@given(episodes_strategy, st.integers(1, 6))
def test_a_push_either_appends_every_transition_or_changes_nothing(
    episodes: list[list[Flags]], capacity: int
) -> None:
    buffer = DictBuffer(capacity=capacity)
    push_rlds_to_buffer(as_rlds([[(True, False, False), (False, True, True)]], True), buffer)
    before = buffer.get_full_buffer()
    cursor = buffer.cursor
    expected = model(episodes)
    try:
        count = push_rlds_to_buffer(as_rlds(episodes, True), buffer)
    except ValueError:
        assert isinstance(expected, str)
        assert buffer.cursor == cursor
        torch.testing.assert_close(buffer.get_full_buffer(), before)
        return
    assert not isinstance(expected, str) and count == len(expected)
    kept = ([0, 2] + [kind for kind, _, _ in expected])[-capacity:]
    assert buffer.get_full_buffer()["step_type"].tolist() == kept
