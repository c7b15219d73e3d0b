"""DI-engine configs: the reference's keys and defaults, merging, and refusals that name the key."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from bufcore import AdvancedReplayBuffer, EpisodeReplayBuffer, IBuffer, NaiveReplayBuffer

NAIVE = {
    "type": "naive",
    "replay_buffer_size": 10000,
    "deepcopy": False,
    "enable_track_used_data": False,
    "periodic_thruput_seconds": 60,
}
ADVANCED = {
    "type": "advanced",
    "replay_buffer_size": 4096,
    "max_use": math.inf,
    "max_staleness": math.inf,
    "alpha": 0.6,
    "beta": 0.4,
    "anneal_step": 100000,
    "enable_track_used_data": False,
    "deepcopy": False,
    "thruput_controller": {
        "push_sample_rate_limit": {"max": math.inf, "min": 0},
        "window_seconds": 30,
        "sample_min_limit_ratio": 1,
    },
    "monitor": {
        "sampled_data_attr": {"average_range": 5, "print_freq": 200},
        "periodic_thruput": {"seconds": 60},
    },
}


def test_naive_default_config_has_the_reference_keys_and_defaults() -> None:
    assert NaiveReplayBuffer.default_config() == {**NAIVE, "cfg_type": "NaiveReplayBufferDict"}


def test_advanced_default_config_has_the_reference_keys_and_defaults() -> None:
    expected = {**ADVANCED, "cfg_type": "AdvancedReplayBufferDict"}
    assert AdvancedReplayBuffer.default_config() == expected


def test_episode_default_config_is_the_naive_one_with_its_own_type() -> None:
    expected = {**NAIVE, "type": "episode", "cfg_type": "EpisodeReplayBufferDict"}
    assert EpisodeReplayBuffer.default_config() == expected


def test_default_config_reads_as_attributes_like_an_easydict() -> None:
    cfg = AdvancedReplayBuffer.default_config()
    assert cfg.thruput_controller.push_sample_rate_limit.max == math.inf
    cfg.replay_buffer_size = 8
    assert cfg["replay_buffer_size"] == 8


def test_default_config_is_a_fresh_copy_each_time() -> None:
    first = AdvancedReplayBuffer.default_config()
    first.thruput_controller.window_seconds = 1
    assert AdvancedReplayBuffer.default_config().thruput_controller.window_seconds == 30


def test_a_buffer_takes_a_default_config_back() -> None:
    cfg = AdvancedReplayBuffer.default_config()
    cfg.replay_buffer_size = 7
    assert AdvancedReplayBuffer(cfg).replay_buffer_size == 7


def test_a_partial_config_is_merged_over_the_defaults() -> None:
    buffer = AdvancedReplayBuffer({"thruput_controller": {"window_seconds": 5}})
    assert buffer.cfg.thruput_controller.window_seconds == 5
    assert buffer.cfg.thruput_controller.sample_min_limit_ratio == 1
    assert buffer.cfg.replay_buffer_size == 4096


def test_keyword_arguments_override_the_config() -> None:
    buffer = NaiveReplayBuffer({"replay_buffer_size": 5, "deepcopy": True}, replay_buffer_size=3)
    assert (buffer.replay_buffer_size, buffer.cfg.deepcopy) == (3, True)


def test_the_callers_config_is_not_changed() -> None:
    cfg: dict[str, Any] = {"thruput_controller": {"window_seconds": 5}}
    before = copy.deepcopy(cfg)
    AdvancedReplayBuffer(cfg, alpha=0.5)
    assert cfg == before


def test_an_unknown_key_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"cfg\['max_use'\]: unknown key.*replay_buffer_size"):
        NaiveReplayBuffer({"max_use": 3})


def test_an_unknown_nested_key_is_refused_with_its_path() -> None:
    with pytest.raises(ValueError, match=r"cfg\['thruput_controller'\]\['window'\]: unknown"):
        AdvancedReplayBuffer(thruput_controller={"window": 3})


def test_a_type_of_another_buffer_kind_is_refused() -> None:
    with pytest.raises(ValueError, match=r"cfg\['type'\]: expected 'naive'"):
        NaiveReplayBuffer({"type": "advanced"})


@pytest.mark.parametrize(
    ("options", "error", "where"),
    [
        ({"replay_buffer_size": 0}, ValueError, "replay_buffer_size"),
        ({"replay_buffer_size": 2.0}, TypeError, "replay_buffer_size"),
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"beta": -0.1}, ValueError, "beta"),
        ({"anneal_step": -1}, ValueError, "anneal_step"),
        ({"max_use": 0}, ValueError, "max_use"),
        ({"max_staleness": math.nan}, ValueError, "max_staleness"),
        ({"deepcopy": "yes"}, TypeError, "deepcopy"),
        ({"thruput_controller": {"sample_min_limit_ratio": 0.5}}, ValueError,
         "sample_min_limit_ratio"),
        ({"thruput_controller": {"window_seconds": 0}}, ValueError, "window_seconds"),
        ({"thruput_controller": 3}, TypeError, "thruput_controller"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(
    options: dict[str, Any], error: type[Exception], where: str
) -> None:
    with pytest.raises(error, match=where):
        AdvancedReplayBuffer(**options)


def test_a_rate_limit_whose_max_is_below_its_min_is_refused() -> None:
    with pytest.raises(ValueError, match="expected max >= min"):
        AdvancedReplayBuffer(thruput_controller={"push_sample_rate_limit": {"max": 1, "min": 2}})


def test_a_config_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(TypeError, match="cfg: expected a mapping"):
        NaiveReplayBuffer([("replay_buffer_size", 3)])  # type: ignore[arg-type]


def test_an_unknown_storage_is_refused() -> None:
    with pytest.raises(ValueError, match="storage: expected one of"):
        NaiveReplayBuffer(storage="disk")


def test_meta_data_mode_with_packed_storage_is_refused() -> None:
    with pytest.raises(ValueError, match="storage: meta-data mode"):
        NaiveReplayBuffer(enable_track_used_data=True, storage="packed")


def test_max_use_and_max_staleness_take_infinity_as_no_limit() -> None:
    buffer = AdvancedReplayBuffer(max_use=math.inf, max_staleness=math.inf)
    assert buffer.cfg.max_use == math.inf and buffer.cfg.max_staleness == math.inf


@pytest.mark.parametrize("cls", [NaiveReplayBuffer, AdvancedReplayBuffer, EpisodeReplayBuffer])
def test_every_di_engine_buffer_is_an_ibuffer(cls: type[Any]) -> None:
    buffer: IBuffer = cls(replay_buffer_size=2)
    assert isinstance(buffer, IBuffer)
