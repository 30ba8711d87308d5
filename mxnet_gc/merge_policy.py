"""Which parameters share a message: the Gluon trainer's ``merge`` option, one mechanism on both stores.

- ``None`` (the default): consecutive parameters (in backward's order) fill messages of up to the
  store's ``message_bytes`` of float32 values (1 MiB on the parameter server, 64 MiB on Horovod),
  fixed when the store is initialized; fewer, larger messages cost less per step than one per parameter.
- ``'layerwise'`` (each parameter alone), ``'one'`` (one message), an int (consecutive parameters
  filling messages of that many payload bytes) or ``'dp'`` (the dynamic program of merge_planner.py):
  a plan made once the compression runs, from what the schedule's 'profile' phase measured
  (profiling.py), with the payload sizes of the codec that runs; the store then regroups its messages.
  These need the optimizer on the workers (update_on_kvstore=False): the servers' optimizer states
  belong to the messages of init.
"""
import dataclasses

from . import merge_planner

STRATEGIES = ("dp", "layerwise", "one")


class MergePolicy:
    """The merge option, the groups at init, and the plan made after profiling (``plan``)."""

    def __init__(self, merge=None):
        if merge is not None and not (merge in STRATEGIES or
                                      (isinstance(merge, int) and not isinstance(merge, bool) and merge > 0)):
            raise ValueError("merge must be 'dp', 'layerwise', 'one' or a bucket size in bytes > 0, got %r" % (merge,))
        self.option = merge
        self.plan = None

    @property
    def planned(self):
        """True when the messages follow a plan made after the profile phase."""
        return self.option is not None

    def initial_groups(self, keys, sizes, max_bytes):
        """Groups of ``keys`` (in backward's order, with their sizes in values) for the store's init; by
        default, messages of up to ``max_bytes`` of float32 values."""
        if self.planned:
            return [[k] for k in keys]
        return fixed_groups(keys, sizes, max_bytes)

    def make_plan(self, layers, cost):
        """The plan of this policy for ``layers`` (merge_planner.Layer, in backward's order)."""
        strategy = "fixed" if isinstance(self.option, int) else self.option
        self.plan = merge_planner.make_plan(strategy, layers, cost, bucket_bytes=self.option)
        return self.plan

    def state_dict(self):
        return {"merge": self.option, "plan": self.plan and dataclasses.asdict(self.plan)}

    def load_state_dict(self, state):
        """Takes the saved plan when the option is the same (a resumed job then does not profile again)."""
        if state["plan"] and state["merge"] == self.option:
            self.plan = merge_planner.Plan(**state["plan"])


def fixed_groups(keys, sizes, max_bytes):
    """Consecutive ``keys`` (with their sizes in values) in groups of at most ``max_bytes`` of float32
    (a larger key alone)."""
    groups, size = [], 0
    for key, n in zip(keys, sizes):
        if groups and size + 4 * n <= max_bytes:
            groups[-1].append(key)
            size += 4 * n
        else:
            groups.append([key])
            size = 4 * n
    return groups
