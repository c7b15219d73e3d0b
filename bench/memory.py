"""Put the process's memory in the same state before every measurement that allocates.

Two effects of this machine would otherwise decide results by chance:

- **The VM takes back free memory.** This is a Firecracker microVM whose host reclaims guest
  memory that stays free for about two seconds (free page reporting). Touching such memory again
  costs a host page fault per page: first touch runs at ~0.4 GB/s instead of ~18 GB/s here. A
  first fill or a load that happens to get such pages would measure the VM, not the library.
  :func:`prefault` touches (and frees) as much memory as the next measurement will allocate,
  right before it, untimed, so every implementation starts from backed memory.
- **glibc's malloc thresholds depend on history.** A fresh process serves allocations above
  128 KiB with ``mmap`` and, after the first such block is freed, raises its mmap threshold to
  that block's size and its trim threshold to twice that. Until a large block has been freed, a
  loop that allocates and frees a few MiB per call can hand its pages back to the kernel and
  fault them in again on every call (measured before bufcore pooled its outputs: its ``sample``
  re-faulted its whole 4.5 MB output each call in a fresh process, 1,146 faults per call, 3-5x
  slower; the peers still do). :func:`settle_allocator` frees one 30 MiB block once, which puts
  the thresholds where a long-running process may have them (mmap 30 MiB, trim 60 MiB), the
  same for every implementation. Only the diagnostics use it: the headline runs fresh processes.
"""

from __future__ import annotations

import resource

import numpy as np

PAGE = 4096
_SETTLE_BYTES = 30 << 20  # under glibc's DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit)


def prefault(nbytes: int) -> None:
    """Allocate ``nbytes`` (numpy: huge-page eligible), touch every 4 KiB page, free it."""
    if nbytes <= 0:
        return
    block = np.empty(nbytes, dtype=np.uint8)
    block[::PAGE] = 1
    del block


def settle_allocator() -> None:
    """Free one large malloc block so glibc's dynamic mmap/trim thresholds are raised."""
    block = np.empty(_SETTLE_BYTES, dtype=np.uint8)
    block[::PAGE] = 1
    del block


def minor_faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
