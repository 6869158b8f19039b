"""Scheduled training on Kubernetes Jobs (SPEC §1): ``TrainingJobOperator`` and its parts.

naming (ids -> names/labels), spec (validation, injection-proof command), manifest (the Job), failure (why it
failed), follow (watch + logs, async), trigger (deferrable), operator, alerts (e-mails, default_args).
"""
