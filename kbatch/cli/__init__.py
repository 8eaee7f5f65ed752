"""The ``kbatch`` command line (also the kubectl plugin ``kubectl-kbatch``).

``main`` parses the arguments and runs one subcommand; each subcommand is thin over the
package that does the work and loads it only when it runs, so ``kbatch --help`` starts
without the scheduler, the simulator or the API client. ``visibility``: ``kbatch
queues``, ``kbatch jobs`` and ``kbatch explain``, read from a cluster.
"""
