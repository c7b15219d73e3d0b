"""``python -m bench.td_ema``: what the TD-error EMA costs beside a training step.

One micro-batch of the seed's loop, ``[batch, seq]`` tokens: ``TDWeighting.weights`` (read
the statistics, build the weights) plus ``TDWeighting.update`` (fold the batch into the EMA,
return the metrics) against forward + backward of a 2-layer MLP of width 1024 over the same
tokens (each token a ``width``-vector). Each repeat times one MLP step and the mean of
``--td-calls`` TD steps back to back; the overhead is their ratio, summarised by the median
over repeats (with min and max). The state size is the JSON of ``state_dict()``. torch runs
with one intra-op thread on the CPU unless told otherwise. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from typing import Any

import torch

from bench.timing import timed, torch_threads
from bufcore import TDStatsEMA, TDWeighting


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.td_ema", description=__doc__)
    parser.add_argument("--batch", type=int, default=32, help="rows of a micro-batch")
    parser.add_argument("--seq", type=int, default=2048, help="tokens per row")
    parser.add_argument("--width", type=int, default=1024, help="MLP width and token size")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (median)")
    parser.add_argument("--td-calls", type=int, default=20, help="TD steps per round")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the rounds; the summary as a JSON-ready dict."""
    device = torch.device(args.device)
    generator = torch.Generator(device=device).manual_seed(0)
    shape = (args.batch, args.seq)
    td = torch.randn(shape, generator=generator, device=device)
    mask = torch.rand(shape, generator=generator, device=device) > 0.1
    tokens = torch.randn(args.batch * args.seq, args.width, generator=generator, device=device)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(args.width, args.width),
        torch.nn.ReLU(),
        torch.nn.Linear(args.width, args.width),
    ).to(device)
    helper = TDWeighting(TDStatsEMA(device, warmup_steps=10), distributed=False)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def mlp_step() -> None:
        mlp.zero_grad(set_to_none=True)
        mlp(tokens).square().mean().backward()
        sync()

    def td_steps() -> None:
        for _ in range(args.td_calls):
            helper.weights(td, mask)
            helper.update(td, mask)
        sync()

    mlp_step()  # warm-up: allocations and kernels
    td_steps()
    mlp_seconds, td_seconds, ratios = [], [], []
    for _ in range(args.repeats):
        mlp_s, _ = timed(mlp_step)
        td_s, _ = timed(td_steps)
        td_s /= args.td_calls
        mlp_seconds.append(mlp_s)
        td_seconds.append(td_s)
        ratios.append(td_s / mlp_s)
    percent = [100.0 * r for r in ratios]
    state = json.dumps(helper.ema.state_dict()).encode()
    return {
        "shape": list(shape),
        "width": args.width,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "td_step_ms_median": 1e3 * statistics.median(td_seconds),
        "mlp_step_ms_median": 1e3 * statistics.median(mlp_seconds),
        "overhead_percent_median": statistics.median(percent),
        "overhead_percent_min": min(percent),
        "overhead_percent_max": max(percent),
        "state_dict_bytes": len(state),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the JSON summary; exit status 0."""
    args = parse_args(argv)
    with torch_threads(args.threads):
        print(json.dumps(measure(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
