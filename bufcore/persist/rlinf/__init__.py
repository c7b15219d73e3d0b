"""RLinf's disk trajectory buffer on disk: its directory layout, trajectory files, the FIFO
writer thread and the store the buffer composes (``bufcore.buffers.disk``)."""
