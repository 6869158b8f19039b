"""The training operator's requests from the worker (sync): find, create, mark and delete its Jobs.

Through the access layer (``operators.k8s``), objects as dicts. Imported only where a task runs, so that
parsing a DAG file loads no Kubernetes client. API errors become ``AirflowException`` naming the object and
the API server's answer in the layer's one format.
"""

from __future__ import annotations

from airflow.providers.common.compat.sdk import AirflowException

from operators.k8s.connection import api_client
from operators.k8s.errors import KubeError
from operators.k8s.resource import JOBS, PVCS
from operators.k8s.rest import Kube
from operators.training import failure

ANNOTATION_REPORTED = "skiff.io/success-reported-by-try"


def adoption_state(job: dict) -> str:
    """``failure.job_state``, except that a success already reported to Airflow is "reported": a later try of
    the same task instance is then a deliberate re-run (the task was cleared), not a crash to recover from."""
    state = failure.job_state(job)
    if state == "succeeded" and ANNOTATION_REPORTED in (job["metadata"].get("annotations") or {}):
        return "reported"
    return state


def _ref(job: dict) -> dict:
    md = job["metadata"]
    return {"namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}


class TrainingJobs:
    def __init__(self, conn_id: str | None) -> None:
        self.kube = Kube(api_client(conn_id))

    def status(self, ref: dict) -> str:
        """"gone" (deleted, or replaced by another object of the same name), else ``adoption_state``."""
        try:
            job = self.kube.get(JOBS, ref["namespace"], ref["name"])
        except KubeError as exc:
            raise AirflowException(f"cannot read Job {ref}: {exc}") from exc
        if job is None or (ref.get("uid") and job["metadata"]["uid"] != ref["uid"]):
            return "gone"
        return adoption_state(job)

    def find_adoptable(self, namespace: str, selector: str) -> dict | None:
        """The newest of the task instance's Jobs that is active or succeeded (not yet reported), if any."""
        jobs = self._list(namespace, selector)
        jobs.sort(key=lambda j: j["metadata"]["creationTimestamp"], reverse=True)  # RFC 3339: sorts as text
        for job in jobs:
            if not job["metadata"].get("deletionTimestamp") and adoption_state(job) in ("active", "succeeded"):
                return _ref(job)
        return None

    def create(self, manifest: dict) -> dict:
        """Check the claims it mounts (ValueError naming the field), then create; a 409 means this very try
        already created it (a re-run after a crash): that Job is returned."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            self._check_claims(manifest)
            return _ref(self.kube.create(JOBS, namespace, manifest) or self.kube.get(JOBS, namespace, name))
        except KubeError as exc:
            raise AirflowException(f"cannot create Job {namespace}/{name}: {exc}") from exc

    def _check_claims(self, manifest: dict) -> None:
        namespace = manifest["metadata"]["namespace"]
        for volume in manifest["spec"]["template"]["spec"]["volumes"]:
            claim = volume["persistentVolumeClaim"]["claimName"]
            field = "pvc" if volume["name"] == "root-dir" else f"volumes[{int(volume['name'][4:])}].pvc"
            if self.kube.get(PVCS, namespace, claim) is None:
                raise ValueError(f"{field}={claim!r}: no such PersistentVolumeClaim in namespace {namespace!r}")

    def mark_reported(self, ref: dict, try_number: int) -> str | None:
        """Annotate a succeeded Job as handed back to Airflow; the error message if that failed."""
        try:
            self.kube.merge_patch(JOBS, ref["namespace"], ref["name"],
                                  {"metadata": {"annotations": {ANNOTATION_REPORTED: str(try_number)}}})
        except KubeError as exc:
            return str(exc)
        return None

    def delete(self, namespace: str, name: str) -> tuple[bool, str | None]:
        """(deleted, error message): Background propagation, so its pods go too; (False, None) if already gone."""
        try:
            return self.kube.delete(JOBS, namespace, name), None
        except KubeError as exc:
            return False, str(exc)

    def active(self, namespace: str, selector: str) -> list[str]:
        return [j["metadata"]["name"] for j in self._list(namespace, selector) if failure.job_state(j) == "active"]

    def _list(self, namespace: str, selector: str) -> list[dict]:
        try:
            return self.kube.list(JOBS, namespace, label_selector=selector)
        except KubeError as exc:
            raise AirflowException(f"cannot list Jobs in {namespace} ({selector}): {exc}") from exc
