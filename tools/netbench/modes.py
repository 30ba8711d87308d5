"""The benchmark's modes, as data: which store and transport, which compression, which merge plan."""
import dataclasses
import json

from mxnet_gc import codecs
from mxnet_gc.kvstore.compression import store_name

RATES_BITS = {"10mbit": 10e6, "25mbit": 25e6, "100mbit": 100e6, "1gbit": 1e9, "unlimited": None}
DEFAULT_RATES = ["100mbit", "1gbit", "unlimited"]  # (10 Mbit/s on request: a dense job takes minutes a step)
TOPK = {"type": "layerwise_topk", "density": 0.01, "compressed_pull": True, "warmup_steps": 0}
# (warmup_steps 0: the benchmark times the codecs from the first step; training from scratch keeps their
# default dense warm-up)
FOUR_BIT = {"type": "4bit", "thresholds": "medium", "warmup_steps": 0, "compressed_pull": False}
CALIBRATION_STEPS = 3  # dense steps of 4bit-groups before its groups are chosen (part of the warm-up)
# LGC with its phases shortened for a benchmark: no dense phase and no ramp (their float32 and 25%-dense
# pushes would take minutes a step on a 10 Mbit/s link), the autoencoder's training part of the warm-up;
# the timed steps are coded steps
LGC = {"type": "lgc", "density": 1e-3, "dense_steps": 0, "ramp_steps": 0, "ae_steps": 8}


@dataclasses.dataclass(frozen=True)
class Mode:
    """``store``: 'mxnet' (MXNet's own dist_sync store and servers, gluon.Trainer) or 'gc' (mxnet_gc's,
    mxnet_gc.gluon.Trainer); ``transport``: 'ps' (a parameter server) or 'horovod'; ``merge``: the
    trainer's merge option ('fixed' is the --bucket-bytes one), None for its default."""

    name: str
    description: str
    store: str = "gc"
    transport: str = "ps"
    compression: dict = None
    groups: bool = False
    merge: object = None
    pipeline: bool = True
    mxnet_defaults: bool = False  # a merge plan run with MXNet's default settings
    env: tuple = ()  # (name, value) pairs of mxnet_gc settings for the job's processes
    classic: bool = False  # MXNet's own gluon.Trainer on mxnet_gc's store, the optimizer on the servers

    @property
    def sparse(self):
        """Layer-wise top-k with a merge plan."""
        return self.merge is not None

    @property
    def unbulked(self):
        """Run with backward unbulked and two engine threads, so that encodes overlap it."""
        return self.sparse and not self.mxnet_defaults

    @property
    def horovod(self):
        return self.transport == "horovod"


