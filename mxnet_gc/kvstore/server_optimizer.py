"""The optimizer on a parameter server (the workers' ``set_optimizer``, Gluon's update_on_kvstore): applied
to each round's sum segment by segment, its states saved and loaded with the servers' checkpoints."""
import base64
import copy
import pickle

import mxnet as mx

from .. import checkpoint_files


class ServerOptimizer:
    """A worker's optimizer (None until one arrives) and its states, one per segment id."""

    def __init__(self):
        self.optimizer = None
        self.states = {}

    @property
    def active(self):
        return self.optimizer is not None

    def set(self, blob, messages):
        """Installs the pickled optimizer a worker sent (tried first: one the server cannot run fails here)."""
        optimizer = pickle.loads(base64.b64decode(blob))
        trial_update(optimizer)
        self.optimizer = optimizer
        self.states = {}
        self.alias(messages)

    def apply(self, value, message):
        """One optimizer step per segment of ``message`` on ``value`` (its weights), with the round's sum,
        under the segment's own index (its chunk id)."""
        for seg in message.segments:
            begin, end = seg["offset"], seg["offset"] + seg["size"]
            weight, grad = (value, message.acc) if len(message.segments) == 1 else \
                (value[begin:end], message.acc[begin:end])
            index = seg["id"]
            if index not in self.states:
                self.states[index] = self.optimizer.create_state_multi_precision(index, weight)
            self.optimizer.update_multi_precision(index, weight, grad, self.states[index])
        value.wait_to_read()  # the update reads acc, which the next round writes directly

    def alias(self, messages):
        """The optimizer sees each segment under its chunk id: map those to the user key's settings.

        (Learning-rate and weight-decay multipliers are looked up by index in param_dict, lr_mult,
        wd_mult and idx2name; a split tensor's parts need their own states but the same settings.)
        """
        opt = self.optimizer
        if opt is None:
            return
        for table in ("param_dict", "idx2name", "lr_mult", "wd_mult"):
            original = getattr(opt, "_mxgc_" + table, None)
            if original is None:
                original = dict(getattr(opt, table, {}) or {})
                setattr(opt, "_mxgc_" + table, original)
            aliased = {k: v for k, v in original.items() if not isinstance(k, int)}
            for message in messages:
                for seg in message.segments:
                    if seg["index"] in original:
                        aliased[seg["id"]] = original[seg["index"]]
            setattr(opt, table, aliased)

    def save(self, path, dump_optimizer):
        state = (self.states, self.optimizer) if dump_optimizer else self.states
        checkpoint_files.write(path, pickle.dumps(_to_numpy(state)))

    def load(self, path, messages):
        state = _to_ndarray(pickle.loads(checkpoint_files.read(path)))
        if isinstance(state, tuple):
            self.states, self.optimizer = state
            self.alias(messages)
        else:
            self.states = state


def trial_update(optimizer):
    """Runs one update of a copy of ``optimizer`` on a scratch array: a setting the optimizer cannot
    apply (such as clip_gradient='abc') fails here, when the workers send it, not in the first round."""
    if not hasattr(optimizer, "update_multi_precision"):
        raise TypeError("the optimizer sent to the servers is a %s, not an mxnet.optimizer.Optimizer"
                        % type(optimizer).__name__)
    trial = copy.deepcopy(optimizer)
    weight, grad = mx.nd.zeros(4), mx.nd.ones(4)
    state = trial.create_state_multi_precision(0, weight)
    trial.update_multi_precision(0, weight, grad, state)
    weight.wait_to_read()


def _to_numpy(obj):
    """Optimizer states with NDArrays replaced by numpy arrays (so they pickle)."""
    if isinstance(obj, mx.nd.NDArray):
        return ("__ndarray__", obj.asnumpy())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_numpy(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def _to_ndarray(obj):
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "__ndarray__":
        return mx.nd.array(obj[1])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_ndarray(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_ndarray(v) for k, v in obj.items()}
    return obj
