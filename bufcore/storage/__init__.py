"""Where rows live: the packed ring of :mod:`bufcore.storage.ring`."""
