"""The page's words in English and Simplified Chinese (``static/skiff-i18n.js``): both complete, no English left in
the Chinese, and every key the page uses defined. The browser test (test_platform_page_in_browser) then reads the
rendered page in Chinese; this one reads the dictionaries."""

from __future__ import annotations

import re

from devstack.airflow_env import REPO
from operators.ui.app import MODULES

STATIC = REPO / "operators" / "ui" / "static"
PAIR = re.compile(r'"([\w.-]+)":\s*"((?:[^"\\]|\\.)*)"')
# words that stay as they are in a Chinese UI: product names, units, Kubernetes kinds, acronyms
KEEP = {"Skiff", "CPU", "GPU", "GiB", "Gi", "ResourceQuota", "DAG", "usage_report", "Airflow", "Sedna", "CRD",
        "StatefulSet", "Service", "FederatedLearningJob", "JointInferenceService", "notebook", "h", "s", "m", "d",
        "Kueue",
        # product names, as the cluster and the dashboard call them: metrics-server, dcgm-exporter, the metrics API
        "Pod", "API", "metrics", "server", "dcgm", "exporter", "Grafana", "Prometheus",
        # a setting's name, as the operator writes it in Airflow's configuration
        "skiff", "prometheus_url"}


def _dictionaries() -> dict[str, dict[str, str]]:
    text = (STATIC / "skiff-i18n.js").read_text()
    en_start, zh_start = text.index("\n  en: {"), text.index('\n  "zh-CN": {')
    end = text.index("\n};", zh_start)
    return {"en": dict(PAIR.findall(text[en_start:zh_start])), "zh-CN": dict(PAIR.findall(text[zh_start:end]))}


def test_english_and_simplified_chinese_have_the_same_keys_and_no_empty_text():
    d = _dictionaries()
    assert len(d["en"]) > 100
    assert set(d["en"]) == set(d["zh-CN"]), set(d["en"]) ^ set(d["zh-CN"])
    assert not [k for lang in d for k, v in d[lang].items() if not v.strip()]
    for k, v in d["en"].items():  # the same placeholders on both sides
        assert set(re.findall(r"\{(\w+)\}", v)) == set(re.findall(r"\{(\w+)\}", d["zh-CN"][k])), k


def test_the_chinese_text_has_no_english_word_left():
    english = {k: words for k, v in _dictionaries()["zh-CN"].items()
               if (words := set(re.findall(r"[A-Za-z][A-Za-z_]*", re.sub(r"\{\w+\}", "", v))) - KEEP)}
    assert english == {}


def test_every_key_the_page_names_is_defined():
    en = _dictionaries()["en"]
    js = "\n".join((STATIC / m).read_text() for m in MODULES if m != "skiff-i18n.js")  # the entry and every card
    used = set(re.findall(r'\bt\("([\w.]*\w)"', js)) | set(re.findall(r'data-i18n(?:-title|-placeholder)?="([\w.]+)"', js))
    used |= set(re.findall(r'"((?:inst|train|sedna|quota|usage|form)\.[\w.]+)"', js))
    assert len(used) > 60
    assert sorted(used - set(en)) == []
    # keys built at run time: every state, resource, unit and wait reason the API sends
    dynamic = [f"state.{s}" for s in ("Running", "Starting", "Stopping", "Stopped")] + \
              [f"res.{r}" for r in ("cpu", "memory", "gpu", "storage")] + \
              [f"unit.{u}" for u in ("cores", "GiB", "GPUs")] + [f"wait.{w}" for w in ("pool", "quota", "scheduling", "kueue")] + \
              [f"ti.{s}" for s in ("running", "queued", "scheduled", "up_for_retry", "restarting", "failed", "success")] + \
              [f"queue.{q}" for q in ("training", "dev", "nominal", "used", "borrowed", "lent")] + \
              [f"peak.{m}" for m in ("no_reading", "none")] + [f"use.{m}" for m in ("no_api", "no_reading")]
    assert [k for k in dynamic if k not in en] == []


def test_every_failure_reason_class_has_words_in_both_languages():
    """issue 29: in zh-CN the training card's failure reasons stayed English. The page shows the reason's class
    (operators.metrics.catalogue.FAILURE_REASONS, ``reason_class`` of a training row) in the page's language."""
    from operators.metrics.catalogue import FAILURE_REASONS

    d = _dictionaries()
    for lang in d:
        assert [r for r in FAILURE_REASONS if f"reason.{r}" not in d[lang]] == [], lang
    assert d["zh-CN"]["reason.OOMKilled"] != d["en"]["reason.OOMKilled"]
