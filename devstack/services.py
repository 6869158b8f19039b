"""PostgreSQL and Redis for the production-like test profile (``devstack.prod``).

Each session gets its own database and its own Redis db number, so sessions (and developers) never share state:

* ``SKIFF_TEST_PG_URL`` set (e.g. ``postgresql://postgres@127.0.0.1:5432/postgres``, a role that may create
  databases): a fresh ``skiff_test_<hex>`` database is created there and dropped at the end.
  Otherwise a private cluster is made with Debian's ``initdb``/``pg_ctl`` on a free port in a project-local
  directory and removed at the end. PostgreSQL refuses to run as root; as root it runs as the ``postgres``
  system user (which Debian's package creates).
* ``SKIFF_TEST_REDIS_URL`` set (e.g. ``redis://127.0.0.1:6379/0``): the first empty db number (1-15) is claimed
  with an atomic ``SET NX`` and flushed at the end. Otherwise a private ``redis-server`` on a free port, no
  persistence, stopped at the end.

``python -m devstack.services detect`` prints ``export`` lines for the URLs of a local PostgreSQL / Redis that
answers on 127.0.0.1 (what ``make test`` evaluates), and nothing for one that does not.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from devstack.ports import free_port
from kubesim.kubeconfig import write_private

LOCAL_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"
CLAIM_KEY = "skiff:test:claimed-by"


def with_database(url: str, dbname: str) -> str:
    """``url`` with its path (the database name) replaced."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{dbname}", parts.query, parts.fragment))


def _pg_connect(url: str):
    import psycopg2

    conn = psycopg2.connect(url, connect_timeout=5)
    conn.autocommit = True
    return conn


def pg_bin(name: str) -> str:
    """Debian installs the server binaries under /usr/lib/postgresql/<major>/bin, not on PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise FileNotFoundError(f"{name} not found: install Debian's postgresql package (make services)")


def _traversable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can reach ``path`` (every existing ancestor has o+x)."""
    for p in [path, *path.parents]:
        if p.exists() and not p.stat().st_mode & 0o001:
            return False
    return True


class Postgres:
    """A fresh database for one session: in ``SKIFF_TEST_PG_URL``'s server, or in a private cluster.

    A private cluster is closed to everyone but the stack: its superuser has a password generated for it
    (``scram-sha-256`` for local and TCP connections alike: no ``trust``), kept in ``<workdir>/password``
    (0600) and given to its clients in ``url`` (Airflow's ``sql_alchemy_conn``); its Unix socket is in a
    directory of its own, 0700, and the socket itself 0700. A process that is not the stack's (a pod) finds
    neither a socket it may open nor a login without the password."""

    def __init__(self, workdir: Path, admin_url: str | None = None):
        self.workdir = workdir
        self.admin_url = admin_url if admin_url is not None else os.environ.get("SKIFF_TEST_PG_URL", "")
        self.private = not self.admin_url
        self.dbname = f"skiff_test_{secrets.token_hex(6)}"
        self.url = ""
        self._data = workdir / "pgdata"
        self._user: pwd.struct_passwd | None = None
        self.password_file = workdir / "password"
        self.socket_dir: Path | None = None      # a short private directory (a socket path has at most 107 bytes)

    def start(self) -> Postgres:
        if self.private:
            self.admin_url = self._start_private()
        conn = _pg_connect(self.admin_url)
        try:
            conn.cursor().execute(f'CREATE DATABASE "{self.dbname}"')
        finally:
            conn.close()
        self.url = with_database(self.admin_url, self.dbname)
        return self

    @property
    def sqlalchemy_url(self) -> str:
        """``url`` as Airflow's ``[database] sql_alchemy_conn`` (the psycopg2 driver, as the image installs)."""
        return self.url.replace("postgresql://", "postgresql+psycopg2://", 1)

    def _run_as_owner(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, check=True, capture_output=True, text=True, preexec_fn=self._demote(),
                              cwd="/", **kw)

    def _start_private(self) -> str:
        if os.geteuid() == 0:  # "root" execution of the PostgreSQL server is not permitted
            self._user = pwd.getpwnam("postgres")
            if not _traversable_by_others(self.workdir.parent):  # e.g. a checkout under /root (0700)
                self.workdir = Path(tempfile.mkdtemp(prefix="skiff-postgres-"))
                self._data = self.workdir / "pgdata"
                self.password_file = self.workdir / "password"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o700)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="skiff-pg-"))   # 0700
        password = secrets.token_hex(24)     # hex: nothing to escape in a URL
        write_private(self.password_file, password + "\n")
        for path in (self.workdir, self.socket_dir, self.password_file):
            if self._user is not None:
                os.chown(path, self._user.pw_uid, self._user.pw_gid)
        port = free_port()
        self._run_as_owner([pg_bin("initdb"), "-D", str(self._data), "-U", "postgres", "-A", "scram-sha-256",
                            f"--pwfile={self.password_file}", "-E", "UTF8", "--no-sync"])
        opts = (f"-p {port} -c listen_addresses=127.0.0.1 -k {self.socket_dir} -c unix_socket_permissions=0700 "
                "-c password_encryption=scram-sha-256 -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=300")
        self._run_as_owner([pg_bin("pg_ctl"), "-D", str(self._data), "-l", str(self.workdir / "postgres.log"),
                            "-o", opts, "-w", "-t", "60", "start"])
        return f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres"

    def stop(self) -> None:
        if self.url:
            try:
                conn = _pg_connect(self.admin_url)
                try:
                    conn.cursor().execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
                finally:
                    conn.close()
            except Exception as exc:  # the private cluster goes away below anyway
                if not self.private:
                    raise RuntimeError(f"could not drop test database {self.dbname}: {exc}") from exc
            self.url = ""
        if self.private and self._data.exists():
            self._run_as_owner([pg_bin("pg_ctl"), "-D", str(self._data), "-m", "fast", "-w", "stop"])
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.private and self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    def _demote(self):
        """As root, run PostgreSQL's tools as the ``postgres`` user (the server refuses root)."""
        user = self._user
        if user is None:
            return None

        def preexec():
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
        return preexec


