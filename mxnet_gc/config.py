"""Every setting mxnet_gc reads from the environment, parsed in one place (docs/configuration.md).

| variable | default | meaning |
|---|---|---|
| MXNET_GC_BIGARRAY_BOUND | 1000000 | the dist store cuts a tensor of at least this many values into parts of at most that many; at least the number of servers, the same on every worker |
| MXNET_GC_NUM_THREADS | OMP_NUM_THREADS, else all cores | threads of the C++ kernels, at most MAX_THREADS (1024) |
| MXNET_GC_ISA | the best this CPU runs | kernel copy: baseline, x86-64-v3 (AVX2) or x86-64-v4 (AVX-512) |
| MXNET_GC_NETNS | mxgc | name prefix of the network namespaces of tools/netns_cluster.py |
| MXNET_GC_COLLECTIVE_TIMEOUT | 120 | seconds the horovod store waits for a collective before it fails every worker, naming the keys some worker did not push |
| MXNET_GC_ALLTOALL | rounds | the horovod store's compressed allreduce: its parts of 64 KiB and more (3 or more workers) in `rounds` (MXNET_GC_ALLTOALL_PEERS peers each), or by one alltoall to every peer `at_once` |
| MXNET_GC_ALLTOALL_PEERS | 1 | the peers a worker sends parts to in each round (MXNET_GC_ALLTOALL=rounds): ceil((W - 1) / K) rounds of K flows into each link |
| MXNET_GC_PULL_STATS | 0 (off) | servers log what each message's compressed pull carries every this many rounds |
| MXNET_GC_RANK_LINE | (set by the launcher) | a line the dist store prints, with its rank, when it starts (the launcher then labels the worker's output by rank) |
| MXNET_GC_END_LINE | (set by the launcher) | a line the dist store prints once it has passed the job's last barrier (a worker that exits without it left the job early) |
| MXNET_GC_JOB_SECRET | (set by the launcher) | the job's secret (hex), the same in every process: workers sign their commands to the servers with it, servers prove with it that they are the job's (docs/reliability.md) |
| MXNET_GC_JOB_SECRET_FILE | (set by the launcher over ssh) | a file holding the job's secret, where MXNET_GC_JOB_SECRET is not set (so that it is on no command line) |
| MXNET_GC_JOIN_TIMEOUT | 60 | seconds a server waits, after the first worker joined, for every worker to join with the job's secret before it ends the job |
| MXNET_GC_CHECKPOINT_DIR | the working directory | the folder (with its subfolders) in which servers write and read checkpoint files; a command naming a file elsewhere is refused |
| HOROVOD_GLOO_RENDEZVOUS_ADDR, _PORT, HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_ELASTIC, HOROVOD_GLOO_TIMEOUT_SECONDS | (set by horovodrun) | Horovod's: the horovod store waits on horovodrun's rendezvous server for every rank (static gloo jobs) for the gloo timeout (30 s) before hvd.init |
| OMP_NUM_THREADS | (unset) | OpenMP's, the kernels' thread count (at most 1024) when MXNET_GC_NUM_THREADS is unset |
| DMLC_ROLE, DMLC_NUM_SERVER, DMLC_NUM_WORKER | (set by the launcher) | ps-lite's: this process's role and the job's size |
| MXNET_EXEC_BULK_EXEC_TRAIN | MXNet's (1) | MXNet's, read when it starts; pipelined merging overlaps more with 0 (the trainer warns) |

mxnet_gc also sets one variable of MXNet's, MXNET_KVSTORE_BIGARRAY_BOUND, while the dist store creates
MXNet's store (so that MXNet never splits a key itself; mxnet_gc places the parts).  Importing this
module imports nothing else, so it can run before MXNet starts.
"""
import dataclasses
import os

ISAS = ("baseline", "x86-64-v3", "x86-64-v4")
ALLTOALLS = ("rounds", "at_once")
# The most kernel threads accepted (MXNET_GC_NUM_THREADS, OMP_NUM_THREADS, set_num_threads).  libgomp has no
# cap of its own (OMP_THREAD_LIMIT is unlimited by default): it aborts the process ("Thread creation failed")
# when the system refuses a thread (ulimit -u, kernel.threads-max, a pids cgroup, memory for stacks), at the
# first encode large enough to run in parallel.  100000 did so on 2 cores with ulimit -u 96367; 30000 ran, 240
# times slower than 64.  Threads beyond the cores only add cost: 1024 is above the core count of any machine
# in use, and far below those limits even with a team per MXNet engine thread and per process of a job.
MAX_THREADS = 1024


