"""``kbatch simulate --from-cluster FILE...``: what would become of these objects if they
were submitted now (``kbatch.visibility.whatif``), read from the live cluster of the
kubeconfig (the rules of ``kbatch jobs``: ``--kubeconfig``, else ``$KUBECONFIG``,
``~/.kube/config`` or in-cluster). It lists, never writes. The scheduler conf is
``--config FILE``, else the chart's ConfigMap, else the default."""

import argparse
import dataclasses
import sys
from typing import Any

from kbatch import json_codec
from kbatch.api import duration
from kbatch.cli import visibility as cli_visibility

EXIT_USAGE = 2


def what_if(args: argparse.Namespace) -> int:
    """Answer for each group of ``args.files`` added to the live cluster."""
    from kbatch.visibility import output as out
    from kbatch.visibility import whatif

    if not args.files:
        raise argparse.ArgumentTypeError("--from-cluster: give the FILEs to add to the cluster")
    texts = []
    for path in args.files:
        try:
            texts.append((str(path), path.read_text(encoding="utf-8")))
        except OSError as exc:
            print(f"kbatch: error: {path}: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    period = duration.parse_duration(args.period, "--period")
    budget = duration.parse_duration(args.eta_budget, "--eta-budget")
    if period <= 0:
        raise duration.DurationError("--period: must be more than 0")
    try:
        documents = whatif.documents_of(texts)
        # the flags of kbatch jobs that simulate names otherwise
        args.scheduler_conf, args.scheduler_name = args.config, None
        source = cli_visibility.source_for(args)
        conf, conf_source = source.conf()
        objects = source.objects(events_in=None)
        objects = dataclasses.replace(objects, jobs=source.held_jobs())
        answers, warnings = whatif.answer(objects, documents, conf, period=period, budget=budget)
    except whatif.WhatIfError as exc:
        print(f"kbatch: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for message in warnings:
        cli_visibility.warn(message)
    if args.output == "json":
        data = {
            "asOf": out.micro_time(objects.now),
            "schedulerConf": conf_source,
            "groups": [a.to_json(objects.now) for a in answers],
        }
        sys.stdout.write(json_codec.dumps_indented(data) + "\n")
    else:
        out.show(sys.stdout, out.what_if_table(answers))
        print(f"(scheduler conf: {conf_source})")
    return 0


def command(args: argparse.Namespace) -> int:
    """``what_if`` with the cluster's refusal or absence as one line (``guarded``)."""
    run: Any = cli_visibility.guarded(what_if)
    return int(run(args))
