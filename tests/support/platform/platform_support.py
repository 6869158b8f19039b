"""A small platform file for the sync, admission and usage tests (two teams, shared volumes, registries, an image)."""

from __future__ import annotations

from pathlib import Path

from operators.platform import Platform, parse_platform

PLATFORM = """\
version: 1
users: {default_pvc_size: 2Gi}
limit_range: {default_cpu: "1", default_memory: 1Gi}
registries:
  - {secret: regcred, teams: all}
  - {secret: recsys-registry, teams: [recsys]}
teams:
  - name: recsys
    allow_online: true
    quota: {cpu: "8", memory: 32Gi, gpu: 2, storage: 20Gi, pods: 20, jobs: 4}
    members:
      - {user: alice, email: alice@example.com, role: admin}
      - {user: bob}
  - name: nlp
    quota: {cpu: "3", memory: 8Gi, storage: 10Gi}
    members:
      - {user: carol, role: admin}
volumes:
  - {name: datasets, team: recsys, owner: alice, size: 5Gi, writers: [alice], readers: [team:recsys]}
  - {name: scratch, team: recsys, size: 1Gi}
images:
  - {name: tf2-cpu, image: "registry.example.com/nb:tf2", default: true}
  - {name: tf2-gpu, image: "registry.example.com/nb:tf2-gpu", gpu: true}
"""


def platform(text: str = PLATFORM, path: Path | None = None) -> Platform:
    if path is not None:
        path.write_text(text)
    return parse_platform(text, str(path or "platform.yaml"))
