"""Admission as plain functions: objects (dicts) and a read-only view of the cluster in,
an :class:`result.Admission` out. No kopf, no API calls, no clock.

The webhook server (``kbatch.webhooks.server``) calls them for the API server, and
the simulator calls them whenever it creates an object, so a simulation sees what
a cluster would (DESIGN §7).

Modules: ``result`` (the answer and merge patches), ``view`` (what they may read),
``podgroup`` (PodGroupMinResources and PodGroup validation), ``queue`` (Queue
validation), ``job`` (delayed pod creation), ``chain`` (mutate, then validate, as
the API server orders them).
"""