def _number(environ, name, default, kind, low):
    """The variable ``name`` as ``kind`` (int or float), finite and at least ``low`` (above it, for
    float), or ``default`` when unset."""
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError("%s must be %s, got %r" % (name, "an integer" if kind is int else "a number", raw)) from None
    if value < low or (kind is float and not low < value < float("inf")):
        raise ValueError("%s must be %s %s, got %r" % (name, ">=" if kind is int else "finite and >", low, raw))
    return value


def _int(environ, name, default, low):
    return _number(environ, name, default, int, low)


def _threads(environ):
    """The kernels' thread count: MXNET_GC_NUM_THREADS, else OMP_NUM_THREADS, else 0 (all cores); at most
    MAX_THREADS."""
    name = "MXNET_GC_NUM_THREADS" if environ.get("MXNET_GC_NUM_THREADS") else "OMP_NUM_THREADS"
    value = _int(environ, name, 0, 0)
    if value > MAX_THREADS:
        raise ValueError("%s must be at most %d (libgomp aborts the process when the system refuses a thread, and "
                         "threads beyond the cores only slow the kernels), got %d" % (name, MAX_THREADS, value))
    return value


def _bound(environ, num_servers):
    """MXNET_GC_BIGARRAY_BOUND, at least ``num_servers``: a key of at least the bound is cut into at least
    one part per server (kvstore/layout.py), so a bound below the servers would make empty parts."""
    bound = _int(environ, "MXNET_GC_BIGARRAY_BOUND", 1_000_000, 1)
    if bound < num_servers:
        raise ValueError("MXNET_GC_BIGARRAY_BOUND=%d is below the number of servers (DMLC_NUM_SERVER=%d): a tensor "
                         "of at least that many values is cut into at least one part per server, so some parts "
                         "would be empty; set it to at least %d" % (bound, num_servers, num_servers))
    return bound


def _secret(environ):
    """The job's secret: MXNET_GC_JOB_SECRET, else the content of MXNET_GC_JOB_SECRET_FILE, else ''."""
    secret = environ.get("MXNET_GC_JOB_SECRET", "")
    path = environ.get("MXNET_GC_JOB_SECRET_FILE", "")
    if not secret and path:
        try:
            with open(path) as f:
                secret = f.read().strip()
        except OSError as e:
            raise ValueError("MXNET_GC_JOB_SECRET_FILE=%s cannot be read: %s" % (path, e.strerror or e)) from None
    if secret and len(secret) < 32:
        raise ValueError("the job's secret (MXNET_GC_JOB_SECRET%s) must be at least 32 characters (a random "
                         "token, such as python -c 'import secrets; print(secrets.token_hex(32))'), got %d"
                         % ("_FILE" if path and not environ.get("MXNET_GC_JOB_SECRET") else "", len(secret)))
    return secret


def _rendezvous(environ):
    """horovodrun --gloo's rendezvous server (http://ADDR:PORT), or '' outside a static gloo job."""
    address, port = environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR"), environ.get("HOROVOD_GLOO_RENDEZVOUS_PORT")
    return "http://%s:%s" % (address, port) if address and port and environ.get("HOROVOD_ELASTIC") != "1" else ""


