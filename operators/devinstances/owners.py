"""Whose instance a DAG run may act on (pure): the Airflow user who triggered it, never somebody else.

* A run triggered by a logged-in user (UI or REST API) acts for ``dag_run.triggering_user_name``. It may name
  ``owner`` in its conf only if that is the same user, or if the user is an admin: an Airflow admin for every
  action, a team admin (role ``admin`` in the platform file) to stop, start or delete an instance of their team
  (the operator passes that team's admins).
* A run with nobody logged in behind it must name ``owner`` in its conf: an empty triggering user (tests,
  schedules), or ``dag.test()``/``airflow dags test``, which records the name ``dag_test``. That name is "nobody"
  only inside such a run (``triggering_user``: the task runs in the test's in-process supervisor); a real Airflow
  user called ``dag_test`` is that user, with that user's rights only (issue 30, class 8).
* ``airflow dags trigger`` records the OS user's name; such a user can only pass ``owner`` for somebody
  else when listed as an admin (operators with a shell on Airflow's machines).

Admins: the users in ``[skiff] devinstance_admins`` (comma-separated) and, with Airflow's simple auth manager,
the users whose role is ``admin`` in ``[core] simple_auth_manager_users``.
"""

from __future__ import annotations

from collections.abc import Iterable

ANONYMOUS = ("",)  # the one "no user": see ``triggering_user``
DAG_TEST_USER = "dag_test"  # what dag.test() records as the triggering user (airflow/sdk/definitions/dag.py)


def triggering_user(dag_run, in_dag_test: bool | None = None) -> str:
    """The run's user, ``""`` for nobody: no user recorded, or ``dag_test`` recorded by ``dag.test()`` itself
    (``in_dag_test``: this task runs in ``dag.test()``'s in-process supervisor, which no worker does; None:
    look it up). A run a real user named ``dag_test`` triggered is theirs."""
    user = getattr(dag_run, "triggering_user_name", None) or ""
    if user != DAG_TEST_USER:
        return user
    return "" if (_in_dag_test() if in_dag_test is None else in_dag_test) else user


def _in_dag_test() -> bool:
    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.supervisor import InProcessSupervisorComms

    return isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), InProcessSupervisorComms)


def admins_from_config(env_admins: str | None, simple_users: str | None) -> frozenset[str]:
    """``"ops, root"`` and ``"admin:admin,alice:user"`` -> {"ops", "root", "admin"}."""
    names = {n.strip() for n in (env_admins or "").split(",") if n.strip()}
    for entry in (simple_users or "").split(","):
        user, _, role = entry.strip().partition(":")
        if user and role.strip().lower() == "admin":
            names.add(user)
    return frozenset(names)


def configured_admins() -> frozenset[str]:
    from airflow.configuration import conf

    from operators import settings

    return admins_from_config(settings.get("devinstance_admins"),
                              conf.get("core", "simple_auth_manager_users", fallback=None))


def resolve_owner(triggering_user: str | None, conf_owner: object, admins: Iterable[str] = ()) -> str:
    """The owner a run acts for; raises ``PermissionError``/``ValueError`` naming ``owner``."""
    requested = conf_owner if conf_owner not in (None, "") else None
    if requested is not None and not isinstance(requested, str):
        raise ValueError(f"owner={conf_owner!r}: must be an Airflow user name")
    user = triggering_user or ""
    if user in ANONYMOUS:
        if requested is None:
            raise ValueError("owner=None: this run has no logged-in user behind it (CLI test, tests, schedule); "
                             "pass owner in the run's conf")
        return requested
    if requested is None or requested == user:
        return user
    if user in set(admins):
        return requested
    raise PermissionError(f"owner={requested!r}: {user!r} may only act on their own development instances")
