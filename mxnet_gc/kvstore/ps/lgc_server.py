"""LGC on the parameter server, a server's side: the groups of coded tensors it holds, their pushes,
and the result each step's pushes make (see lgc_ps.py for the rounds, mxnet_gc/lgc for the rest).

The aggregator hands over every push to a key of an LGC group.  A 'lead' push is kept (when the
leader's indices go first, ``LGCOptions.index_first``, it also becomes the 'index' value; with index
'union' the W workers' candidates are kept, and the set drawn from them becomes it); an 'all'
push is kept until every worker's has arrived (and, in the lgc phase, the leader's); then the
combiner makes the step's result, written to the 'result' value, and the step's two rounds count as
done.  A fine-tuning step of the lgc phase (option
``fine_tune_every``) comes as a train step, through the keys 'tune_lead' and 'tune_all'; its training
finishes before the step's result is out, and the new weights are then the 'weights' value.  A
message that does not follow the format is reported, and the step's result is then all zeros: the
values are unchanged this step, every worker is told.
"""
import numpy as np

from ...lgc.combiner import Combiner
from ...lgc.options import LGCOptions
from ...lgc.wire import WireFormat
from ...schedule import LGC


def in_rank_order(messages):
    """A step's messages sorted by their sender's rank (the header's third word; the combiner checks it)."""
    return sorted(messages, key=lambda m: int(m.view(np.uint32)[2]) if m.size > 2 else -1)


class ServerGroup:
    def __init__(self, desc, options, num_workers, combiner):
        self.keys, self.number = desc["keys"], desc["number"]  # number: the group's place among the workers' groups
        self.fmt = WireFormat(desc["sizes"], options.density, options.innovation_density, num_workers,
                              options.latent_channels, options.signs)
        self.combiner = combiner or Combiner(self.fmt, options)
        self.lead = None  # this step's leader message (with index 'union': the INDEX drawn from the candidates)
        self.candidates = []  # with index 'union': this step's CAND messages so far
        self.all = []  # this step's 'all' messages so far
        self.step = 0
        self.index = None  # the leader's INDEX fields (scales, indices), when the leader sends them first


class LGCServer:
    """The LGC groups of one server; ``push`` returns the rounds a push completed."""

    def __init__(self, num_workers):
        self.num_workers = num_workers
        self.phase = None
        self.options = None
        self.groups = {}  # chunk ids -> ServerGroup
        self.by_key = {}  # push key -> (group, 'lead' or 'all')

    def owns(self, key):
        return key in self.by_key

    def configure(self, phase, step, options, groups, server_rank, values_np):
        """Takes a phase's keys, from ``step`` on; the combiners (the autoencoders) live on across phases."""
        self.phase, self.options = phase, LGCOptions(options)
        self.values_np = values_np
        self.by_key = {}
        for desc in groups:
            if desc["server"] != server_rank:
                continue
            ids = tuple(desc["chunks"])
            old = self.groups.get(ids)
            group = ServerGroup(desc, self.options, self.num_workers, old.combiner if old else None)
            group.step = step  # the step whose messages come next
            self.groups[ids] = group
            for name in ("lead", "all"):
                for key in (name, "tune_" + name):
                    if key in desc["keys"]:
                        self.by_key[desc["keys"][key]] = (group, name)
            if phase == LGC:
                self.values_np[desc["keys"]["weights"]][:] = group.combiner.weights()

    def save(self, path):
        """Writes every group's autoencoder state and next step to ``path.lgc<g>`` (g: the group's index)."""
        for g in self.groups.values():
            g.combiner.save("%s.lgc%d" % (path, g.number), g.step)

    def load(self, path):
        """Restores ``save``'s states into the groups configured (after the phase's ``configure``)."""
        for g in self.groups.values():
            g.combiner.load("%s.lgc%d" % (path, g.number), g.step)
            if self.phase == LGC:
                self.values_np[g.keys["weights"]][:] = g.combiner.weights()

    def push(self, key, words):
        """Takes one push (a copy of its words); returns (rounds completed, an error message or None)."""
        group, name = self.by_key[key]
        rounds, error = 0, None
        train = self.options.trains(self.phase, group.step)
        if name == "lead" and self.options.candidates_first(self.phase, group.step):
            group.candidates.append(words)
            if len(group.candidates) == self.num_workers:
                group.lead, error = self._draw_index(group)
                published = self._publish_index(group)  # (after an error the empty 'lead' is rejected: zeros)
                error = error or published
        elif name == "lead":
            group.lead = words
            if self.options.index_first(self.phase, group.step):
                error = self._publish_index(group)
        else:
            group.all.append(words)
        # Both of a step's rounds count when the step is complete: a leader that is a step ahead must not
        # make the rounds done run ahead of what a slower worker pushed before it checks them.
        if len(group.all) == self.num_workers and (train or group.lead is not None):
            error = self._finish(group) or error
            rounds = 2
        return rounds, error

    def _draw_index(self, group):
        """With index 'union': (the step's INDEX message drawn from every worker's CAND, in the leader's
        scales; or None, an error message)."""
        messages, group.candidates = in_rank_order(group.candidates), []
        try:
            return group.combiner.draw_index(group.step, self._leader_of(group.step), messages), None
        except ValueError as e:
            return np.zeros(0, np.float32), "rejected the workers' candidate indices: %s" % e

    def _publish_index(self, group):
        out = self.values_np[group.keys["index"]]
        try:
            fields = group.fmt.read("INDEX", group.lead, group.step)
        except ValueError as e:
            out[:] = 0
            group.index = None
            return "rejected the leader's indices: %s" % e
        group.index = fields
        out[:] = group.lead
        return None

    def _finish(self, group):
        """Combines a complete step into the 'result' value; returns an error message or None."""
        # in rank order (the sender's rank is in each header; the combiner checks it)
        messages = in_rank_order(group.all)
        lead, group.all, group.lead = group.lead, [], None
        out = self.values_np[group.keys["result"]]
        try:
            if self.options.index_first(self.phase, group.step) and group.index is None:
                raise ValueError("the leader's indices of this step were rejected")
            if self.options.trains(self.phase, group.step):
                out[:] = group.combiner.combine_train(group.step, self._leader_of(group.step), group.index, messages)
                if self.phase == LGC:  # fine-tuned: the workers pull the new weights after this step
                    self.values_np[group.keys["weights"]][:] = group.combiner.weights()
            elif self.options.codes == "own":
                out[:] = group.combiner.combine_own(group.step, self._leader_of(group.step), group.index, messages)
            else:
                out[:] = group.combiner.combine_lgc(group.step, self._leader_of(group.step), lead, messages)
            return None
        except ValueError as e:
            out[:] = 0
            return "rejected step %d of the coded tensors: %s; their values are unchanged this step" % (group.step, e)
        finally:
            group.step += 1

    def _leader_of(self, step):
        return self.options.leader_at(step, self.num_workers)
