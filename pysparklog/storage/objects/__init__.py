"""The object-store wing of the engine: a partition log on an object store, and what it is made of.

A filesystem's partition log (``pysparklog.storage.log``) changes its files in place under an ``flock``; an object
store offers neither (``pysparklog.storage.io.base``: it is a ``Storage``, not a ``FileSystemStorage``). So a
partition there is kept another way, in the modules of this package (docs/object-storage.md):

- ``commit_log``: numbered commit objects created only if absent, the sequencer of every append (``CommitLog``);
- ``topic_commit``: a commit's body, one chain per topic: every partition's end in a header, then the sections
  that change some of them (``TopicCommit``);
- ``sealing``: commits sealed into Kafka segments under numbered manifests (``Manifests``) and topic seals
  (``TopicSeals``);
- ``staged``: an exactly-once sink's micro-batch, its tasks' batches staged and made visible by one commit;
- ``lease``: the lock of an object store, a lease made of its two conditional writes (``ObjectLease``);
- ``log``: the partition log on its topic's commits (``ObjectPartitionLog``), read through a local replica: a
  filesystem partition log below the cache directory, holding exactly the partition's sections applied.

Nothing here loads the object-store client (obstore, ``storage.io.object_store``): that happens when a log directory
on an object store is opened.
"""
