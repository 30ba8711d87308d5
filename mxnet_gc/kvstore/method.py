"""A compression method as both stores see it: what it does at each of the store's calls.

The stores never ask which method runs; they call its hooks.  ``CodecMethod`` is every per-key codec's
(none, MXNet's 2bit, mxnet_gc's 2bit, 4bit and 8bit, layerwise_topk): every key travels in the store's
messages, encoded by the codec its compression gives the key.  LGC's (lgc_method.py) takes the coded keys
out of the messages in its train and lgc phases and sends them in rounds of its own, through the
transport.  A method's phases are the store's step clock's (mxnet_gc/schedule.py): the dense warm-up of
every method, LGC's ramp, train and lgc phases.
"""
import collections

# What a pull ends of a method's step: ``rounds``: whether the method's own rounds carried keys (their
# results come with the pull).
StepEnd = collections.namedtuple("StepEnd", "rounds")


class CodecMethod:
    """Per-key codecs in the store's messages (a method with no state of its own)."""

    rounds = None  # the method's own rounds (LGC's ``LGCRounds``), or None
    optimizer_on_servers = True  # whether the servers may apply the optimizer to what it sends

    def check_replaceable(self):
        """Raises when another compression may not replace this one now."""

    def codec_for(self, key, compression):
        """The codec of ``key``'s pushes through the store's messages after the dense warm-up."""
        return compression.codec_for(key)

    def state_per_value(self, compression):
        """Whether a chunk's error-feedback state is one value per value (dense, or a ``cuttable`` codec), so
        that the layout may cut a key anew (the pull's stages, a checkpoint of another layout)."""
        return compression.codec_type is None or compression.codec_class.cuttable

    def install(self, keys, shapes, names, messages):
        """The method replaces another on a store with ``keys`` initialized (of ``shapes``, called ``names``)
        in ``messages``: returns the merge groups the store must regroup them into, or None."""
        return None

    def init(self, keys, shapes, groups, names):
        """Keys being initialized (not ``reduce_only``): returns their merge groups as the method needs them."""
        return groups

    def push(self, grads, reduce_only):
        """Before a push of ``grads`` (key -> NDArray): (the keys that travel in the store's messages, what
        they send)."""
        return list(grads), grads

    def after_push(self, grads):
        """After the store's messages of a push: sends the method's own rounds; returns the non-finite values
        they counted, [(keys, counts)]."""
        return []

    def pull(self, keys):
        """Before a pull of ``keys``: (the keys that travel in the store's messages, the StepEnd of the
        method's step this pull ends, or None)."""
        return keys, None

    def finish(self, dests):
        """After a pull that ends the method's step (``pull`` gave a StepEnd): writes what its rounds carried
        into ``dests`` (key -> NDArray)."""

    # ---- checkpoints ----

    def state(self):
        """(JSON-serializable numbers or None, {name: numpy array}) a checkpoint keeps of the method."""
        return None, {}

    def save_states(self, path):
        """Writes the method's states beside rank 0's residual file ``path`` (a collective call)."""

    def load_state(self, meta, arrays, path):
        """Resumes from ``state``'s numbers ``meta`` and ``arrays``, and the states beside ``path``."""

    def state_files(self, path):
        """The files ``save_states(path)`` writes."""
        return []


def create(compression, rounds, transport, host):
    """The method of ``compression``: LGC's, with the transport's ``rounds`` class (given ``transport`` and
    the store as its ``host``), or per-key codecs."""
    if compression.lgc:
        from .lgc_method import LGCMethod
        return LGCMethod(rounds(transport, host, compression.config))
    return CodecMethod()
