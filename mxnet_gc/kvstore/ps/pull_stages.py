"""When the dist store's encoded pushes go out, and in which stages a pull brings them back.

A pull brings a step's pushes back in stages, a barrier each (the servers answer a pull with what they
hold, so a barrier tells that every worker's push of a stage has been summed): about PULL_STAGES stages of
at least ``stage_min_bytes(W)`` of pushed payload.  A barrier costs about a millisecond here; 1 MB takes
80 ms at 100 Mbit/s and a few milliseconds on loopback.

ps-lite has one connection per worker and server, so a stage's pull request waits behind every push
handed over before it: the store hands over the next stage's pushes only after each stage's pulls
(``PushQueue``).
"""
PULL_STAGES = 8
PULL_STAGE_MIN_BYTES = 16 << 10  # about 1.3 ms at 100 Mbit/s: a barrier's cost (about a millisecond) amortized
MANY_WORKERS = 4  # beyond it, stages of at least MANY_WORKERS_STAGE_BYTES
MANY_WORKERS_STAGE_BYTES = 1 << 20


def stage_min_bytes(num_workers):
    """The least pushed payload of a stage with ``num_workers`` workers: PULL_STAGE_MIN_BYTES up to
    MANY_WORKERS, MANY_WORKERS_STAGE_BYTES beyond.  A stage's barrier waits for the slowest worker's pushes
    of the stage, and with more workers one is more often late: on emulated hosts at 100 Mbit/s with W/2
    servers, 4bit both ways, mlp10m's step at 8 workers took 1959 ms with stages of 64 KiB and 1405 ms
    with 1 MiB, while at 2 and 4 workers the small stages were the faster (docs/kvstore.md, "Protocol")."""
    return PULL_STAGE_MIN_BYTES if num_workers <= MANY_WORKERS else MANY_WORKERS_STAGE_BYTES


class PushQueue:
    """Encoded pushes not yet handed to the transport, in push order."""

    def __init__(self, port, buffers, min_bytes=PULL_STAGE_MIN_BYTES):
        self._port, self._buffers, self._min_bytes = port, buffers, min_bytes
        self._unsent = []  # (message, payload array, priority)
        self._sent_early = 0  # payload bytes handed over since the last pull

    def add(self, message, array, priority):
        self._unsent.append((message, array, priority))

    def holds(self, messages):
        """Whether a push of one of ``messages`` waits here (its payload buffer must not be written yet)."""
        held = {id(m) for m, _, _ in self._unsent}
        return any(id(m) in held for m in messages)

    def send(self, through=(), everything=False):
        """Hands pushes to the transport in push order: at least through the last one whose payload array is
        in ``through`` (or all of them), and before a pull while fewer than a stage's least bytes have gone."""
        wanted = {id(a) for a in through}
        last = len(self._unsent) - 1 if everything else \
            max((i for i, (_, a, _) in enumerate(self._unsent) if id(a) in wanted), default=-1)
        sent = 0
        for i, (m, array, priority) in enumerate(self._unsent):
            if i > last and self._sent_early >= self._min_bytes:
                break
            self._port.push(self._buffers.push_key(m), array, priority=priority)
            m.rounds += 1
            self._port.count_round(m.server)
            self._sent_early += 4 * array.size
            sent = i + 1
        del self._unsent[:sent]

    def pulled(self):
        """A pull ended: the next pushes count from zero again."""
        self._sent_early = 0


def stages(pushed, messages, each_message, asynchronous, min_bytes=PULL_STAGE_MIN_BYTES):
    """The pull in stages: [(payloads to wait for, messages then pulled)], each stage one barrier.

    ``pushed``: (message, payload array) pushed since the last pull, in push order; they are pulled in push
    order, in about PULL_STAGES stages of at least ``min_bytes`` of payload (a last stage of less
    than half that joins the one before), or each message a stage with ``each_message``: a stage's values
    come back while later messages are still being pushed, so both directions of a link carry data at
    once.  Every worker pushes the same messages in a step (as Gluon's and Module's trainers do), so every
    worker makes the same barriers.  ``asynchronous`` (dist_async): one stage, no barrier.
    """
    wanted = {id(m) for m in messages}
    total = sum(4 * array.size for _, array in pushed)
    each = max(min_bytes, total / PULL_STAGES)
    result, arrays, batch, size = [], [], [], 0
    for sent, array in pushed:
        arrays.append(array)
        if id(sent) in wanted:
            batch.append(sent)
        size += 4 * array.size
        if not asynchronous and (each_message or size >= each):
            result.append((arrays, batch))
            arrays, batch, size = [], [], 0
    pushed_ids = {id(m) for m, _ in pushed}
    batch += [m for m in messages if id(m) not in pushed_ids]
    if result and size < each / 2 and not each_message:
        result[-1][0].extend(arrays)
        result[-1][1].extend(batch)
    else:
        result.append((arrays, batch))
    return result
