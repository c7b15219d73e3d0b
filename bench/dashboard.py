"""The dashboard on a big buffer: first render, memory, Resample and a Live refresh.

``python -m bench.dashboard`` builds (once, kept between runs) a DictBuffer checkpoint of
1,000,000 transitions in BFM-Zero's shapes (4,718 bytes a row, ~4.7 GB) laid out as a BFM-Zero
work directory, then measures, each in its own fresh Python process as a user gets it:

- the first render of the Overview and FIFO pages (the page script run by Streamlit's AppTest,
  server side; the browser's drawing is not included), with the checkpoint's files evicted
  from the page cache first (``posix_fadvise(DONTNEED)``: cold), and the process's peak RSS;
- the Sampling lab: the first render (an index-only load, ``leaves=[]``) and then **Resample**
  of a 1,024-row batch, repeated, and the process's peak RSS;
- a Live refresh that reads 1,000 records appended to a metrics log of 100,000.

Targets (issue 10): first render < 5 s cold and peak RSS < 1.5 GB; Resample < 0.5 s; Live
refresh < 100 ms. Prints one JSON object per measurement and a summary table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.disk import drop_cache

ROOT = Path(__file__).resolve().parent.parent
ENTRY = ROOT / "app" / "main.py"
PAGES = {
    "overview": None,
    "fifo": "../pages/fifo.py",
    "sampling_lab": "../pages/sampling_lab.py",
    "live": "../pages/live.py",
}


def build(work: Path, rows: int) -> Path:
    """The work directory holding ``checkpoint/buffers/train`` with ``rows`` transitions."""
    import torch

    from bench.workload import make_pool, slice_batch
    from bufcore import DictBuffer

    target = work / "checkpoint" / "buffers" / "train"
    if (target / "manifest.json").exists():
        return work
    torch.set_num_threads(1)
    pool = make_pool(4, 4096)
    buffer = DictBuffer(capacity=rows, device="cpu", seed=0)
    written = 0
    # A little more than the capacity, so the ring has wrapped and the cursor is mid-way.
    while written < rows + rows // 3:
        batch = pool[(written // 4096) % len(pool)]
        take = min(4096, rows + rows // 3 - written)
        buffer.extend(slice_batch(batch, take))
        written += take
    buffer.save(target)
    return work


def _app(run: Path) -> Any:
    os.environ["BUFCORE_DASHBOARD_RUNS"] = str(run)
    os.environ["BUFCORE_DASHBOARD_ROOTS"] = ""
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(ENTRY), default_timeout=600)


def child_render(run: Path, page: str) -> dict[str, Any]:
    """Open ``page`` once; seconds for the first render and peak RSS."""
    start = time.perf_counter()
    at = _app(run)
    at.run()
    if PAGES[page] is not None:
        at.switch_page(PAGES[page]).run()
    seconds = time.perf_counter() - start
    errors = [e.value for e in at.exception] + [e.value for e in at.error]
    return {"page": page, "seconds": seconds, "peak_rss_mb": _peak_mb(), "errors": errors}


def child_resample(run: Path, repeats: int) -> dict[str, Any]:
    """Open the Sampling lab (an index-only load), then click Resample ``repeats`` times."""
    start = time.perf_counter()
    at = _app(run)
    at.run()
    at.switch_page(PAGES["sampling_lab"]).run()
    first = time.perf_counter() - start
    button = next(b for b in at.button if b.label == "Resample")
    clicks = []
    for _ in range(repeats):
        start = time.perf_counter()
        button.click().run()
        clicks.append(time.perf_counter() - start)
        button = next(b for b in at.button if b.label == "Resample")
    errors = [e.value for e in at.exception] + [e.value for e in at.error]
    return {"page": "sampling_lab", "first_render": first, "resample": clicks,
            "peak_rss_mb": _peak_mb(), "errors": errors}


def child_live(work: Path, existing: int, appended: int, repeats: int) -> dict[str, Any]:
    """A Live refresh: poll a log of ``existing`` records after ``appended`` more arrive."""
    from app.live import LiveTail
    from bufcore import RunLogger

    times = []
    for repeat in range(repeats):
        run = work / f"live-{repeat}"
        logger = RunLogger(run, clock=time.time)
        for step in range(existing):
            logger.log("train", step, {"loss": 1.0, "td/ema_mean": 0.5, "td/ema_std": 1.0})
        tail = LiveTail(run / "metrics.jsonl")
        tail.poll()
        for step in range(existing, existing + appended):
            logger.log("train", step, {"loss": 1.0, "td/ema_mean": 0.5, "td/ema_std": 1.0})
        logger.close()
        start = time.perf_counter()
        new = tail.poll()
        times.append(time.perf_counter() - start)
        if len(new) != appended:
            raise RuntimeError(f"Live read {len(new)} records, expected {appended}")
    return {"live_refresh": times}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _in_child(*args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "bench.dashboard", "--child", *args],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{result.stderr[-3000:]}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bufcore-dashboard-bench"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "render":
            out = child_render(Path(rest[0]), rest[1])
        elif kind == "resample":
            out = child_resample(Path(rest[0]), int(rest[1]))
        else:
            out = child_live(Path(rest[0]), int(rest[1]), int(rest[2]), int(rest[3]))
        print(json.dumps(out))
        return 0
    work = args.work / f"rows-{args.rows}"
    start = time.perf_counter()
    build(work, args.rows)
    print(f"checkpoint ready in {time.perf_counter() - start:.1f} s: {work}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    for round_ in range(args.rounds):
        for page in ("overview", "fifo"):
            drop_cache(work)
            out = _in_child("render", str(work), page)
            results.setdefault(page, []).append(out)
            print(json.dumps({"round": round_, **out}), flush=True)
        drop_cache(work)
        out = _in_child("resample", str(work), "5")
        results.setdefault("sampling_lab", []).append(out)
        print(json.dumps({"round": round_, **out}), flush=True)
    out = _in_child("live", str(args.work), "100000", "1000", "5")
    print(json.dumps(out), flush=True)
    _summary(results, out)
    return 0


def _summary(results: dict[str, list[dict[str, Any]]], live: dict[str, Any]) -> None:
    def cell(values: list[float], unit: str = "s") -> str:
        return f"median {statistics.median(values):.3g} {unit}, worst {max(values):.3g} {unit}"

    print("\nmeasurement                         result (fresh process each)          target")
    for page in ("overview", "fifo"):
        rows = results[page]
        print(f"{page} first render (cold)          {cell([r['seconds'] for r in rows])}   < 5 s")
        print(f"{page} peak RSS                     "
              f"{cell([r['peak_rss_mb'] for r in rows], 'MB')}   < 1536 MB")
    lab = results["sampling_lab"]
    print(f"sampling lab first render (cold)    {cell([r['first_render'] for r in lab])}")
    clicks = [t for r in lab for t in r["resample"]]
    print(f"Resample (1024 rows)                {cell(clicks)}   < 0.5 s")
    print(f"sampling lab peak RSS               {cell([r['peak_rss_mb'] for r in lab], 'MB')}")
    print(f"Live refresh (1,000 new records)    {cell(live['live_refresh'])}   < 0.1 s")


if __name__ == "__main__":
    raise SystemExit(main())
