"""The demo run with ``--prioritized`` (TD-prioritized windows in the online buffer), and the
demo without it, unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import TrajectoryDictBufferMultiDim, load_buffer
from bufcore.cli import build_parser, demo_options
from bufcore.inspect import inspect_path, render, summarize_checkpoint
from bufcore.runs.demo import DemoOptions, run_demo
from bufcore.runs.demo import loop as demo_loop
from bufcore.sampling.prioritized import PrioritizedSampler
from tests.fixtures.demo_digests import assert_close, run_fingerprint
from tests.support import TINY_DEMO

DIGESTS = Path(__file__).parents[1] / "fixtures" / "demo_digests.json"
PRIORITIZED = dataclasses.replace(TINY_DEMO, prioritized=True)
TRAIN = Path("checkpoint") / "buffers" / "train"
REPLAY_KEYS = {
    "buffer", "count", "capacity", "sample_count", "sample_calls", "beta", "max_priority",
    "priority_min", "priority_q25", "priority_median", "priority_q75", "priority_max",
    "is_weight_min", "is_weight_median", "is_weight_max", "windows_drawn",
    "trajectories_drawn", "top_share", "top_trajectories",
}


@dataclasses.dataclass
class Run:
    """A prioritized run, with the live online buffer and each TD step's reprioritization."""

    path: Path
    online: TrajectoryDictBufferMultiDim
    updates: list[tuple[torch.Tensor, torch.Tensor]]

    def records(self, kind: str) -> list[dict[str, Any]]:
        lines = (self.path / "metrics.jsonl").read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["kind"] == kind]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    seen: dict[str, Any] = {"updates": []}
    real = demo_loop.reprioritize

    def watched(online: TrajectoryDictBufferMultiDim, index: torch.Tensor,
                td: torch.Tensor) -> int:
        seen["online"] = online
        seen["updates"].append((index.clone(), td.clone()))
        return real(online, index, td)

    path = tmp_path_factory.mktemp("per") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo_loop, "reprioritize", watched)
        run_demo(path, PRIORITIZED)
    return Run(path, seen["online"], seen["updates"])


# ------------------------------------------------------------------ without the flag
def test_without_the_flag_the_run_writes_what_it_wrote_before_prioritized_replay(
    tmp_path: Path,
) -> None:
    run_demo(tmp_path / "run", TINY_DEMO)
    expected = json.loads(DIGESTS.read_text())
    got = run_fingerprint(tmp_path / "run")
    assert_close(got["records"], expected["records"], "records")
    assert_close(got["files"], expected["files"], "files")


def test_the_option_is_left_out_of_the_logged_options_unless_set() -> None:
    assert "prioritized" not in TINY_DEMO.to_json()
    assert PRIORITIZED.to_json()["prioritized"] is True
    assert DemoOptions(**PRIORITIZED.to_json()) == PRIORITIZED


