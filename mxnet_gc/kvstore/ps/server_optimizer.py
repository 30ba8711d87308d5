"""The optimizer on a parameter server (the workers' ``set_optimizer``, Gluon's update_on_kvstore): applied
to each round's sum segment by segment, its states saved and loaded with the servers' checkpoints."""
import copy

import mxnet as mx

from ... import optimizer_state


class ServerOptimizer:
    """A worker's optimizer (None until one arrives) and its states, one per segment id."""

    ALIASED = ("param_dict", "idx2name", "lr_mult", "wd_mult")  # the optimizer's tables looked up by index

    def __init__(self):
        self.optimizer = None
        self.states = {}
        self.tables = {}  # the optimizer's ALIASED tables as the worker sent them

    @property
    def active(self):
        return self.optimizer is not None

    def set(self, description, messages):
        """Installs the optimizer a worker described (optimizer_state.for_servers; tried first: one the server
        cannot run fails here)."""
        optimizer = optimizer_state.from_workers(description)
        trial_update(optimizer)
        self.install(optimizer, messages)
        self.states = {}

    def install(self, optimizer, messages):
        """Takes ``optimizer`` (its tables as the worker sent them) and aliases its tables to ``messages``."""
        self.optimizer = optimizer
        self.tables = {t: dict(getattr(optimizer, t, {}) or {}) for t in self.ALIASED}
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
        if self.optimizer is None:
            return
        for table, original in self.tables.items():
            aliased = {k: v for k, v in original.items() if not isinstance(k, int)}
            for message in messages:
                for seg in message.segments:
                    if seg["index"] in original:
                        aliased[seg["id"]] = original[seg["index"]]
            setattr(self.optimizer, table, aliased)

    def save(self, path, dump_optimizer, gaps):
        """Writes the states (and the optimizer, with ``dump_optimizer``) and ``gaps`` ({segment id: array}: the
        compressed weight pulls' differences not yet sent) to ``path``."""
        optimizer = None
        if dump_optimizer:  # (with its tables as the worker sent them: a resumed job's layout aliases them anew)
            optimizer = copy.copy(self.optimizer)
            for table, original in self.tables.items():
                setattr(optimizer, table, original)
        optimizer_state.save(path, self.states, optimizer, gaps)

    def load(self, path, messages):
        """Restores what ``save`` wrote; returns its gaps."""
        states, optimizer, gaps = optimizer_state.load(path)
        self.states = states
        if optimizer is not None:
            trial_update(optimizer)
            self.install(optimizer, messages)
        return gaps


def trial_update(optimizer):
    """Runs one update of a copy of ``optimizer`` on a scratch array: a setting the optimizer cannot
    apply (such as clip_gradient='abc') fails here, when the workers send it, not in the first round."""
    trial = copy.deepcopy(optimizer)
    weight, grad = mx.nd.zeros(4), mx.nd.ones(4)
    state = trial.create_state_multi_precision(0, weight)
    trial.update_multi_precision(0, weight, grad, state)
    weight.wait_to_read()
