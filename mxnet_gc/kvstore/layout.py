"""Where each key's values travel: chunks (parts of keys) grouped into messages, placed on servers.

- A key of at least ``bound`` values is split into contiguous parts of about ``bound`` values or less,
  as many on every server (at least one part per server); each part is a message of its own.
- With several servers, a smaller key that holds more than a server's fair share of its init call (its
  values over the servers) is spread: cut into parts that fill the least loaded servers up to one level
  (parts of at least MIN_SPREAD_PART values), each a message of its own.  Without it a network whose
  bytes are mostly in one layer (a CNN's first dense layer) would load one server with every worker's
  copy of that layer while the others idle.
- With ``stages`` = (S, B) (the parameter server's pull, which brings a step's messages back in about S
  stages of at least B payload bytes, pull_stages.py), a key of more than its init call's values over S is
  cut further, into parts of about that size on its servers, each of at least B payload bytes (its codec's,
  as the store says; none for a codec whose state is not one value per value: not cut): one stage's pull
  then comes back while the next stage is still being pushed, so both directions of a link carry data at
  once (a network whose bytes are mostly in one layer would otherwise be one message, pushed whole before
  any of it is pulled).
- A smaller key goes whole to the least loaded server (by bytes), in a message of its own, or with
  ``groups`` (the Gluon trainer's merge policy) in its group's message, whatever its size: one push
  and one pull per step for the group, instead of one per key (a key that is split stays in messages
  of its own, and the group's keys after it go in a new message: with the keys in backward's order,
  messages are then pushed in the order their gradients are ready).
- Each chunk owns a segment of its message's values and of its payload.  A message is named by its
  ``id`` (the layout's count, the same on every worker); what it travels under (the parameter server's
  keys, Horovod's collective names) is the transport's.

Pure bookkeeping (no MXNet calls, no transport), shared by both stores.
"""
import math

from . import protocol

MIN_SPREAD_PART = 4096  # values: the smallest part of a spread key (16 KiB of float32)


class Chunk:
    """A contiguous part [begin, end) of a key's flattened value, a segment of one message."""

    def __init__(self, chunk_id, key, shape, begin, end):
        self.id, self.key, self.shape, self.begin, self.end = chunk_id, key, shape, begin, end
        self.message = None
        self.offset = 0  # first value in the message
        self.codec = None
        self.payload_offset = 0  # first payload word in the message
        self.payload_words = 0
        self.residual = None  # worker state, see DistSyncStore

    @property
    def size(self):
        return self.end - self.begin

    @property
    def whole_key(self):
        n = 1
        for d in self.shape:
            n *= d
        return self.begin == 0 and self.end == n


class Message:
    """What a worker pushes (and pulls) as one message: a run of chunks on one server."""

    def __init__(self, server, message_id):
        self.server, self.id = server, message_id
        self.chunks = []
        self.size = 0
        self.payload_words = None
        self.pull_words = None  # words of a compressed pull's payload
        self.rounds = 0  # pushes so far (a compressed pull needs one)

    def append(self, chunk):
        chunk.message, chunk.offset = self, self.size
        self.chunks.append(chunk)
        self.size += chunk.size

    @property
    def coded(self):
        return self.chunks[0].codec is not None

    def set_codecs(self, codec_for, num_workers, pull_codec_for=None):
        """Gives each chunk its key's codec and the codec of a compressed pull: of the sum of num_workers
        pushes, or ``pull_codec_for(key, codec)`` (the servers' weights' differences); returns True if the
        size of the push or pull payload changed."""
        words = pull_words = 0
        for c in self.chunks:
            c.codec = codec_for(c.key)
            c.pull_codec = None if c.codec is None else \
                pull_codec_for(c.key, c.codec) if pull_codec_for else c.codec.pull_codec(num_workers)
            c.payload_offset, c.pull_offset = words, pull_words
            c.payload_words = c.size if c.codec is None else c.codec.payload_size(c.size)
            c.pull_words = c.size if c.codec is None else c.pull_codec.payload_size(c.size)
            words += c.payload_words
            pull_words += c.pull_words
        changed = self.coded and (words, pull_words) != (self.payload_words, self.pull_words)
        self.payload_words = words if self.coded else None
        self.pull_words = pull_words if self.coded else None
        return changed

    def describe(self):
        """The message as a server needs it, but for the keys it travels under (ps/ps_buffers.py adds them)."""
        return {"size": self.size,
                "words": self.payload_words if self.coded else self.size, "pull_words": self.pull_words,
                "segments": [{"id": c.id, "index": c.key, "offset": c.offset, "size": c.size,
                              "payload_offset": c.payload_offset, "payload_words": c.payload_words,
                              "pull_offset": c.pull_offset, "pull_words": c.pull_words,
                              "codec": None if c.codec is None else c.codec.config(),
                              "pull_codec": None if c.codec is None else c.pull_codec.config()}
                             for c in self.chunks]}