@dataclasses.dataclass(frozen=True)
class Settings:
    """The parsed environment of this process."""

    bigarray_bound: int
    num_threads: int  # 0: the C++ library's default (all cores)
    isa: str  # '' for the best the CPU runs
    netns: str
    role: str
    num_servers: int
    num_workers: int
    bulk_exec_train: str
    rank_line: str  # '' when not under mxnet_gc's launcher
    end_line: str
    collective_timeout: float
    pull_stats: int  # rounds between two samples of a compressed pull's norms (0: none)
    alltoall: str  # 'rounds' or 'at_once'
    alltoall_peers: int  # peers per round with 'rounds'
    job_secret: str  # '' when neither variable gives one
    join_timeout: float
    checkpoint_dir: str  # absolute
    rendezvous: str  # horovodrun --gloo's rendezvous server, http://ADDR:PORT ('' outside a static gloo job)
    horovod_rank: int
    horovod_size: int
    gloo_timeout: float

    @classmethod
    def from_environ(cls, environ):
        isa = environ.get("MXNET_GC_ISA", "")
        if isa and isa not in ISAS:
            raise ValueError("MXNET_GC_ISA must be one of %s, got %r" % (", ".join(ISAS), isa))
        alltoall = environ.get("MXNET_GC_ALLTOALL", "") or "rounds"
        if alltoall not in ALLTOALLS:
            raise ValueError("MXNET_GC_ALLTOALL must be one of %s, got %r" % (", ".join(ALLTOALLS), alltoall))
        num_servers = _int(environ, "DMLC_NUM_SERVER", 0, 0)
        return cls(bigarray_bound=_bound(environ, num_servers), num_threads=_threads(environ),
                   isa=isa, netns=environ.get("MXNET_GC_NETNS", "mxgc"), role=environ.get("DMLC_ROLE", ""),
                   num_servers=num_servers,
                   num_workers=_int(environ, "DMLC_NUM_WORKER", 0, 0),
                   bulk_exec_train=environ.get("MXNET_EXEC_BULK_EXEC_TRAIN", "1"),
                   rank_line=environ.get("MXNET_GC_RANK_LINE", ""), end_line=environ.get("MXNET_GC_END_LINE", ""),
                   collective_timeout=_number(environ, "MXNET_GC_COLLECTIVE_TIMEOUT", 120.0, float, 0),
                   pull_stats=_int(environ, "MXNET_GC_PULL_STATS", 0, 0), alltoall=alltoall,
                   alltoall_peers=_int(environ, "MXNET_GC_ALLTOALL_PEERS", 1, 1),
                   job_secret=_secret(environ), join_timeout=_number(environ, "MXNET_GC_JOIN_TIMEOUT", 60.0, float, 0),
                   checkpoint_dir=os.path.realpath(environ.get("MXNET_GC_CHECKPOINT_DIR") or os.getcwd()),
                   rendezvous=_rendezvous(environ), horovod_rank=_int(environ, "HOROVOD_RANK", 0, 0),
                   horovod_size=_int(environ, "HOROVOD_SIZE", 0, 0),
                   gloo_timeout=_number(environ, "HOROVOD_GLOO_TIMEOUT_SECONDS", 30.0, float, 0))

    def shared(self):
        """The settings every worker of a parameter-server job must give alike, by variable (the key layout
        follows them); the dist store compares them across workers when it starts."""
        return {"MXNET_GC_BIGARRAY_BOUND": self.bigarray_bound}

    def pipelining_problems(self):
        """What in MXNet's settings keeps communication from overlapping backward (messages).

        MXNet reads them when it starts, so they must be set before its first operation.  (mxnet_gc's own
        engine operations need none of MXNet's temporary-space resources: MXNET_CPU_TEMP_COPY does not
        matter.)
        """
        problems = []
        if self.bulk_exec_train != "0":
            problems.append("MXNet runs backward in bulks of operations, so gradients become ready together and "
                            "pipelining overlaps little: set MXNET_EXEC_BULK_EXEC_TRAIN=0 before the first MXNet "
                            "operation")
        return problems


_settings = None


def settings():
    """This process's settings, parsed from the environment once."""
    global _settings
    if _settings is None:
        _settings = Settings.from_environ(os.environ)
    return _settings


def kvstore_environ(bound):
    """A context for creating MXNet's dist store with its own key splitting off: sets
    MXNET_KVSTORE_BIGARRAY_BOUND to ``bound`` and restores it after."""
    return temporary_variable("MXNET_KVSTORE_BIGARRAY_BOUND", str(bound))


def temporary_variable(name, value):
    """A context that sets the environment variable ``name`` to ``value`` and restores it after."""
    return _TemporaryVariable(name, value)


class _TemporaryVariable:
    def __init__(self, name, value):
        self.name, self.value, self.saved = name, value, None

    def __enter__(self):
        self.saved = os.environ.get(self.name)
        os.environ[self.name] = self.value

    def __exit__(self, *exc):
        if self.saved is None:
            del os.environ[self.name]
        else:
            os.environ[self.name] = self.saved
