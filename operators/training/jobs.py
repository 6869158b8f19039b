"""The training operator's requests from the worker (sync): find, create, mark and delete its Jobs.

Through the access layer (``operators.k8s``), objects as dicts. Imported only where a task runs, so that
parsing a DAG file loads no Kubernetes client. API errors become ``AirflowException`` naming the object and
the API server's answer in the layer's one format.
"""

from __future__ import annotations

from airflow.providers.common.compat.sdk import AirflowException

from operators.k8s.connection import api_client
from operators.k8s.errors import KubeError
from operators.k8s.resource import JOBS, PVCS, SERVICES
from operators.k8s.rest import Kube
from operators.training import failure, queued
from operators.training.naming import ANNOTATION_CLEARS

ANNOTATION_REPORTED = "skiff.io/success-reported-by-try"


def adoption_state(job: dict, clear_number: int | None = None) -> str:
    """``failure.job_state``, except for a success: "superseded" when it belongs to an earlier pass of the run
    (its ``skiff.io/run-clear-number`` is not the run's ``clear_number``: the run was cleared since, so this is a
    re-run the user asked for, even if the "reported" record below was never written), "reported" when it was
    already handed back to Airflow (a later try is then a deliberate re-run, not a crash to recover from)."""
    state = failure.job_state(job)
    annotations = job["metadata"].get("annotations") or {}
    if state == "succeeded" and clear_number is not None and annotations.get(ANNOTATION_CLEARS, str(clear_number)) \
            != str(clear_number):
        return "superseded"
    if state == "succeeded" and ANNOTATION_REPORTED in annotations:
        return "reported"
    return state


def _ref(job: dict) -> dict:
    md = job["metadata"]
    return {"namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}


class TrainingJobs:
    def __init__(self, conn_id: str | None) -> None:
        self.kube = Kube(api_client(conn_id))

    def status(self, ref: dict, clear_number: int | None = None) -> str:
        """"gone" (deleted, or replaced by another object of the same name), else ``adoption_state``; an active
        Job is claimed for this pass of the run (``_claim``)."""
        try:
            job = self.kube.get(JOBS, ref["namespace"], ref["name"])
        except KubeError as exc:
            raise AirflowException(f"cannot read Job {ref}: {exc}") from exc
        if job is None or (ref.get("uid") and job["metadata"]["uid"] != ref["uid"]) \
                or job["metadata"].get("deletionTimestamp"):   # being deleted (drop_left_for_kueue): not resumable
            return "gone"
        state = adoption_state(job, clear_number)
        if state == "active":
            self._claim(job, clear_number)
        return state

    def find_adoptable(self, namespace: str, selector: str, clear_number: int | None = None) -> dict | None:
        """The newest of the task instance's Jobs that is active or succeeded in this pass of the run (not yet
        reported), if any; an active one is claimed for this pass (``_claim``)."""
        jobs = self._list(namespace, selector)
        jobs.sort(key=lambda j: j["metadata"]["creationTimestamp"], reverse=True)  # RFC 3339: sorts as text
        for job in jobs:
            state = adoption_state(job, clear_number)
            if not job["metadata"].get("deletionTimestamp") and state in ("active", "succeeded"):
                if state == "active":
                    self._claim(job, clear_number)
                return _ref(job)
        return None

    def drop_left_for_kueue(self, namespace: str, selector: str) -> list[str]:
        """Delete the task instance's Jobs that wait suspended for Kueue (``queued.left_for_kueue``) when this try
        is not queued (the platform file says ``queueing: quota`` now, or there is none): no queue would start
        them, so a retry must neither reattach to nor adopt one. Returns their names; the new Job resumes from the
        same checkpoint directory."""
        dropped = []
        for job in self._list(namespace, selector):
            if queued.left_for_kueue(job):
                deleted, error = self.delete(namespace, job["metadata"]["name"])
                if error:
                    raise AirflowException(f"cannot delete Job {namespace}/{job['metadata']['name']}, left suspended "
                                           f"for Kueue by an earlier try: {error}")
                dropped.append(job["metadata"]["name"])
        return dropped

    def _claim(self, job: dict, clear_number: int | None) -> None:
        """Record on an active Job adopted after a clear that its result now belongs to this pass of the run
        (else its success would look superseded to a retry); the task fails if that record cannot be written
        (its retry claims again) rather than leave a result no later try could tell apart."""
        current = (job["metadata"].get("annotations") or {}).get(ANNOTATION_CLEARS)
        if clear_number is None or current is None or current == str(clear_number):
            return
        md = job["metadata"]
        try:
            self.kube.merge_patch(JOBS, md["namespace"], md["name"], {"metadata": {
                "annotations": {ANNOTATION_CLEARS: str(clear_number)}}})
        except KubeError as exc:
            raise AirflowException(f"cannot record Job {md['namespace']}/{md['name']} as this run's: {exc}") from exc

    def create(self, manifest: dict) -> dict:
        """Check the claims it mounts (ValueError naming the field), then create; a 409 means this very try
        already created it (a re-run after a crash): that Job is returned."""
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        try:
            self._check_claims(manifest)
            job = self.kube.create(JOBS, namespace, manifest) or self.kube.get(JOBS, namespace, name)
        except KubeError as exc:
            raise AirflowException(f"cannot create Job {namespace}/{name}: {exc}") from exc
        self.ensure_workers_service(job)
        return _ref(job)

    def ensure_workers_service_of(self, ref: dict) -> None:
        try:
            job = self.kube.get(JOBS, ref["namespace"], ref["name"])
        except KubeError as exc:
            raise AirflowException(f"cannot read Job {ref}: {exc}") from exc
        if job is not None:
            self.ensure_workers_service(job)

    def ensure_workers_service(self, job: dict) -> None:
        """A gang's headless Service (``manifest.workers_service``), owned by its Job; kept if it exists (a
        re-run of the same try). The Job's pods find each other by name only once it exists."""
        from operators.training.manifest import workers_service

        service = workers_service(job)
        if service is None:
            return
        md = service["metadata"]
        try:
            self.kube.create(SERVICES, md["namespace"], service)
        except KubeError as exc:
            raise AirflowException(f"cannot create Service {md['namespace']}/{md['name']} for the workers of Job "
                                   f"{job['metadata']['name']}: {exc}") from exc

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
