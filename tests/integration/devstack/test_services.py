"""devstack.services gives a session its own PostgreSQL database and Redis db, and leaves nothing behind.

Private instances (a fresh machine: Debian's postgresql and redis-server installed, no server running) are
tested always; the shared-server path (``SKIFF_TEST_PG_URL`` / ``SKIFF_TEST_REDIS_URL``, what the project's
machines set) when those are set.
"""

from __future__ import annotations

import os

import psycopg2
import pytest
import redis

from devstack.airflow_env import REPO
from devstack.services import Postgres, Redis, detect


def _databases(admin_url: str) -> set[str]:
    conn = psycopg2.connect(admin_url)
    try:
        cur = conn.cursor()
        cur.execute("SELECT datname FROM pg_database")
        return {r[0] for r in cur.fetchall()}
    finally:
        conn.close()


def _use_postgres(url: str) -> None:
    conn = psycopg2.connect(url)
    conn.autocommit = True
    try:
        conn.cursor().execute("CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
    finally:
        conn.close()


def test_private_postgres_and_redis_start_on_free_ports_and_are_removed(tmp_path):
    workdir = REPO / ".airflow" / "services" / f"test-{tmp_path.name}"
    pg = Postgres(workdir / "postgres", admin_url="").start()
    rd = Redis(workdir / "redis", url="").start()
    try:
        assert pg.private and rd.private
        password = pg.password_file.read_text().strip()
        assert pg.url.startswith(f"postgresql://postgres:{password}@127.0.0.1:") and ":5432/" not in pg.url
        assert pg.dbname in _databases(pg.admin_url)
        _use_postgres(pg.url)
        client = redis.Redis.from_url(rd.url)
        assert client.set("k", "v") and client.get("k") == b"v" and ":6379/" not in rd.url
        client.close()
        assert (pg.workdir / "pgdata" / "PG_VERSION").exists()
    finally:
        pg.stop()
        rd.stop()
    assert not pg.workdir.exists() and not (workdir / "redis").exists()
    workdir.rmdir()
    with pytest.raises(psycopg2.OperationalError):
        psycopg2.connect(pg.admin_url, connect_timeout=2)


@pytest.mark.skipif(not (os.environ.get("SKIFF_TEST_PG_URL") and os.environ.get("SKIFF_TEST_REDIS_URL")),
                    reason="SKIFF_TEST_PG_URL / SKIFF_TEST_REDIS_URL not set (make test sets them when a local "
                           "PostgreSQL / Redis answers)")
def test_shared_servers_give_a_fresh_database_and_db_number_dropped_at_the_end(tmp_path):
    admin = os.environ["SKIFF_TEST_PG_URL"]
    first, second = Postgres(tmp_path / "a").start(), Postgres(tmp_path / "b").start()
    r1, r2 = Redis(tmp_path / "c").start(), Redis(tmp_path / "d").start()
    try:
        assert not first.private and first.dbname != second.dbname
        assert {first.dbname, second.dbname} <= _databases(admin)
        _use_postgres(first.url)
        _use_postgres(second.url)  # the same table name in another session's database: no clash
        assert r1.url != r2.url  # two sessions, two db numbers
        used = r1.url
        client = redis.Redis.from_url(used)
        client.set("celery-key", "x")
        client.close()
    finally:
        for service in (first, second, r1, r2):
            service.stop()
    assert first.dbname not in _databases(admin) and second.dbname not in _databases(admin)
    client = redis.Redis.from_url(used)
    try:
        assert client.dbsize() == 0  # flushed, claim marker included
    finally:
        client.close()


def test_detect_reports_only_servers_that_answer(monkeypatch):
    monkeypatch.setattr("devstack.services.LOCAL_PG_URL", "postgresql://postgres@127.0.0.1:1/postgres")
    monkeypatch.setattr("devstack.services.LOCAL_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delenv("SKIFF_TEST_PG_URL", raising=False)
    monkeypatch.delenv("SKIFF_TEST_REDIS_URL", raising=False)
    assert detect() == {}


def test_private_postgres_takes_a_password_and_keeps_its_socket_private(tmp_path):
    """Issue 38: the stack's own PostgreSQL is no open door. Its password (generated per cluster) is in a 0600
    file; its socket directory is 0700; and a login without the password is refused, over TCP and over the
    socket alike (scram-sha-256, no trust)."""
    import stat

    workdir = REPO / ".airflow" / "services" / f"test-auth-{tmp_path.name}"
    pg = Postgres(workdir / "postgres", admin_url="").start()
    try:
        assert stat.S_IMODE(pg.password_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(pg.socket_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(pg.workdir.stat().st_mode) == 0o700
        assert [p.name for p in pg.socket_dir.iterdir() if p.is_socket()] != []
        port = pg.url.rsplit(":", 1)[1].split("/")[0]
        for where in ({"host": "127.0.0.1", "port": port}, {"host": str(pg.socket_dir), "port": port}):
            with pytest.raises(psycopg2.OperationalError) as refused:
                psycopg2.connect(dbname="postgres", user="postgres", connect_timeout=5, **where)
            assert "password" in str(refused.value), str(refused.value)
            with pytest.raises(psycopg2.OperationalError):
                psycopg2.connect(dbname="postgres", user="postgres", password="guess", connect_timeout=5, **where)
        password = pg.password_file.read_text().strip()
        psycopg2.connect(dbname=pg.dbname, user="postgres", password=password, host=str(pg.socket_dir),
                         port=port, connect_timeout=5).close()
        _use_postgres(pg.url)
    finally:
        pg.stop()
    workdir.rmdir()
