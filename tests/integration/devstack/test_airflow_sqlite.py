"""The SQLite metadata DB of the local stack and the tests: a writer waits for the lock instead of failing.

With pysqlite's default 5 s busy timeout a write that met another component's lock (the dag-processor holds it
for seconds at start-up) failed: the API server answered 500 "Database error", the triggerer and scheduler
crashed on "database is locked". The timeout comes in the connection URL, so every Airflow component gets it.
"""

from __future__ import annotations

import sqlite3
import threading

from devstack.airflow_env import SQLITE_BUSY_TIMEOUT_S


def test_airflows_engines_wait_for_the_write_lock():
    from airflow import settings

    with settings.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == SQLITE_BUSY_TIMEOUT_S * 1000


async def test_airflows_async_engine_waits_for_the_write_lock():
    from airflow import settings

    async with settings.async_engine.connect() as conn:
        assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar() == SQLITE_BUSY_TIMEOUT_S * 1000
    await settings.async_engine.dispose()  # its connections belong to this test's event loop


def test_a_write_held_past_pysqlites_default_goes_through(tmp_path):
    """What the timeout buys: a write queued behind a 6 s lock (pysqlite's default gives up at 5 s) commits."""
    from sqlalchemy import create_engine

    from devstack.airflow_env import airflow_env

    url = airflow_env(tmp_path)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    holder = sqlite3.connect(tmp_path / "airflow.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Event()
    threading.Timer(6.0, lambda: (holder.execute("COMMIT"), released.set())).start()
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    assert released.is_set()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
    engine.dispose()
    holder.close()
