"""Combine every worker's message of a step into one result (RESULT), and train the autoencoder on
what the train phase brings.  A parameter server runs one per group of coded tensors; on a ring (no
server) every worker runs one and combines the gathered messages itself.

Train phase: each worker sends its exact values at the leader's indices (VECTOR); the result is their
sum, and the vectors (each tensor's segment divided by the leader's scale) and innovation channels go
into the replay buffer for one training step.  Lgc phase on a server: the leader sends the code of its
vector (LEAD), every worker its innovation (INNOV); each worker's values are estimated by its decoder
from the leader's code and its innovation channel, times the leader's scales; with codes 'own' every
worker sends the code of its own vector at the leader's indices (CODED) and the one decoder
reconstructs each from its own code (with option signs, and from the vector's signs, which CODED
carries and the innovation channel holds; in the train phase they are read off the exact vectors).
Lgc phase on a ring:
every worker's code is summed (an allreduce); the mean decoder's estimate of the mean vector, from the
mean code and the mean innovation channel, times the leader's scales, stands for every worker's values.

A training step is queued on MXNet's engine (its loss is read only for the log), so that its
arithmetic runs beside what the caller does next.  On a server the queuing itself runs on a thread of
its own after the step's result is written, overlapping the workers' next forward and backward; the
next step waits for it, so the order (and the result) is that of training in line.  On a ring, rank 0
queues it in line: its own model's autograd runs in the same process, and MXNet's front end (autograd,
Gluon) is not thread-safe.
"""
import logging
import threading
import time

import numpy as np

from .. import checkpoint_files, plain_data
from . import vectors
from .autoencoder import Autoencoder, AutoencoderTrainer
from .wire import CorruptMessage

log = logging.getLogger("mxnet_gc.server")


