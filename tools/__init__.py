"""The benchmarks, studies and test harnesses of mxnet_gc, run from the source tree's root as modules:
``.venv/bin/python -m tools.<name> --help`` (they import each other, ``tools.netbench`` and the
example's models, ``examples.models``, as packages).  Three are programs run by their path instead:
``launch.py`` (MXNet's launcher syntax), ``netns_ssh.py`` (ssh into tools/netns_cluster.py's hosts) and
``fault_worker.py`` (a worker of tools/fault_matrix.py).  Results go to lab/.
"""
