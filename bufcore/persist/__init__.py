"""Every byte bufcore puts on disk and reads back: checkpoints, episode files, atomic publish.

Only this package opens files, imports h5py or starts I/O threads (DESIGN §1 rule 2). Buffers
hand it their state as plain data plus row tensors and get it back the same way.
"""
