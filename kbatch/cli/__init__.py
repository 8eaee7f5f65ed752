"""The ``kbatch`` command line (also the kubectl plugin ``kubectl-kbatch``).

``main`` is the parser and the entry point; each subcommand is one module, thin over the
package that does the work and loading it only when it runs (so ``kbatch --help`` starts
without the scheduler, the simulator or the API client): ``simulate``, ``bench``, ``run``,
and ``visibility`` (``kbatch queues``, ``kbatch jobs``, ``kbatch explain``).
"""
