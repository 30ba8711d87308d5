"""Learned gradient compression ('lgc'): an autoencoder, trained during training, codes what the
workers' sparsified gradients share; each worker adds a small exact "innovation" of its own.

options.py       the 'lgc' parameters and the phases they make (dense, sparse ramp, train, lgc)
wire.py          the messages, word by word (bit-packed indices, codes, innovations, results)
vectors.py       top-k, the coded vector, scales, innovation channels, the combined sum
coder.py         a worker's accumulators, the messages it sends, its error feedback
autoencoder.py   the encoder, the per-worker decoders, the mean decoder, their training on a replay buffer
combiner.py      a step's messages combined (by a server, or on a ring by every worker); drives the training

The transports' rounds are in mxnet_gc/kvstore: lgc_rounds.py (what both share), lgc_ps.py and
lgc_server.py (the parameter server, LGC-PS), lgc_ring.py (Horovod's ring collectives, LGC-RAR).
"""
