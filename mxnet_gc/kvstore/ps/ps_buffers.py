"""A dist-store worker's arrays for each message, and the ps-lite keys they travel under.

A push sends a coded message's payload, or a dense message's private copy of its gradients; a compressed
pull lands in the message's pull buffer, the values of a message of several chunks in its receive buffer.
A message's ps-lite keys live here too: its value key (what dense pushes go to and pulls return, given
when it is placed), a payload key for a coded push and a pull key for a compressed pull (given when it
gets its codec: ``set_gradient_compression``, init, regroup); the message itself keeps only its placement
(kvstore/layout.py).  The servers learn both from ``describe``.
"""
import dataclasses

import mxnet as mx


@dataclasses.dataclass(eq=False)
class Buffers:
    """A message's keys and arrays on a worker: its ps-lite keys (``value_key``; ``payload_key`` when coded;
    ``pull_key`` with a compressed pull), what a push sends (``payload``, coded; ``send``, dense: a private
    copy), what pulls land in (``pulled``: a compressed pull's payload; ``recv``: the values of a message
    of several chunks) and ``token``, a one-value array the decode of its pull writes."""
    value_key: int = None
    payload_key: int = None
    pull_key: int = None
    payload: object = None
    send: object = None
    pulled: object = None
    recv: object = None
    token: object = dataclasses.field(default_factory=lambda: mx.nd.zeros(1))

    def outgoing(self, coded):
        return self.payload if coded else self.send

    def push_key(self, coded):
        return self.payload_key if coded else self.value_key

    def describe(self, message):
        """``message`` as the servers need it (ps/message_state.py's MessageState): its layout and keys."""
        return dict(message.describe(), push_key=self.push_key(message.coded), value_key=self.value_key,
                    pull_key=self.pull_key)


class MessageBuffers:
    """Each message's Buffers; ``port``: the transport (ps_port.py) whose keys and arrays they use."""

    def __init__(self, port):
        self._port = port
        self._of = {}

    def __getitem__(self, message):
        return self._of[message]

    def place(self, messages):
        """Gives new ``messages`` their value keys (every worker places the same messages in the same
        order, so they agree on the keys); returns the keys."""
        for m in messages:
            self._of[m] = Buffers(value_key=self._port.key_on(m.server))
        return [self._of[m].value_key for m in messages]

    def drop(self, message):
        """Forgets a message that left the layout; returns its Buffers."""
        return self._of.pop(message)

    def push_key(self, message):
        return self._of[message].push_key(message.coded)

    def pulls_compressed(self):
        """Whether a message has a compressed pull."""
        return any(b.pull_key is not None for b in self._of.values())

    def allocate(self, messages, changed, compressed_pull):
        """Makes the arrays and keys ``messages`` need now: a new payload key and buffer for those in
        ``changed`` (their codec changed), a pull key and buffer for coded ones with ``compressed_pull``;
        initializes the new keys on the servers (a collective call)."""
        new_payload, new_pull = [], []
        for m in messages:
            buffers = self._of[m]
            if m in changed:
                buffers.payload_key = self._port.key_on(m.server)
                buffers.payload = mx.nd.zeros(m.payload_words)
                new_payload.append(buffers)
                buffers.pull_key = None
            if m.coded and compressed_pull and buffers.pull_key is None:
                buffers.pull_key = self._port.key_on(m.server)
                buffers.pulled = mx.nd.zeros(m.pull_words)
                new_pull.append(buffers)
            elif not (m.coded and compressed_pull):
                buffers.pull_key = None
            if not m.coded and buffers.send is None:
                buffers.send = mx.nd.zeros(m.size)
            if len(m.chunks) > 1 and buffers.recv is None:
                buffers.recv = mx.nd.zeros(m.size)
        if new_payload:
            self._port.init([b.payload_key for b in new_payload], [b.payload for b in new_payload])
        if new_pull:
            self._port.init([b.pull_key for b in new_pull], [mx.nd.zeros(b.pulled.size) for b in new_pull])
            self._port.register([b.pull_key for b in new_pull], [b.pulled.size for b in new_pull])
