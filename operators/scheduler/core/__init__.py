"""The scheduler core: framework (session, statement, tiers, scheduler-side models),
actions (mechanism) and plugins (policy), and the runner that drives one session.

Pure Python + numpy: it imports neither kopf nor kubernetes and sees a cluster only
through ``framework.interface.Backend`` (checked by the import-linter contracts).
"""