class Redis:
    """A Redis db of its own for one session: a claimed db number in ``SKIFF_TEST_REDIS_URL``'s server, or a
    private ``redis-server``."""

    def __init__(self, workdir: Path, url: str | None = None):
        self.workdir = workdir
        self.server_url = url if url is not None else os.environ.get("SKIFF_TEST_REDIS_URL", "")
        self.private = not self.server_url
        self.url = ""
        self.token = secrets.token_hex(8)
        self._proc: subprocess.Popen | None = None

    def start(self) -> Redis:
        if self.private:
            self.server_url = self._start_private()
            self.url = with_database(self.server_url, "0")
        else:
            self.url = self._claim_db()
        return self

    def _start_private(self) -> str:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        server = shutil.which("redis-server") or "/usr/bin/redis-server"
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 (the child owns it)
        self._proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.workdir), "--save", "",
             "--appendonly", "no"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 30
        while not _redis_answers(url):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.workdir / 'redis.log'}")
            time.sleep(0.05)
        return url

    def _claim_db(self) -> str:
        import redis

        for db in range(1, 16):
            url = with_database(self.server_url, str(db))
            client = redis.Redis.from_url(url)
            try:
                if client.dbsize() == 0 and client.set(CLAIM_KEY, self.token, nx=True):
                    return url
            finally:
                client.close()
        raise RuntimeError(f"no empty Redis db number (1-15) left at {self.server_url}")

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
            shutil.rmtree(self.workdir, ignore_errors=True)
        elif self.url:
            import redis

            client = redis.Redis.from_url(self.url)
            try:
                if client.get(CLAIM_KEY) == self.token.encode():
                    client.flushdb()
            finally:
                client.close()
        self.url = ""


def _redis_answers(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def _pg_answers(url: str) -> bool:
    try:
        conn = _pg_connect(url)
    except Exception:
        return False
    try:
        cur = conn.cursor()
        cur.execute("SELECT rolcreatedb OR rolsuper FROM pg_roles WHERE rolname = current_user")
        return bool(cur.fetchone()[0])
    finally:
        conn.close()


def detect() -> dict[str, str]:
    """The URLs of a PostgreSQL / Redis answering on 127.0.0.1 (default ports), for those not already set."""
    found = {}
    if not os.environ.get("SKIFF_TEST_PG_URL") and _pg_answers(LOCAL_PG_URL):
        found["SKIFF_TEST_PG_URL"] = LOCAL_PG_URL
    if not os.environ.get("SKIFF_TEST_REDIS_URL") and _redis_answers(LOCAL_REDIS_URL):
        found["SKIFF_TEST_REDIS_URL"] = LOCAL_REDIS_URL
    return found


if __name__ == "__main__":
    if sys.argv[1:] != ["detect"]:
        sys.exit("usage: python -m devstack.services detect")
    for key, value in detect().items():
        print(f"export {key}={value}")
