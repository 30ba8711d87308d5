"""The dist store's pull: the pushed messages pulled in stages, a barrier each (pull_stages.py), their
values decoded or copied into the outputs by engine operations, the servers' status checked with a
round's last values, and LGC's rounds' results pulled with the last stage."""
import mxnet as mx

from ... import _mx
from .pull_stages import stages as pull_stages


def _private(arrays, key, shape):
    """``arrays[key]``, made (zeros of ``shape``) the first time."""
    if key not in arrays:
        arrays[key] = mx.nd.zeros(shape)
    return arrays[key]


class StagedPulls:
    """DistSyncStore's part of a pull (a part of the class: it reads the store's port, layout, buffers, the
    pushes not yet pulled and the arrays the next push waits for, set by DistSyncStore.__init__)."""

    def _pulls_need_push(self):
        """(the servers' sums need a push each step; weights the servers update may be read at any time)"""
        return not (self.asynchronous or self._optimizer_on_servers)

    def _receive(self, targets, keys, method_step, priority):
        """Writes each key's value (the summed gradients, or the weight) into its ``targets``.

        After pushes, a pull waits until every worker's pushes have been summed: the servers answer a
        push at once and a pull with what they hold, so a barrier tells when the round is complete.
        The pushed messages are pulled in stages, a barrier each, in push order (pull_stages.py): early
        messages come back while later ones are still being pushed.
        With ``set_pull_each_message(True)`` (the Gluon trainer's, for a pipelined merge plan) every
        message is a stage.  Every worker must pull the same keys.  dist_async: no barrier.
        """
        pushed, self._pushed = self._pushed, []
        coded = method_step is not None and method_step.rounds  # the rounds' results come with the last stage
        # Weights (pulled before any push, or updated on the servers) land in a private array first, then
        # are copied whole into the outputs: an inference-mode forward leaves MKL-DNN's own layout in
        # weight arrays, which cannot be written through a flat view.  Summed gradients are pulled
        # straight into the outputs (MXNet writes weight gradients in its default layout).
        staged = self._optimizer_on_servers or not (pushed or coded)
        before = self._weights_before(targets, pushed)
        dests = {k: _private(self._staging, k, self._shapes[k]) if staged else t[0] for k, t in targets.items()}
        messages = self._layout.messages_of(keys)
        stages = pull_stages(pushed, messages, self._pull_each_message, self.asynchronous, self._stage_bytes)
        self._send(through=stages[0][0])
        direct = set()
        for i, (arrays, stage) in enumerate(stages):
            for array in arrays:
                _mx.wait_to_write(array)
            last = i == len(stages) - 1
            if (arrays or (last and coded and not pushed)) and not self.asynchronous:
                self._port.barrier()
            # the servers' status comes with a round's last values
            direct |= self._pull_messages(stage, dests, (bool(pushed) or coded) and last, priority, coded and last)
            if not last:  # the next stage's pushes go out behind this stage's pull requests
                self._send(through=stages[i + 1][0])
        self._queue.pulled()
        if pushed or coded:
            self._port.check()
        if method_step is not None:
            self._end_method_step(dests)
        for k, previous in before.items():
            self._weight_changes.observe(k, previous, dests[k])
        for k, t in targets.items():
            for extra in (t if staged else t[1:]):
                dests[k].copyto(extra)
            if staged:  # the next push waits for this pull (see push) through the private array
                self._pulled.append(dests[k])
            elif k in direct:
                # ... and here through a one-value copy of what it wrote, not through the output, which
                # backward may already be writing again.
                token = _private(self._tokens, k, (1,))
                t[0].reshape(-1)[0:1].copyto(token)
                self._pulled.append(token)

    def _pull_messages(self, messages, dests, status, priority, lgc_results=False):
        """Pulls ``messages`` (and the servers' status, and LGC's results) into ``dests`` (key -> array),
        asynchronously; returns the keys pulled straight into their arrays (the others are decoded or
        copied by one engine operation per message, which writes the message's token)."""
        pull_keys, pull_outs, decodes, direct = [], [], [], set()
        for m in messages:
            outputs, buffers = [dests.get(c.key) for c in m.chunks], self._buffers[m]
            if buffers.pull_key is not None and m.rounds:  # compressed: the servers' re-encoded sum, or weights' difference
                difference = self._optimizer_on_servers
                if difference and self._pulled_rounds.get(m) == m.rounds:
                    continue  # (no push since its last pull: the weights this worker holds are as new as it gets)
                self._pulled_rounds[m] = m.rounds
                pull_keys.append(buffers.pull_key)
                pull_outs.append(buffers.pulled)
                decodes.append((self._plans[m].pull, buffers.pulled, outputs, buffers.token, difference))
            elif len(m.chunks) == 1:
                c = m.chunks[0]
                pull_keys.append(buffers.value_key)
                pull_outs.append(dests[c.key].reshape(-1)[c.begin:c.end])
                direct.add(c.key)
            else:  # into the message's buffer, then each wanted key's segment into its output
                pull_keys.append(buffers.value_key)
                pull_outs.append(buffers.recv)
                decodes.append((self._plans[m].values, buffers.recv, outputs, buffers.token, False))
        if status:
            pull_keys += self._port.status[0]
            pull_outs += self._port.status[1]
        if lgc_results:
            results = self._method.rounds.pull_keys()
            pull_keys += results[0]
            pull_outs += results[1]
        if pull_keys:
            self._port.pull(pull_keys, pull_outs, priority=priority)
        for plan, payload, outputs, token, difference in decodes:
            plan.push_decode(payload, outputs, token, priority=priority, accumulate=difference)
            self._decoding.append(plan)
            self._pulled.append(token)
        return direct
