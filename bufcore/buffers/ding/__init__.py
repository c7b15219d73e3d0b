"""DI-engine's replay buffers (REFERENCE §11): ``NaiveReplayBuffer``, ``AdvancedReplayBuffer``
and ``EpisodeReplayBuffer``, one thin module each over a shared core (:mod:`.core`), with their
configs, item stores, throughput controller, monitor and checkpoint layout in small modules of
their own. The classes are exported from :mod:`bufcore`.
"""
