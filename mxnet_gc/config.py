"""Every setting mxnet_gc reads from the environment, parsed in one place: VARIABLES holds each variable, its
default (the value the parser uses) and its meaning; docs/configuration.md's table is made from it
(tools/option_tables.py).

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


class Phrase(str):
    """A default that is not one value (set by another program, or chosen at run time): shown as it is."""


# (variable or variables, default, meaning): the parser reads its defaults from here
VARIABLES = (
    ("MXNET_GC_BIGARRAY_BOUND", 1_000_000,
     "the dist store cuts a tensor of at least this many values into contiguous parts of at most this many "
     "values, as many on every server (at least one each).  At least the number of servers (a smaller one "
     "is refused when mxnet_gc starts), and the same on every worker (the dist store compares them when it "
     "starts)"),
    ("MXNET_GC_NUM_THREADS", Phrase("OMP_NUM_THREADS, else all cores"),
     "threads of the C++ kernels (`mxnet_gc.set_num_threads(n)` at run time; 0 restores this default); at "
     "most 1024: libgomp aborts the process when the system refuses a thread, and threads beyond the cores "
     "only slow the kernels"),
    ("MXNET_GC_ISA", Phrase("the best this CPU runs"),
     "the kernels' instruction-set copy: `baseline`, `x86-64-v3` (AVX2) or `x86-64-v4` (AVX-512); an "
     "unknown or unsupported one is refused at `import mxnet_gc`"),
    ("MXNET_GC_NETNS", "mxgc",
     "name prefix of the network namespaces of `tools/netns_cluster.py` (so that clusters can run side by "
     "side)"),
    ("MXNET_GC_COLLECTIVE_TIMEOUT", 120.0,
     "seconds the horovod store waits in a pull (or another collective call) for collectives to complete; "
     "then every worker it can reach fails with the keys and the ranks that did not push them "
     "([reliability.md](reliability.md)).  Set it above the longest time one worker works alone between "
     "steps (an evaluation, a checkpoint)"),
    ("MXNET_GC_ALLTOALL", "rounds",
     "how the horovod store's compressed allreduce ([kvstore.md](kvstore.md#the-compressed-allreduce-"
     "compressed_pull-true-2bit-and-4bit)) exchanges parts of 64 KiB and more with 3 or more workers: "
     "`rounds`, ceil((W - 1) / K) rounds with K flows per link each way (K: `MXNET_GC_ALLTOALL_PEERS`), or "
     "`at_once`, one alltoall (Gloo sends to every peer at once) ([the benchmark "
     "study](../lab/bench_network/findings.md#scaling-on-horovod-the-compressed-allreduce) measures both); "
     "every worker must use the same"),
    ("MXNET_GC_ALLTOALL_PEERS", 1,
     "K, the peers each worker sends parts to in each round of the compressed allreduce's `rounds`: fewer "
     "rounds (each costs a negotiation of Horovod's), more flows into each link at once; every worker must "
     "use the same"),
    ("MXNET_GC_HOROVOD_MESSAGE_BYTES", 64 << 20,
     "the horovod store's messages under the Gluon trainer's default `merge=None`: consecutive parameters (in "
     "backward's order) fill messages of up to this many bytes of float32 values.  The default, Horovod's own "
     "fusion threshold (64 MiB), sends most models as one message a step: each message costs collectives of "
     "its own (the compressed allreduce: W - 1 alltoall rounds and an allgather, each a negotiation of "
     "Horovod's), while a smaller size lets messages start during backward.  The parameter-server store fills "
     "messages of up to 1 MiB (each message goes to one server).  Every worker must use the same"),
    ("MXNET_GC_PULL_STATS", 0,
     "0: off; every this many rounds of a message, the servers log a `pull stats` line: the norms of the "
     "summed gradient, of the compressed pull and of the servers' residual, and the shares of values sent "
     "as 0 and at the top level (`mxnet_gc/kvstore/ps/pull_monitor.py`; `tools/study_accuracy.py` keeps them "
     "with the run)"),
    ("MXNET_GC_RANK_LINE", Phrase("set by the launcher for workers"),
     "the line the dist store prints with its rank when it starts (`mxnet_gc: this worker's rank is R`); "
     "the launcher labels that worker's output `[worker R]` from then on"),
    ("MXNET_GC_END_LINE", Phrase("set by the launcher for workers"),
     "the line the dist store prints (hidden by the launcher) once it has passed the job's last barrier: a "
     "worker that exits 0 without it while others run left the job early, and the launcher ends the job "
     "naming it"),
    ("MXNET_GC_JOB_SECRET", Phrase("set by the launcher"),
     "the job's secret (a random hex token, at least 32 characters), the same in every process of the job: "
     "workers sign their commands to the servers with it, servers prove with it that they are the job's "
     "([reliability.md](reliability.md#threat-model-what-mxnet_gc-trusts)).  A job started without "
     "mxnet_gc's launcher sets it in every process (`python -c 'import secrets; "
     "print(secrets.token_hex(32))'`); a dist store or server without one refuses to start"),
    ("MXNET_GC_JOB_SECRET_FILE", Phrase("set by the launcher over ssh"),
     "a file holding the job's secret (read where `MXNET_GC_JOB_SECRET` is not set): the launcher writes "
     "it with mode 0600 on each host, so that the secret is on no command line "
     "([launcher.md](launcher.md))"),
    ("MXNET_GC_JOIN_TIMEOUT", 60.0,
     "seconds a server waits, after the first worker joined, for every worker to join with the job's "
     "secret; then it ends the job, naming the ranks that did not (a process outside the job that took a "
     "worker's place, or a worker that failed before creating its store)"),
    ("MXNET_GC_CHECKPOINT_DIR", Phrase("the working directory"),
     "the folder (with its subfolders, links resolved) in which the servers write and read checkpoint "
     "files (`save_optimizer_states`, LGC's autoencoders); a command naming a file elsewhere is refused. "
     "The launcher starts every process in its own working directory; give the job another folder with "
     "`--env MXNET_GC_CHECKPOINT_DIR=/path`"),
    (("HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT", "HOROVOD_RANK", "HOROVOD_SIZE",
      "HOROVOD_ELASTIC", "HOROVOD_GLOO_TIMEOUT_SECONDS"), Phrase("set by horovodrun"),
     "Horovod's: in a static `horovodrun --gloo` job the horovod store first waits on horovodrun's "
     "rendezvous server for every rank to announce itself, for the gloo timeout (30 s by default), and "
     "names a rank that never comes (`hvd.init` would abort the process then, in C++: "
     "[reliability.md](reliability.md))"),
    ("OMP_NUM_THREADS", Phrase("(unset)"),
     "OpenMP's; the kernels' thread count (at most 1024) when `MXNET_GC_NUM_THREADS` is unset"),
    (("DMLC_ROLE", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER"), Phrase("set by the launcher"),
     "ps-lite's: this process's role and the job's size"),
    ("MXNET_EXEC_BULK_EXEC_TRAIN", Phrase("MXNet's: 1"),
     "MXNet's, read when it starts; with 0 every layer's gradient is its own engine operation, so a "
     "pipelined merge plan can send earlier (the Gluon trainer warns otherwise; on cnn-fc at 1 Gbit/s it "
     "made no difference, lab/bench_sparse/findings.md).  `MXNET_CPU_TEMP_COPY` no longer matters: "
     "mxnet_gc's engine operations take no temporary space"),
)
DEFAULT = {names: default for names, default, _ in VARIABLES if not isinstance(default, Phrase)}


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
    bound = _int(environ, "MXNET_GC_BIGARRAY_BOUND", DEFAULT["MXNET_GC_BIGARRAY_BOUND"], 1)
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
    horovod_message_bytes: int  # the horovod store's message size under the trainer's default merge
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
        alltoall = environ.get("MXNET_GC_ALLTOALL", "") or DEFAULT["MXNET_GC_ALLTOALL"]
        if alltoall not in ALLTOALLS:
            raise ValueError("MXNET_GC_ALLTOALL must be one of %s, got %r" % (", ".join(ALLTOALLS), alltoall))
        num_servers = _int(environ, "DMLC_NUM_SERVER", 0, 0)
        return cls(bigarray_bound=_bound(environ, num_servers), num_threads=_threads(environ),
                   isa=isa, netns=environ.get("MXNET_GC_NETNS", DEFAULT["MXNET_GC_NETNS"]),
                   role=environ.get("DMLC_ROLE", ""),
                   num_servers=num_servers,
                   num_workers=_int(environ, "DMLC_NUM_WORKER", 0, 0),
                   bulk_exec_train=environ.get("MXNET_EXEC_BULK_EXEC_TRAIN", "1"),
                   rank_line=environ.get("MXNET_GC_RANK_LINE", ""), end_line=environ.get("MXNET_GC_END_LINE", ""),
                   collective_timeout=_number(environ, "MXNET_GC_COLLECTIVE_TIMEOUT",
                                              DEFAULT["MXNET_GC_COLLECTIVE_TIMEOUT"], float, 0),
                   pull_stats=_int(environ, "MXNET_GC_PULL_STATS", DEFAULT["MXNET_GC_PULL_STATS"], 0),
                   alltoall=alltoall,
                   alltoall_peers=_int(environ, "MXNET_GC_ALLTOALL_PEERS", DEFAULT["MXNET_GC_ALLTOALL_PEERS"], 1),
                   horovod_message_bytes=_int(environ, "MXNET_GC_HOROVOD_MESSAGE_BYTES",
                                              DEFAULT["MXNET_GC_HOROVOD_MESSAGE_BYTES"], 4),
                   job_secret=_secret(environ),
                   join_timeout=_number(environ, "MXNET_GC_JOIN_TIMEOUT", DEFAULT["MXNET_GC_JOIN_TIMEOUT"], float, 0),
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
