"""DI-engine buffer configs: the reference's keys and defaults, a user's config merged over them
and every value checked (REFERENCE §11.2-11.3).

``default_config()`` of each buffer class returns its defaults as an :class:`AttrDict` (a dict
whose keys read as attributes too, as DI-engine's ``EasyDict`` does) with ``cfg_type`` set to
``"<ClassName>Dict"``. A buffer takes a config (any nested mapping with some of the keys) and/or
keyword arguments for top-level keys (nested ones as mappings); both are merged over the
defaults, keyword arguments last. Unknown keys are refused (a typo would otherwise be a silent
default), and so is a ``type`` of another buffer kind.

A saved config (config.json's ``cfg``) writes ``inf`` as the string ``"inf"``: JSON has no
infinity, and checkpoints are written with ``allow_nan=False``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

from bufcore.checks import check_bool, check_int, check_real

INF = math.inf

NAIVE_DEFAULTS: dict[str, Any] = {
    "type": "naive",
    "replay_buffer_size": 10000,
    "deepcopy": False,
    "enable_track_used_data": False,
    "periodic_thruput_seconds": 60,
}
EPISODE_DEFAULTS: dict[str, Any] = {**NAIVE_DEFAULTS, "type": "episode"}
ADVANCED_DEFAULTS: dict[str, Any] = {
    "type": "advanced",
    "replay_buffer_size": 4096,
    "max_use": INF,
    "max_staleness": INF,
    "alpha": 0.6,
    "beta": 0.4,
    "anneal_step": 100000,
    "enable_track_used_data": False,
    "deepcopy": False,
    "thruput_controller": {
        "push_sample_rate_limit": {"max": INF, "min": 0},
        "window_seconds": 30,
        "sample_min_limit_ratio": 1,
    },
    "monitor": {
        "sampled_data_attr": {"average_range": 5, "print_freq": 200},
        "periodic_thruput": {"seconds": 60},
    },
}


class AttrDict(dict[str, Any]):
    """A dict whose keys also read and write as attributes (``cfg.replay_buffer_size``), nested
    mappings included, like DI-engine's ``EasyDict``."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        for key, value in (data or {}).items():
            self[key] = AttrDict(value) if isinstance(value, Mapping) else value

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = AttrDict(value) if isinstance(value, Mapping) else value

    def __deepcopy__(self, memo: dict[int, Any]) -> AttrDict:
        return AttrDict(copy.deepcopy(dict(self), memo))


def _int_or_inf(value: Any, where: str) -> float:
    if isinstance(value, float) and value == INF:
        return INF
    return check_int(value, where, minimum=1)


def _real_or_inf(value: Any, where: str) -> float:
    return check_real(value, where, minimum=0.0, finite=False)


def _unit(value: Any, where: str) -> float:
    return check_real(value, where, minimum=0.0, maximum=1.0)


def _positive(value: Any, where: str) -> float:
    return check_real(value, where, positive=True)


def _count(value: Any, where: str) -> int:
    return check_int(value, where, minimum=1)


# The check of every leaf, by key path.
_CHECKS: dict[tuple[str, ...], Callable[[Any, str], Any]] = {
    ("replay_buffer_size",): _count,
    ("deepcopy",): check_bool,
    ("enable_track_used_data",): check_bool,
    ("periodic_thruput_seconds",): _positive,
    ("max_use",): _int_or_inf,
    ("max_staleness",): _real_or_inf,
    ("alpha",): _unit,
    ("beta",): _unit,
    ("anneal_step",): lambda value, where: check_int(value, where, minimum=0),
    ("thruput_controller", "push_sample_rate_limit", "max"): _real_or_inf,
    ("thruput_controller", "push_sample_rate_limit", "min"): (
        lambda value, where: check_real(value, where, minimum=0.0)
    ),
    ("thruput_controller", "window_seconds"): _positive,
    ("thruput_controller", "sample_min_limit_ratio"): (
        lambda value, where: check_real(value, where, minimum=1.0)
    ),
    ("monitor", "sampled_data_attr", "average_range"): _count,
    ("monitor", "sampled_data_attr", "print_freq"): _count,
    ("monitor", "periodic_thruput", "seconds"): _positive,
}


