"""Benchmarks of bufcore against peer libraries and the machine's ceilings (DESIGN §6).

``python -m bench`` measures three parts, in this order:

- *headline* (first, before this process allocates anything): every implementation in its own
  fresh Python process, rotated, several rounds; median, min and max over the processes and
  page faults per call, for the transition buffer (``sample``, ``extend``, BFM-Zero's ``mix``,
  first fill untouched and pre-touched, and a settled-allocator diagnostic) and the online
  ``[time, env]`` buffer (``step``, ``extend``, ``sample``); written to
  ``bench/results/headline.json``. This is what a user's process gets (DESIGN §6).

The other two run in this one process and are diagnostics beside the headline:

- *transition*: ``extend``/``sample``/first fill of bufcore's :class:`~bufcore.DictBuffer`,
  torchrl, cpprb and a per-leaf port of BFM-Zero's buffer, the memory and disk ceilings of this
  machine, and bufcore's checkpoint save and cold load;
- *trajectory*: window indices over ``[5000, 1024]`` end flags after a one-step extend (bufcore's
  incremental boundaries against torchrl's ``SliceSampler`` and BFM-Zero's full rescan), and
  windows with ``next`` from a full ``[time, 256]`` online buffer (bufcore's
  ``TrajectoryDictBufferMultiDim`` against torchrl and a per-leaf port).

It prints one table per part with the ratios and the targets they are held to, and writes the
in-process numbers to ``bench/results/latest.json``. ``--only``/``--skip`` pick the parts.

Modules, one job each:

- :mod:`bench.workload`: BFM-Zero's shapes and the pool of source batches.
- :mod:`bench.timing`: timed blocks, repeat statistics, torch thread settings.
- :mod:`bench.perleaf`: the per-leaf baselines (BFM-Zero's seed buffers, ported).
- :mod:`bench.peers`: one adapter per buffer implementation, same small interface.
- :mod:`bench.ceilings`: single-array gather and block-write ceilings.
- :mod:`bench.disk`: page-cache control, raw sequential I/O, bufcore checkpoint save/load.
- :mod:`bench.memory`: pre-faulting and malloc settling, so allocations start out alike.
- :mod:`bench.blocks`: timed blocks and per-op records inside a headline child.
- :mod:`bench.isolated`: the headline child (``python -m bench.isolated '<json spec>'``).
- :mod:`bench.online_child`: the headline child's online ``[time, env]`` scenario.
- :mod:`bench.headline`: the headline parent: rounds, rotation, one child each, aggregation.
- :mod:`bench.headline_report`: the headline tables and ``headline.json``.
- :mod:`bench.runner`: the measurement phases (interleaved, memory-aware).
- :mod:`bench.rollout`: ``[time, env]`` episode end flags and the batches that carry them.
- :mod:`bench.trajpeers`: one adapter per trajectory-sampling implementation.
- :mod:`bench.trajectory`: the trajectory phases (window indices, windows with ``next``).
- :mod:`bench.targets`: the ratios (and absolute limits) bufcore is held to.
- :mod:`bench.report`: the plain-text tables and the JSON file.
- :mod:`bench.cli`: command-line options.
"""
