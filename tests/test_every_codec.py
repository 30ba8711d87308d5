"""Every registered codec, with its class's example parameters, on real jobs of both transports (2 workers;
the parameter server with 1 server, Horovod's ring): what each worker pulls is, bit for bit, the sum in rank
order of every worker's payload decoded, the payloads made by the codec's own operators with each worker's
residual carried from step to step; and each worker's residual file holds that residual.  A new codec is
run here with no change (dist/job.py's every_codec)."""
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import mxnet_gc
from mxnet_gc import checkpoint_files
from mxnet_gc.kvstore import residual_file
from dist import codec_worker
from dist.job import HERE, LAUNCH, ROOT, every_codec, output_of
from test_horovod import horovodrun

pytestmark = pytest.mark.job
WORKERS = 2


def expected(kind):
    """({'<key>/<step>': the pulled sum}, {(rank, key): the residual after the last step}) of codec ``kind``."""
    codec = mxnet_gc.codecs.create(every_codec()[kind])
    keys, shapes = codec_worker.keys_of(kind), list(codec_worker.SHAPES.values())
    states = {(r, k): codec.new_residual(s) for r in range(WORKERS) for k, s in zip(keys, shapes)}
    pulled = {}
    for step in range(codec_worker.STEPS):
        grads = [codec_worker.gradients(kind, r, step) for r in range(WORKERS)]
        for i, (k, s) in enumerate(zip(keys, shapes)):
            total = mx.nd.zeros(s)
            for r in range(WORKERS):
                codec.decode_add(codec.encode(mx.nd.array(grads[r][i]), states[r, k]), total)
            pulled["%s/%d" % (k, step)] = total.asnumpy()
    return pulled, {rk: state.asnumpy().reshape(-1) for rk, state in states.items()}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """{transport: its output folder} after a job of each."""
    out = {}
    for transport in ("dist_sync", "horovod"):
        folder = tmp_path_factory.mktemp(transport)
        script = [sys.executable, os.path.join(HERE, "codec_worker.py"), transport, str(folder)]
        if transport == "horovod":
            proc = horovodrun("codec_worker.py", transport, folder, np_=WORKERS, timeout=240)
        else:
            proc = subprocess.run([sys.executable, LAUNCH, "-n", str(WORKERS), "-s", "1", "--timeout", "200"] + script,
                                  cwd=ROOT, capture_output=True, text=True, timeout=260)
        assert proc.returncode == 0, output_of(proc, tail=4000)
        out[transport] = folder
    return out


@pytest.mark.parametrize("transport", ["dist_sync", "horovod"])
@pytest.mark.parametrize("kind", sorted(every_codec()))
def test_every_codec_sums_and_keeps_its_residuals_on_both_transports(jobs, transport, kind):
    pulled, residuals = expected(kind)
    for rank in range(WORKERS):
        with np.load(jobs[transport] / ("rank%d.npz" % rank)) as saved:
            for name, want in pulled.items():
                np.testing.assert_array_equal(saved[name], want, err_msg="rank %d, %s" % (rank, name))
        _, arrays = checkpoint_files.read_arrays(str(jobs[transport] / ("%s.rank%d.residuals" % (kind, rank))))
        for key in codec_worker.keys_of(kind):
            assert residual_file.chunk_name(key, 1) not in arrays  # (one chunk a key)
            np.testing.assert_array_equal(arrays[residual_file.chunk_name(key, 0)].reshape(-1), residuals[rank, key])
    # the codec compressed: what it did not send yet is in the residuals
    assert any(np.abs(r).max() > 0 for r in residuals.values())
