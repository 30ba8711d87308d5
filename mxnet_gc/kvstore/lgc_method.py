"""Learned gradient compression as the stores see it (method.py's hooks): which of a step's keys travel
in the store's messages and which in LGC's own rounds (lgc_rounds.py and the transport's subclass).

In the dense and sparse-ramp phases every key travels in the store's messages (the coded keys encoded by
the ramp's 'layerwise_topk'); in the train and lgc phases the coded keys leave the messages: the rounds
send them after the store's messages and write their updates when the store's pull ends the step.  A
push of the coded keys starts a step (switching phase on every worker at its first step); the pull of
them ends it.
"""
from ..schedule import AE_TRAIN, LGC
from .method import CodecMethod, StepEnd


class LGCMethod(CodecMethod):
    """LGC's hooks around its ``rounds`` (an LGCRounds of the store's transport)."""

    optimizer_on_servers = False  # (the rounds' updates are the workers' to apply)

    def __init__(self, rounds):
        self.rounds = rounds
        self._phase = None  # the phase of a step pushed and not yet pulled

    def check_replaceable(self):
        if self.rounds.installed is not None:
            raise ValueError("'lgc' cannot be replaced once its first step ran; create a new store")

    def codec_for(self, key, compression):
        return self.rounds.codec_for(key)

    def state_per_value(self, compression):
        return False  # (the ramp's codec state, then the accumulators: cut as LGC's groups are)

    def install(self, keys, shapes, names, messages):
        """The coded keys among those initialized; a message mixing coded and other keys is split."""
        self.rounds.choose_coded(keys, shapes, names)
        coded = set(self.rounds.coded)
        mixed = [m for m in messages if len({c.key in coded for c in m.chunks}) > 1]
        return self.rounds.separate([list(dict.fromkeys(c.key for c in m.chunks)) for m in mixed]) if mixed else None

    def init(self, keys, shapes, groups, names):
        """Picks the coded keys; returns the merge groups with each coded key in a message of its own."""
        self.rounds.choose_coded(keys, shapes, names)
        return self.rounds.separate(groups) if groups is not None else None

    def push(self, grads, reduce_only):
        """A push of the coded keys starts a step (and, at a phase's first step, the phase); with
        ``dense_momentum`` the dense keys send their velocities."""
        keys = list(grads)
        if any(k in self.rounds.coded for k in keys):
            self._phase = self.rounds.begin_step(keys)
            keys = self.rounds.through_messages(keys)
        return keys, self.rounds.with_momentum(grads, [k for k in keys if k not in reduce_only])

    def after_push(self, grads):
        """The rounds' messages in the train and lgc phases; the non-finite values of the accumulation's pass
        and of the dense velocities' pass."""
        dense = self.rounds.velocities.nonfinite
        counted = [(list(dense), list(dense.values()))]
        if self._phase in (AE_TRAIN, LGC):
            self.rounds.push(grads)
            counted.append((list(self.rounds.nonfinite), list(self.rounds.nonfinite.values())))
        return counted

    def pull(self, keys):
        if self._phase is None or not any(k in self.rounds.coded for k in keys):
            return keys, None
        return self.rounds.through_messages(keys), StepEnd(rounds=self._phase in (AE_TRAIN, LGC))

    def finish(self, dests):
        phase, self._phase = self._phase, None
        if phase in (AE_TRAIN, LGC):
            self.rounds.finish(dests)
        else:
            self.rounds.end_step()

    # ---- checkpoints ----

    def state(self):
        return self.rounds.state()

    def save_states(self, path):
        self.rounds.save_states(path)

    def load_state(self, meta, arrays, path):
        self.rounds.load_state(meta["lgc"], arrays, path)

    def state_files(self, path):
        return self.rounds.state_files(path)