def test_a_prioritized_option_that_is_not_a_bool_is_refused() -> None:
    with pytest.raises(TypeError, match="prioritized"):
        DemoOptions(prioritized="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("flag", [[], ["--prioritized"]])
def test_the_cli_flag_sets_the_option(flag: list[str]) -> None:
    args = build_parser().parse_args(["demo", *flag])
    assert demo_options(args).prioritized is bool(flag)


# ------------------------------------------------------------------ with the flag
def test_the_flag_builds_the_online_buffer_with_a_max_reduced_prioritized_sampler(
    run: Run,
) -> None:
    sampler = run.online.sampler
    assert isinstance(sampler, PrioritizedSampler)
    assert sampler.config() == {
        "alpha": 0.6, "beta": 0.4, "anneal_steps": demo_loop.updates(PRIORITIZED),
        "eps": 1e-5, "reduction": "max",
    }
    assert run.records("run")[0]["replay_sampler"] == sampler.config()


def test_beta_reaches_one_at_the_last_update(run: Run) -> None:
    assert len(run.updates) == demo_loop.updates(PRIORITIZED)
    assert run.online.sampler.beta == 1.0


def test_after_the_last_step_the_drawn_rows_hold_their_td_magnitudes_plus_eps(
    run: Run,
) -> None:
    index, td = run.updates[-1]
    rows = index[:, 0].numpy()
    last = {row: value for row, value in zip(rows.tolist(), td.abs().reshape(-1).tolist(),
                                             strict=True)}  # a row drawn twice: its last
    stored = run.online.sampler.priorities(np.array(list(last)))
    np.testing.assert_allclose(stored.numpy(), np.array(list(last.values())) + 1e-5,
                               rtol=1e-12)


def test_a_window_draws_with_the_weight_of_its_heaviest_row(run: Run) -> None:
    sampler = run.online.sampler
    index = run.online.sample_index(64, generator=torch.Generator().manual_seed(0))
    rows = index.rows.view(-1, PRIORITIZED.seq_length)
    weight = sampler.priorities(rows.reshape(-1).numpy()).view(rows.shape) ** sampler.alpha
    lightest = (sampler.priorities() ** sampler.alpha).min()
    expected = (weight.max(dim=1).values / lightest) ** -sampler.beta
    assert index.weights is not None
    np.testing.assert_allclose(index.weights.view(rows.shape)[:, 0].numpy(),
                               expected.numpy(), rtol=1e-6)


def test_the_importance_weights_scale_the_value_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two updates: the first draws rows that all hold the first priority (weights 1).
    scaled = dataclasses.replace(PRIORITIZED, steps=16)
    run_demo(tmp_path / "a", scaled)
    monkeypatch.setattr(PrioritizedSampler, "_importance",
                        lambda self, weights, device: torch.ones(len(weights)))
    run_demo(tmp_path / "b", scaled)

    def losses(run: Path) -> list[float]:
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [r["value_loss"] for r in map(json.loads, lines) if r["kind"] == "train"]

    weighted, unweighted = losses(tmp_path / "a"), losses(tmp_path / "b")
    assert len(weighted) == 2 and weighted[0] == unweighted[0]
    assert weighted[1] < unweighted[1]


def test_a_replay_record_follows_each_buffer_record(run: Run) -> None:
    buffer_steps = [r["step"] for r in run.records("buffer")]
    assert [r["step"] for r in run.records("replay")] == buffer_steps == [25, 50, 60]


def test_the_replay_records_have_the_documented_keys_and_sane_values(run: Run) -> None:
    windows = PRIORITIZED.batch_size // PRIORITIZED.seq_length
    previous_calls, previous_beta = 0, 0.0
    for record in run.records("replay"):
        assert set(record) - {"step", "time", "kind"} == REPLAY_KEYS
        assert record["buffer"] == "TrajectoryDictBufferMultiDim"
        assert 0 < record["count"] <= record["capacity"] == PRIORITIZED.capacity * 4
        calls = record["sample_calls"]
        assert record["sample_count"] == calls * PRIORITIZED.batch_size
        assert record["windows_drawn"] == (calls - previous_calls) * windows
        assert previous_beta < record["beta"] <= 1.0
        quantiles = [record[f"priority_{q}"] for q in ("min", "q25", "median", "q75", "max")]
        assert quantiles[0] > 0 and quantiles == sorted(quantiles)
        assert record["max_priority"] + 1e-5 == pytest.approx(record["priority_max"])
        weights = [record[f"is_weight_{q}"] for q in ("min", "median", "max")]
        assert 0 < weights[0] <= weights[1] <= weights[2] == pytest.approx(1.0)
        top = record["top_trajectories"]
        assert 0 < len(top) <= 5 and 0 < record["top_share"] <= 1
        assert sum(t["windows"] for t in top) <= record["windows_drawn"]
        assert all(t["length"] > PRIORITIZED.seq_length for t in top)
        previous_calls, previous_beta = calls, record["beta"]


def test_the_last_replay_record_matches_what_inspect_reads_from_the_checkpoint(
    run: Run,
) -> None:
    last = run.records("replay")[-1]
    sampler = summarize_checkpoint(run.path / TRAIN).sampler
    assert sampler is not None and sampler.stats is not None
    assert sampler.stats == {key: last[key] for key in sampler.stats}
    assert (sampler.beta, sampler.max_priority) == (last["beta"], last["max_priority"])


def test_the_checkpoint_loads_with_its_sampler_and_resamples_as_the_live_buffer(
    run: Run,
) -> None:
    loaded = load_buffer(run.path / TRAIN)
    assert isinstance(loaded, TrajectoryDictBufferMultiDim)
    assert isinstance(loaded.sampler, PrioritizedSampler)
    assert torch.equal(loaded.sampler.priorities(), run.online.sampler.priorities())
    for generator in (None, 5):
        drawn = [
            buffer.sample(
                PRIORITIZED.batch_size,
                generator=None if generator is None else torch.Generator().manual_seed(5),
            )
            for buffer in (run.online, loaded)
        ]
        # Write counts start afresh in a loaded buffer; the rows drawn are the same.
        assert torch.equal(drawn[0]["_index"][:, 0], drawn[1]["_index"][:, 0])
        for key in ("_weight", "reward"):
            assert torch.equal(drawn[0][key], drawn[1][key])


def test_inspect_shows_the_sampler_options_and_priority_quantiles(run: Run) -> None:
    text = "\n".join(render(inspect_path(run.path)))
    assert "sampler    prioritized (alpha 0.6, beta 0.4, anneal_steps 13, eps 1e-05, " \
           "reduction max); max priority" in text
    assert "priorities min " in text and "; IS weights at beta now min " in text


def test_reprioritize_skips_the_rows_written_again_since_the_draw() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=6, n_dim=2, seq_length=2, seed=0,
                                          sampler=PrioritizedSampler(eps=0.0))

    def step(value: float) -> None:
        buffer.extend({"observation": torch.full((1, 2, 1), value),
                       "done": torch.tensor([[value % 3 == 2, False]])})

    for value in range(6):
        step(float(value))
    batch = buffer.sample(8, generator=torch.Generator().manual_seed(1))
    step(6.0)  # overwrites time row 0 of both envs
    rows = batch["_index"][:, 0]
    td = torch.arange(1.0, 9.0).view(4, 2)
    overwritten = rows < 2
    assert overwritten.any() and not overwritten.all()
    assert demo_loop.reprioritize(buffer, batch["_index"], -td) == int((~overwritten).sum())
    last = dict(zip(rows[~overwritten].tolist(), td.reshape(-1)[~overwritten].tolist(),
                    strict=True))  # a row drawn twice: its last
    assert buffer.sampler.priorities(np.array(list(last))).tolist() == list(last.values())
    assert buffer.sampler.priorities(np.array([0, 1])).tolist() == [1.0, 1.0]  # the new rows


def test_the_memory_check_counts_the_priorities_and_trees_of_every_online_row() -> None:
    rows = TINY_DEMO.envs * TINY_DEMO.capacity
    assert PRIORITIZED.buffer_bytes() - TINY_DEMO.buffer_bytes() == 48 * rows
