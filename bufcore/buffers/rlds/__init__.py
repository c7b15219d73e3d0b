"""RLDS episodes into bufcore (REFERENCE §10, DESIGN §2 decision 9), without TensorFlow.

:mod:`.steps` reads and checks the episodes' steps into columns, :mod:`.convert` turns them into
TF-Agents transitions and pushes those into a buffer, :mod:`.expert` lays them out as an expert
buffer. Reading RLDS episodes from TFRecord files is :mod:`bufcore.persist.rlds_files`' job.
"""
