"""Per-buffer generators: seeding, and a JSON state that continues the same stream."""

from __future__ import annotations

import json

import pytest
import torch

from bufcore.errors import StateError
from bufcore.rng import generator_state, make_generator, restore_generator

CPU = torch.device("cpu")


def draws(generator: torch.Generator, n: int = 8) -> list[int]:
    return torch.randint(1000, (n,), generator=generator).tolist()


def test_the_same_seed_gives_the_same_stream() -> None:
    assert draws(make_generator(CPU, 5)) == draws(make_generator(CPU, 5))


def test_no_seed_gives_a_nondeterministic_stream() -> None:
    assert draws(make_generator(CPU, None), 32) != draws(make_generator(CPU, None), 32)


@pytest.mark.parametrize(("seed", "error"), [("1", TypeError), (1.0, TypeError), (True, TypeError),
                                             (2**70, ValueError), (-(2**64), ValueError)])
def test_a_seed_a_generator_cannot_take_is_refused(seed: object, error: type) -> None:
    with pytest.raises(error, match="seed"):
        make_generator(CPU, seed)  # type: ignore[arg-type]


def test_the_largest_unsigned_64_bit_seed_is_accepted() -> None:
    assert draws(make_generator(CPU, 2**64 - 1))


def test_a_restored_state_continues_the_stream_after_a_json_round_trip() -> None:
    generator = make_generator(CPU, 3)
    draws(generator)
    state = json.loads(json.dumps(generator_state(generator)))
    expected = draws(generator)
    again = make_generator(CPU, 99)
    restore_generator(again, state)
    assert draws(again) == expected


@pytest.mark.parametrize(
    "state",
    [{}, {"device_type": "cpu"}, {"device_type": "cpu", "state": "not base64!"}, [],
     {"device_type": "cpu", "state": "AAAA"}],
)
def test_a_malformed_state_raises_a_state_error_and_leaves_the_generator_alone(
    state: object,
) -> None:
    generator = make_generator(CPU, 4)
    with pytest.raises(StateError, match="generator") as caught:
        restore_generator(generator, state)  # type: ignore[arg-type]
    assert caught.value.part == "state"
    assert draws(generator) == draws(make_generator(CPU, 4))


def test_a_state_from_another_device_type_seeds_deterministically_from_it() -> None:
    state = {**generator_state(make_generator(CPU, 1)), "device_type": "cuda"}
    a, b = make_generator(CPU, 7), make_generator(CPU, 8)
    restore_generator(a, state)
    restore_generator(b, state)
    assert draws(a) == draws(b)


def test_a_device_this_process_cannot_use_is_refused_naming_the_argument() -> None:
    device = torch.device(f"cuda:{torch.cuda.device_count() + 7}")
    with pytest.raises(ValueError, match=r"device: device 'cuda:\d+' is not usable"):
        make_generator(device, 0)


def test_a_device_without_generators_is_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match=r"device: 'meta' has no random generator"):
        make_generator(torch.device("meta"), 0)
