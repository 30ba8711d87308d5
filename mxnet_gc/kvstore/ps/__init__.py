"""The parameter-server transport (MXNet's ps-lite): the workers' store and the server processes.

Worker side: ``dist_store`` (the store), ``ps_port`` (its ps-lite keys and commands), ``ps_buffers``,
``pull_stages`` (when pushes go out and in which stages pulls bring them back), ``server_link``,
``lgc_ps`` (LGC's rounds through the servers), ``weight_pulls``.  Server side: ``server`` (the process),
``server_start`` and ``scheduler`` (what the launcher runs), ``aggregator`` (what a server does with each
push and command), ``server_optimizer``, ``lgc_server``, ``pull_monitor``.
"""
