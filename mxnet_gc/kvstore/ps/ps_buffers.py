"""A dist-store worker's arrays for each message, and the ps-lite keys they travel under.

A push sends a coded message's payload, or a dense message's private copy of its gradients; a compressed
pull lands in the message's pull buffer, the values of a message of several chunks in its receive buffer.
Made when a message gets its codec (``set_gradient_compression``, init, regroup); the message itself keeps
only its placement (kvstore/layout.py), and its push and pull keys, which the servers learn from the layout.
"""
import dataclasses

import mxnet as mx


@dataclasses.dataclass(eq=False)
class Buffers:
    """A message's arrays on a worker: what a push sends (``payload``, coded; ``send``, dense: a private
    copy), what pulls land in (``pulled``: a compressed pull's payload; ``recv``: the values of a message
    of several chunks) and ``token``, a one-value array the decode of its pull writes."""
    payload: object = None
    send: object = None
    pulled: object = None
    recv: object = None
    token: object = dataclasses.field(default_factory=lambda: mx.nd.zeros(1))

    def outgoing(self, coded):
        return self.payload if coded else self.send


class MessageBuffers:
    """Each message's Buffers; ``port``: the transport (ps_port.py) whose keys and arrays they use."""

    def __init__(self, port):
        self._port = port
        self._of = {}

    def __getitem__(self, message):
        return self._of[message]

    def drop(self, message):
        self._of.pop(message, None)

    def allocate(self, messages, changed, compressed_pull):
        """Makes the arrays and keys ``messages`` need now: a new payload key and buffer for those in
        ``changed`` (their codec changed), a pull key and buffer for coded ones with ``compressed_pull``;
        initializes the new keys on the servers (a collective call)."""
        new_payload, new_pull = [], []
        for m in messages:
            buffers = self._of.setdefault(m, Buffers())
            if m in changed:
                m.payload_key = self._port.key_on(m.server)
                buffers.payload = mx.nd.zeros(m.payload_words)
                new_payload.append(m)
                m.pull_key = None
            if m.coded and compressed_pull and m.pull_key is None:
                m.pull_key = self._port.key_on(m.server)
                buffers.pulled = mx.nd.zeros(m.pull_words)
                new_pull.append(m)
            elif not (m.coded and compressed_pull):
                m.pull_key = None
            if not m.coded and buffers.send is None:
                buffers.send = mx.nd.zeros(m.size)
            if len(m.chunks) > 1 and buffers.recv is None:
                buffers.recv = mx.nd.zeros(m.size)
        if new_payload:
            self._port.init([m.payload_key for m in new_payload], [self._of[m].payload for m in new_payload])
        if new_pull:
            self._port.init([m.pull_key for m in new_pull], [mx.nd.zeros(m.pull_words) for m in new_pull])
            self._port.register([m.pull_key for m in new_pull], [m.pull_words for m in new_pull])