class Layout:
    """All keys' chunks and messages; ``add`` places the keys of one init call."""

    def __init__(self, num_servers, bound, stages=None):
        self.num_servers, self.bound, self.stages = num_servers, bound, stages
        self.server_bytes = [0] * num_servers
        self.chunks = {}  # key -> [Chunk]
        self.messages = []
        self._next_chunk = self._next_message = 0

    def parts(self, n):
        """How many parts a key of n values is cut into: 1 below the bound, else a multiple of the servers
        with at most ``bound`` values each (rounded up to the servers), so that a large tensor is several
        messages, whose pulls can start while the next parts are still being pushed."""
        if n < self.bound:
            return 1
        return self.num_servers * max(1, -(-n // (self.bound * self.num_servers)))

    def spread(self, n):
        """(part sizes, their servers) filling the least loaded servers up to one level with n values, each
        part at least MIN_SPREAD_PART values (water-filling; one part when no two servers can take them)."""
        load = [b // 4 for b in self.server_bytes]
        order = sorted(range(self.num_servers), key=lambda s: (load[s], s))
        for k in range(self.num_servers, 1, -1):
            chosen = order[:k]
            level = (n + sum(load[s] for s in chosen)) // k
            if level - load[chosen[-1]] >= MIN_SPREAD_PART:
                sizes = {s: level - load[s] for s in chosen}
                for s in chosen[:n - sum(sizes.values())]:  # (the remainder of the division)
                    sizes[s] += 1
                servers = sorted(chosen)
                return [sizes[s] for s in servers], servers
        return [n], [order[0]]

    def staged(self, parts, servers, stage, payload):
        """``parts`` (sizes, on ``servers``) cut further into pieces of about ``stage`` values, each at least
        MIN_SPREAD_PART values and the stages' least payload bytes (``payload``: bytes a value), on the same
        servers, the servers' pieces in turns along the key."""
        cut = []
        for size, server in zip(parts, servers):
            pieces = max(1, min(-(-size // max(1, int(stage))), size // MIN_SPREAD_PART,
                                int(size * payload // self.stages[1])))
            cut.append([(piece, server) for piece in protocol.split_sizes(size, pieces)])
        # the servers' pieces in turns: each stage of the pull (consecutive pieces) then loads every server
        # the key is on, not one after the other
        turns = [p for i in range(max(map(len, cut))) for p in (pieces[i] for pieces in cut if i < len(pieces))]
        return [size for size, _ in turns], [server for _, server in turns]

    def _chunk(self, key, shape, begin, end):
        self._next_chunk += 1
        return Chunk(self._next_chunk, key, shape, begin, end)

    def _message(self, server):
        self._next_message += 1
        m = Message(server, self._next_message)
        self.messages.append(m)
        return m

    def add(self, keys, shapes, groups=None, payload=None):
        """Places new keys; returns their messages.  ``groups``: lists of keys, one message each, placed in
        their order (else the keys' order);
        ``payload(key)``: the payload bytes a value of the key's pushes takes (None: the keys are not cut
        for the stages)."""
        if groups is not None and sorted(map(str, keys)) != sorted(str(k) for g in groups for k in g):
            raise ValueError("merge groups must hold every key being initialized exactly once")
        group_of = {k: g for g, members in enumerate(groups or []) for k in members}
        if groups is not None:  # the groups' order is the messages' (the trainer's: backward's)
            shape_of = dict(zip(keys, shapes))
            keys = [k for g in groups for k in g]
            shapes = [shape_of[k] for k in keys]
        new, group_message = [], {}
        sizes = [math.prod(shape) for shape in shapes]
        fair = sum(sizes) / self.num_servers
        stage = sum(sizes) / self.stages[0] if self.stages and payload else float("inf")

        def message(server):
            new.append(self._message(server))
            return new[-1]

        for key, shape, n in zip(keys, shapes, sizes):
            count = self.parts(n)
            split = count > 1
            grouped = group_message.get(group_of.get(key))
            spread = self.spread(n) if not split and n > fair and n >= 2 * MIN_SPREAD_PART else ([n], None)
            if split:
                parts, servers = protocol.split_sizes(n, count), [i % self.num_servers for i in range(count)]
            elif len(spread[0]) > 1:
                (parts, servers), split = spread, True
            elif grouped is not None:
                parts, servers = [n], [grouped.server]
            else:
                parts, servers = [n], [min(range(self.num_servers), key=lambda s: self.server_bytes[s])]
            if not count > 1 and n > stage and n >= 2 * MIN_SPREAD_PART:
                parts, servers = self.staged(parts, servers, stage, payload(key))
                split = len(parts) > 1
            self.chunks[key], begin = [], 0
            for size, server in zip(parts, servers):
                chunk = self._chunk(key, shape, begin, begin + size)
                begin += size
                self.chunks[key].append(chunk)
                self.server_bytes[server] += 4 * size
                if split or groups is None:
                    m = message(server)
                else:
                    if grouped is None:
                        grouped = group_message[group_of[key]] = message(server)
                    m = grouped
                m.append(chunk)
            if split and key in group_of:  # the group's later keys (in backward's order) in a message after its parts
                group_message.pop(group_of[key], None)
        return new

    def remove(self, keys):
        """Takes ``keys`` out of the layout; returns their messages (which must hold no other key)."""
        gone = self.messages_of(keys)
        others = [c.key for m in gone for c in m.chunks if c.key not in set(keys)]
        if others:
            raise ValueError("keys %s share messages with %s; regroup them together" % (list(keys), others))
        self.messages = [m for m in self.messages if m not in gone]
        for m in gone:
            self.server_bytes[m.server] -= 4 * m.size
        for k in keys:
            del self.chunks[k]
        return gone

    def messages_of(self, keys):
        """The messages holding ``keys``, each once, in layout order."""
        wanted = {id(c.message) for k in keys for c in self.chunks[k]}
        return [m for m in self.messages if id(m) in wanted]
