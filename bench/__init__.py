"""Benchmarks of bufcore against peer libraries and the machine's ceilings (DESIGN §6).

``python -m bench`` measures, in one run and one process, ``extend``/``sample``/first fill of
bufcore's :class:`~bufcore.DictBuffer`, torchrl, cpprb and a per-leaf port of BFM-Zero's buffer,
the memory and disk ceilings of this machine, and bufcore's checkpoint save and cold load. It
prints one table with the ratios and the targets they are held to, and writes the same numbers to
``bench/results/latest.json``.

Modules, one job each:

- :mod:`bench.workload`: BFM-Zero's shapes and the pool of source batches.
- :mod:`bench.timing`: timed blocks, repeat statistics, torch thread settings.
- :mod:`bench.perleaf`: the per-leaf baseline (BFM-Zero's seed buffer, ported).
- :mod:`bench.peers`: one adapter per buffer implementation, same small interface.
- :mod:`bench.ceilings`: single-array gather and block-write ceilings.
- :mod:`bench.disk`: page-cache control, raw sequential I/O, bufcore checkpoint save/load.
- :mod:`bench.memory`: pre-faulting and malloc settling, so allocations start out alike.
- :mod:`bench.fresh`: bufcore measured in a fresh child process (a diagnostic row).
- :mod:`bench.runner`: the measurement phases (interleaved, memory-aware).
- :mod:`bench.targets`: the ratios bufcore is held to.
- :mod:`bench.report`: the plain-text table and the JSON file.
- :mod:`bench.cli`: command-line options.
"""