DENSE_MODES = [
    Mode("none", "MXNet's own dist_sync store and server, uncompressed (gluon.Trainer)", store="mxnet"),
    Mode("mxnet-2bit", "MXNet's own dist_sync store and server, MXNet's built-in 2bit (gluon.Trainer)",
         store="mxnet", compression={"type": "2bit", "threshold": 0.5}),
    Mode("gc-none", "mxnet_gc's store and server, uncompressed (mxnet_gc.gluon.Trainer, shared messages)",
         compression={"type": "none"}),
    Mode("gc_2bit", "mxnet_gc's store, its 2bit codec", compression={"type": "gc_2bit", "threshold": 0.5, "warmup_steps": 0}),
    Mode("4bit", "mxnet_gc's store, 4bit (group 'medium' for every layer)", compression=FOUR_BIT),
    Mode("4bit-groups", "4bit with a threshold group per layer, chosen during dense calibration steps",
         compression=FOUR_BIT, groups=True),
    Mode("4bit-cpull", "4bit, and the servers send the sum 4bit-encoded too (compressed pull; the optimizer "
         "then runs on the workers, in the others on the servers)", compression=dict(FOUR_BIT, compressed_pull=True)),
]
# A Module.fit-shaped job: MXNet's own gluon.Trainer (as Module.fit, it pushes gradients and pulls the weights the
# servers updated with SGD, momentum 0.9), the compression set on mxnet_gc's store; the baseline is "none"
CLASSIC_MODES = [
    Mode("classic-2bit", "MXNet's built-in 2bit (MXNet's own kernels) on mxnet_gc's store, the optimizer on the "
         "servers, float32 weight pulls (MXNet's own store refuses compression when the trainer pushes and pulls "
         "together)", compression={"type": "2bit", "threshold": 0.5}, classic=True),
    Mode("classic-4bit", "4bit pushes on mxnet_gc's store, the optimizer on the servers, float32 weight pulls",
         compression=FOUR_BIT, classic=True),
    Mode("classic-4bit-cpull", "4bit both ways: 4bit pushes, and the servers send the difference between their "
         "weights and the workers' 4bit-encoded ('compressed_pull' with the optimizer on the servers; its levels "
         "fitted in 2 dense steps)", compression=dict(FOUR_BIT, compressed_pull=True, warmup_steps=2), classic=True),
]
SPARSE_MODES = [
    Mode("topk-layerwise", "every layer its own message, sent after the whole backward", compression=TOPK,
         merge="layerwise", pipeline=False),
    Mode("topk-one", "one message for all layers", compression=TOPK, merge="one"),
    Mode("topk-merged", "the DP merge plan, sent after the whole backward", compression=TOPK, merge="dp",
         pipeline=False),
    Mode("topk-pipelined", "the DP merge plan, each message sent as soon as its gradients are ready",
         compression=TOPK, merge="dp"),
    Mode("topk-pipelined-defaults", "topk-pipelined with MXNet's default settings (backward in bulks of 15 "
         "operations, one engine thread)", compression=TOPK, merge="dp", mxnet_defaults=True),
    Mode("topk-fixed", "consecutive layers filled into messages of at least --bucket-bytes payload bytes, each sent "
         "as soon as its gradients are ready", compression=TOPK, merge="fixed"),
]
LGC_MODES = [
    Mode("topk-1e-3", "layer-wise top-k at density 1e-3 with sparse pulls, in the default messages (what LGC "
         "compares with: the coded tensors' top-k, the others dense)",
         compression={"type": "layerwise_topk", "density": 1e-3, "compressed_pull": True, "warmup_steps": 0}),
    Mode("lgc", "learned gradient compression at density 1e-3, timed in its lgc phase (on the parameter server "
         "LGC-PS: the leader's code, everyone's innovation; on Horovod LGC-RAR: the codes summed by an allreduce)",
         compression=LGC),
]
HOROVOD_PREFIX = "hvd-"
HOROVOD_MODES = [dataclasses.replace(m, name=HOROVOD_PREFIX + m.name, transport="horovod",
                                     description=m.description + ", on mxnet_gc's horovod store")
                 for m in [DENSE_MODES[2]] + SPARSE_MODES + LGC_MODES] + [
    Mode(HOROVOD_PREFIX + "4bit", "4bit (group 'medium') on mxnet_gc's horovod store: every worker's payload to every "
         "worker by allgather", transport="horovod", compression=FOUR_BIT),
    Mode(HOROVOD_PREFIX + "4bit-cpull", "4bit on mxnet_gc's horovod store by the compressed allreduce: the payloads' "
         "parts by alltoall (large ones in W - 1 pairwise rounds), each part's sum re-encoded by the worker owning "
         "it, the parts by allgather", transport="horovod", compression=dict(FOUR_BIT, compressed_pull=True)),
    Mode(HOROVOD_PREFIX + "4bit-cpull-at-once", "the same, its alltoall to every peer at once instead of W - 1 "
         "pairwise rounds (MXNET_GC_ALLTOALL=at_once)", transport="horovod",
         compression=dict(FOUR_BIT, compressed_pull=True), env=(("MXNET_GC_ALLTOALL", "at_once"),)),
    Mode(HOROVOD_PREFIX + "4bit-cpull-1mib", "the same, in messages of up to 1 MiB of float32 "
         "(MXNET_GC_HOROVOD_MESSAGE_BYTES=1048576; the default, 64 MiB, sends most models as one message)",
         transport="horovod", compression=dict(FOUR_BIT, compressed_pull=True),
         env=(("MXNET_GC_HOROVOD_MESSAGE_BYTES", str(1 << 20)),))]
# every registered codec with its class's example parameters, on both transports: a new codec is benchmarked
# with no change here
CODEC_PREFIX = "codec-"
CODEC_MODES = [Mode(CODEC_PREFIX + t, "mxnet_gc's store, the %s codec with its example parameters %s"
                    % (t, json.dumps(codecs.codec_class(t).example, sort_keys=True)),
                    compression=dict(codecs.codec_class(t).example, type=store_name(t), warmup_steps=0))
               for t in codecs.available()]
CODEC_MODES += [dataclasses.replace(m, name=HOROVOD_PREFIX + m.name, transport="horovod",
                                    description=m.description + ", on mxnet_gc's horovod store") for m in CODEC_MODES]
MODES = {m.name: m for m in DENSE_MODES + CLASSIC_MODES + SPARSE_MODES + LGC_MODES + HOROVOD_MODES + CODEC_MODES}
DEFAULT_MODES = [m.name for m in DENSE_MODES]
