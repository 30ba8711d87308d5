"""The Horovod transport (processes started by horovodrun): the store over Horovod's collectives.

``horovod_store`` (the store), ``timed_collectives`` and ``collective_wait`` (collectives with timeouts),
``ring_scatter`` (the compressed allreduce's alltoall and allgather), ``horovod_join`` (a clear error
for a script started the wrong way), ``lgc_ring`` (LGC's rounds on the ring).
"""