class Combiner:
    """The autoencoder and the per-step combination for one server's coded tensors (WireFormat ``fmt``)."""

    def __init__(self, fmt, options, overlap=True):
        """``overlap``: train on a thread beside the caller's next step (a server), or in line (a worker)."""
        self.fmt, self.options, self.overlap = fmt, options, overlap
        self.ae = Autoencoder(fmt.num_workers, options.encoder_channels, options.latent_channels, options.seed,
                              options.codes == "own")
        self.trainer = AutoencoderTrainer(self.ae, options.ae_lr, options.ae_replay, options.code_weight,
                                         options.ae_window, options.seed)
        self.copy_errors = []  # train phase: how far the leader's vector is from each other worker's
        self.train_seconds = []  # per training step, the time to queue it
        self.losses = []  # the last training step's loss (an NDArray scalar, computed on MXNet's engine)
        self._training = None  # the thread of the last training step

    def check_step(self, kind, messages, step):
        """Reads each worker's message; raises CorruptMessage unless all are ``kind`` of ``step``."""
        fields = []
        for rank, m in enumerate(messages):
            try:
                f = self.fmt.read(kind, m, step)
            except CorruptMessage as e:
                raise CorruptMessage("worker %d's message of step %d: %s" % (rank, step, e)) from None
            if f["rank"] != rank:
                raise CorruptMessage("a message of rank %d came from worker %d" % (f["rank"], rank))
            fields.append(f)
        return fields

    def draw_index(self, step, leader, messages):
        """With index 'union': the step's INDEX message, the set drawn from every worker's CAND (rank order)
        in the leader's scales; raises CorruptMessage for a bad candidate message."""
        fields = self.check_step("CAND", messages, step)
        indices = vectors.union(self.fmt, [f["indices"] for f in fields], leader)
        return self.fmt.index_message(step, leader, fields[leader]["scales"], indices)

    def combine_train(self, step, leader, index, messages, learn=True):
        """The RESULT of a train-phase step from the leader's INDEX fields and the workers' VECTOR messages
        (rank order); trains with ``learn`` (on a ring, only rank 0 trains)."""
        indices, scales = index["indices"], index["scales"]
        self.wait()
        fields = self.check_step("VECTOR", messages, step)
        values = [f["vector"] for f in fields]
        result = self._result(step, leader, scales, indices, fields, values, np.zeros(self.fmt.code_words, np.float32))
        if not learn:
            return result
        in_leaders = [vectors.scale_segments(self.fmt, f["vector"], scales) for f in fields]
        # each vector in the leader's scales, or with codes 'own' in its own (as the lgc phase will code it)
        own = [vectors.segment_scales(self.fmt, f["vector"]) for f in fields] if self.options.codes == "own" \
            else [scales] * len(fields)
        normalized = in_leaders if self.options.codes == "leader" else \
            [vectors.scale_segments(self.fmt, f["vector"], s) for f, s in zip(fields, own)]
        channels = [vectors.innovation_channel(self.fmt, indices, f["innov_indices"], f["innov_values"], s,
                                               vectors.signs_of(f["vector"]) if self.options.signs else None)
                    for f, s in zip(fields, own)]
        if not self.trainer.add(normalized, channels, leader):
            log.warning("lgc step %d: a worker's vector holds non-finite values; it is left out of the "
                        "autoencoder's replay buffer", step)
        if self.overlap:
            self._training = threading.Thread(target=self._train, args=(in_leaders, leader), daemon=True)
            self._training.start()
        else:
            self._train(in_leaders, leader)
        return result

    def wait(self):
        """Returns once the last training step has finished (before anything reads or changes the
        autoencoder or its buffer)."""
        if self._training is not None:
            self._training.join()
            self._training = None

    def _train(self, normalized, leader):
        """One training step, queued (on a server, from a thread of its own: the workers already have the
        step's result and compute the next step meanwhile); ``normalized``: the step's vectors in the leader's
        scales, for the log's measure of how alike they are."""
        start = time.perf_counter()
        self.losses.append(self.trainer.train_step())
        self.train_seconds.append(time.perf_counter() - start)
        others = [w for w in range(len(normalized)) if w != leader]
        self.copy_errors.append(np.mean([np.sum((normalized[leader] - normalized[w]) ** 2)
                                         / max(np.sum(normalized[w] ** 2), 1e-30) for w in others]) if others else 0)
        if self.trainer.steps % 50 == 0:
            log.info("lgc: autoencoder step %d, loss %.4f (vectors' mean square %.4f); the leader's vector as the "
                     "others' estimate: relative squared error %.3f (median of the last 50 steps); queuing a "
                     "training step %.1f ms", self.trainer.steps, self.losses[-1].asscalar(),
                     float(np.mean(np.square(normalized))), float(np.median(self.copy_errors[-50:])),
                     1e3 * float(np.mean(self.train_seconds[-50:])))
            del self.copy_errors[:-50], self.train_seconds[:-50]
        del self.losses[:-1]

    def combine_lgc(self, step, leader, lead, messages):
        """The RESULT of an lgc-phase step from the leader's LEAD and the workers' INNOV messages."""
        self.wait()
        lead = self.fmt.read("LEAD", lead, step)
        if lead["rank"] != leader:
            raise CorruptMessage("the leader of step %d is worker %d, a LEAD came from %d"
                                 % (step, leader, lead["rank"]))
        fields = self.check_step("INNOV", messages, step)
        channels = np.stack([vectors.innovation_channel(self.fmt, lead["indices"], f["innov_indices"], f["innov_values"],
                                                        lead["scales"]) for f in fields])
        decoded = self.ae.decode_every(leader, lead["code"], channels, self.fmt.padded)
        values = [vectors.scale_segments(self.fmt, d, lead["scales"], inverse=True) for d in decoded]
        return self._result(step, leader, lead["scales"], lead["indices"], fields, values, lead["code"])

    def combine_own(self, step, leader, index, messages):
        """With codes 'own': the RESULT of an lgc-phase step from the leader's INDEX fields and every worker's
        CODED message (rank order), each worker's values decoded from its own code."""
        self.wait()
        fields = self.check_step("CODED", messages, step)
        indices = index["indices"]
        channels = np.stack([vectors.innovation_channel(self.fmt, indices, f["innov_indices"], f["innov_values"],
                                                        f["scales"], f.get("signs")) for f in fields])
        decoded = self.ae.decode_own(np.stack([f["code"] for f in fields]), channels, self.fmt.padded)
        values = [vectors.scale_segments(self.fmt, d, f["scales"], inverse=True) for d, f in zip(decoded, fields)]
        return self._result(step, leader, index["scales"], indices, fields, values,
                            np.zeros(self.fmt.code_words, np.float32))

    def combine_mean(self, step, leader, index, code_sum, messages):
        """On a ring: (the RESULT of an lgc-phase step, the estimate of the mean vector at the leader's
        indices) from the leader's INDEX fields, the sum of every worker's code and the workers' INNOV
        messages (rank order).  The RESULT's code is the mean code."""
        self.wait()
        fields = self.check_step("INNOV", messages, step)
        indices, scales = index["indices"], index["scales"]
        channel = np.mean([vectors.innovation_channel(self.fmt, indices, f["innov_indices"], f["innov_values"], scales)
                           for f in fields], axis=0)
        code = (np.asarray(code_sum, np.float32) / np.float32(len(fields))).astype(np.float32)
        decoded = self.ae.decode_mean(code, channel, self.fmt.padded)
        mean = vectors.scale_segments(self.fmt, decoded, scales, inverse=True)
        return self._result(step, leader, scales, indices, fields, [mean] * len(fields), code), mean

    def _result(self, step, leader, scales, indices, fields, values, code):
        sums = np.zeros(self.fmt.K, np.float32)
        extras = []
        for f, v in zip(fields, values):
            mine, extra = vectors.applied(self.fmt, v, indices, f["innov_indices"], f["innov_values"])
            sums += mine
            extras.append(extra)
        return self.fmt.result_message(step, leader, scales, indices, sums, [f["innov_indices"] for f in fields],
                                       extras, code)

    def weights(self):
        """The autoencoder's weights (encoder, then every decoder), flat, for the workers."""
        self.wait()
        return Autoencoder.flat(self.ae.params())

    def save(self, path, step):
        """Writes the autoencoder's training state (weights, Adam's, the replay buffer) and the group's next
        ``step`` to ``path`` (arrays and JSON, checkpoint_files.write_arrays): the same file on either transport."""
        self.wait()
        state = dict(self._identity(step), trainer=self.trainer.state())
        arrays = {}
        checkpoint_files.write_arrays(path, plain_data.encode(state, arrays), arrays)

    def _identity(self, step):
        """What a saved state must share with this group to be loaded: its next step, tensors, workers,
        which decoder serves whom and whether its decoders read the vectors' signs (option signs: trained
        on channels that hold them)."""
        return {"step": step, "sizes": self.fmt.sizes, "num_workers": self.fmt.num_workers,
                "decoders": "own codes" if self.ae.own_codes else "by position after the leader",
                "signs": self.options.signs}

    def load(self, path, step):
        """Restores ``save``'s state, checked against this group's tensors, workers and next ``step``."""
        meta, arrays = checkpoint_files.read_arrays(path)
        state = plain_data.decode(meta, arrays)
        differ = ["%s %s there, %s here" % (k, state.get(k), v) for k, v in self._identity(step).items()
                  if state.get(k) != v]
        if differ:
            raise ValueError("lgc: %s does not match this job: %s" % (path, "; ".join(differ)))
        self.wait()
        self.trainer.load_state(state["trainer"])
