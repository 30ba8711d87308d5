"""The server process of the compressed dist store: MXNet's parameter server with mxnet_gc's updater.

Runs inside MXNet's own parameter server (ps-lite), created as 'dist_async' so that its updater is
called for each worker's push; what the updater and the workers' commands do is in aggregator.py.
Started by ``python -m mxnet_gc.kvstore.ps.server``; the launcher runs it through server_start.py.
"""
import logging
import sys

import mxnet as mx

from ... import _mx, config
from .aggregator import Aggregator

log = logging.getLogger("mxnet_gc.server")


class CompressedServer(_mx.ServerBase):
    """mxnet_gc's parameter server: MXNet's server whose updater and commands go to an Aggregator."""

    def __init__(self):
        super().__init__(mx.kv.create("dist_async"))
        self.aggregator = None  # made at the first command: the server's rank exists once ps-lite runs

    def command_handler(self):
        def handle(cmd_id, body, _):
            if self.aggregator is None:
                settings = config.settings()
                self.aggregator = Aggregator(self.kvstore.rank, settings.num_servers, settings.num_workers,
                                             settings.job_secret, settings.checkpoint_dir, settings.pull_stats,
                                             settings.join_timeout)
                _mx.set_server_updater(self.kvstore, self.aggregator.update)
            self.aggregator.command(cmd_id, body)
        return handle

    def run(self):
        super().run()
        a = self.aggregator  # (ps-lite has stopped: the rank comes from the aggregator)
        rank, pushes, received = (a.server_rank, a.pushes, a.bytes) if a else (-1, 0, 0)
        log.info("%d: %d pushes, %d bytes received", rank, pushes, received)


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s mxnet_gc server %(message)s", stream=sys.stderr)
    role = config.settings().role
    if role == "scheduler":
        return  # importing mxnet (above) already ran the scheduler to the end of the job
    if role != "server":
        sys.exit("mxnet_gc.kvstore.ps.server: DMLC_ROLE must be 'server' or 'scheduler', got %r" % role)
    if not config.settings().job_secret:
        sys.exit("mxnet_gc.kvstore.ps.server: no job secret (MXNET_GC_JOB_SECRET): start the job with mxnet_gc's "
                 "launcher (python -m mxnet_gc.launch ...), or set MXNET_GC_JOB_SECRET to the same random value "
                 "in every process of the job")
    CompressedServer().run()


if __name__ == "__main__":
    main()
