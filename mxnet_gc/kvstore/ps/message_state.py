"""What a parameter server knows of one message (ps_buffers.py's ``Buffers.describe``): its segments' codecs
and message plans, the accumulator of the round's pushes and their count, the residual of a compressed
pull and, with the optimizer on the servers, the weights' difference the workers pull."""
import mxnet as mx
import numpy as np

from ... import _mx, codecs
from ...message_plan import MessagePlan


class MessageState:
    """What a server knows of one message: its segments' codecs, the accumulator, the push count."""

    def __init__(self, desc):
        self.value_key = desc["value_key"]
        self.size = desc["size"]
        self.acc = mx.nd.zeros(self.size)
        self.acc_np = _mx.host_view(self.acc)
        self.count = 0
        self.rejected = False
        self.residual_np = None  # error feedback of the compressed pull of sums, if any
        self.gap_np = None  # compressed weight pulls: these weights minus the weights the workers hold
        self.set_layout(desc)

    def set_layout(self, desc):
        self.words = desc["words"]
        self.reduce_only = desc.get("reduce_only", False)
        self.pull_key = desc["pull_key"]
        if self.pull_key is not None and self.residual_np is None:
            self.residual_np = np.zeros(self.size, np.float32)
        if self.pull_key is None:
            self.gap_np = None  # (uncompressed pulls: the workers hold these weights)
        self.segments = [dict(seg, codec=None if seg["codec"] is None else codecs.create(seg["codec"]),
                              pull_codec=None if seg["codec"] is None else codecs.create(seg["pull_codec"]))
                         for seg in desc["segments"]]
        self.coded = self.segments[0]["codec"] is not None
        self.keys = [seg["index"] for seg in self.segments]
        # one C++ call per push decodes every segment (dense: copies or adds)
        self.plan = MessagePlan([(seg["codec"], seg["size"], seg["offset"], 0,
                                  seg["payload_offset"] if self.coded else seg["offset"]) for seg in self.segments])
        self.pull_plan = None if self.pull_key is None else \
            MessagePlan([(seg["pull_codec"], seg["size"], seg["offset"], 0, seg["pull_offset"]) for seg in self.segments])

    def add(self, recv):
        """Adds one worker's push (dense float32 values, or payloads) to the accumulator, at once."""
        self.plan.decode_now(recv, self.acc_np, add=self.count > 0)

    def encode_sum(self, out, monitor):
        """Re-encodes the accumulated sum into ``out`` (a payload), with the server's own residual; a due
        ``monitor`` (pull_monitor.py) records what the pull carries."""
        before = self.acc_np + self.residual_np if monitor.due(self) else None
        self.pull_plan.encode_sum_now(self.acc_np, self.residual_np, out)
        if before is not None:
            monitor.record(self, before)


    def start_difference(self, weights):
        """Before a round's update of ``weights`` (compressed weight pulls, kvstore/ps/weight_pulls.py): the gap
        becomes minus the workers' weights, so that after the update it adds up to the difference."""
        if self.gap_np is None:
            self.gap_np = np.zeros(self.size, np.float32)  # (the workers' last pull was whole: they hold these)
        self.gap_np -= weights

    def encode_difference(self, weights, out, monitor):
        """After the update: encodes the difference between ``weights`` and the workers' into ``out`` (a
        payload); what the encoding leaves is the gap, sent with the next difference."""
        before = weights + self.gap_np if monitor.due(self) else None
        self.pull_plan.encode_sum_now(weights, self.gap_np, out)
        if before is not None:
            monitor.record(self, before)

    def segment_gaps(self):
        """{segment id: its part of the gap} (for checkpoints; empty without compressed weight pulls)."""
        if self.gap_np is None:
            return {}
        return {seg["id"]: self.gap_np[seg["offset"]:seg["offset"] + seg["size"]].copy() for seg in self.segments}

    def restore_gaps(self, gaps, weights):
        """Takes the segments' gaps of a checkpoint back, adding them to ``weights`` (which hold the workers'
        weights after a resume): both then are where they were when the checkpoint was saved."""
        for seg in self.segments:
            gap = gaps.get(seg["id"])
            if gap is not None and gap.size == seg["size"]:
                if self.gap_np is None:
                    self.gap_np = np.zeros(self.size, np.float32)
                part = slice(seg["offset"], seg["offset"] + seg["size"])
                self.gap_np[part] = gap
                weights[part] += gap
