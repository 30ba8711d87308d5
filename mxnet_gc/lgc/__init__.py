"""Learned gradient compression ('lgc'): an autoencoder, trained during training, codes what the
workers' sparsified gradients share; each worker adds a small exact "innovation" of its own.

options.py       the 'lgc' parameters and the phases they make (dense, sparse ramp, train, lgc)
wire.py          the messages, word by word (bit-packed indices, codes, innovations, results)
autoencoder.py   the encoder, the per-worker decoders, their training on a replay buffer
"""
