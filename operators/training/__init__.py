"""Scheduled training on Kubernetes Jobs (SPEC §1): ``TrainingJobOperator`` and its parts.

naming (ids -> names/labels), spec (validation, injection-proof command), manifest (the Job), failure (why it
failed), waiting (what to do while waiting: pure), follow (watch + logs, async), jobs (the operator's Job
requests), trigger (deferrable), operator, alerts (e-mails, default_args).
"""