def default_config(defaults: Mapping[str, Any], class_name: str) -> AttrDict:
    """A fresh copy of ``defaults`` with ``cfg_type`` (DI-engine's ``default_config()``)."""
    config = AttrDict(copy.deepcopy(dict(defaults)))
    config["cfg_type"] = f"{class_name}Dict"
    return config


def resolve_config(
    defaults: Mapping[str, Any],
    cfg: Mapping[str, Any] | None,
    overrides: Mapping[str, Any],
    class_name: str,
) -> AttrDict:
    """``cfg`` and then ``overrides`` merged over ``defaults``, every value checked.

    Raises:
        TypeError: ``cfg`` (or a nested section) is not a mapping, a key is not a str, or a
            value of the wrong type (the message names it: ``cfg['alpha']``).
        ValueError: an unknown key, a ``type`` of another buffer kind, a value out of range,
            or a rate limit whose ``max`` is below its ``min``.
    """
    merged = copy.deepcopy(dict(defaults))
    if cfg is not None:
        if not isinstance(cfg, Mapping):
            raise TypeError(f"cfg: expected a mapping (a config dict), got {type(cfg).__name__}")
        _merge(merged, cfg, "cfg")
    _merge(merged, overrides, "cfg")
    if merged["type"] != defaults["type"]:
        raise ValueError(
            f"cfg['type']: expected {defaults['type']!r} for a {class_name}, got "
            f"{merged['type']!r:.80}"
        )
    for path, check in _CHECKS.items():
        if path[0] in merged:
            section = merged
            for key in path[:-1]:
                section = section[key]
            where = "cfg" + "".join(f"[{key!r}]" for key in path)
            section[path[-1]] = check(section[path[-1]], where)
    limit = merged.get("thruput_controller", {}).get("push_sample_rate_limit")
    if limit is not None and limit["max"] < limit["min"]:
        raise ValueError(
            "cfg['thruput_controller']['push_sample_rate_limit']: expected max >= min, got "
            f"max {limit['max']} and min {limit['min']}"
        )
    return AttrDict({**merged, "cfg_type": f"{class_name}Dict"})


def _merge(target: dict[str, Any], source: Mapping[str, Any], where: str) -> None:
    for key, value in source.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: expected str keys, got {key!r:.80}")
        here = f"{where}[{key!r}]"
        if key == "cfg_type":
            continue  # DI-engine's record of the class, rewritten from the class itself
        if key not in target:
            known = ", ".join(sorted(target))
            raise ValueError(f"{here}: unknown key (known keys: {known})")
        if isinstance(target[key], dict):
            if not isinstance(value, Mapping):
                raise TypeError(f"{here}: expected a mapping, got {type(value).__name__}")
            _merge(target[key], value, here)
        elif key == "type":
            if not isinstance(value, str):
                raise TypeError(f"{here}: expected a str, got {value!r:.80}")
            target[key] = value
        else:
            target[key] = value


def saved_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` as JSON-ready plain data: infinities become ``"inf"``, ``cfg_type`` is left out."""
    return {
        key: saved_config(value) if isinstance(value, Mapping)
        else "inf" if isinstance(value, float) and value == INF else value
        for key, value in cfg.items()
        if key != "cfg_type"
    }


def loaded_config(saved: Any) -> Any:
    """What :func:`saved_config` wrote, with ``"inf"`` back as ``inf`` (checked afterwards by
    :func:`resolve_config`)."""
    if isinstance(saved, Mapping):
        return {key: loaded_config(value) for key, value in saved.items()}
    return INF if saved == "inf" else saved
