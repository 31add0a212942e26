"""Database instances as a DBA runs them, made by the tests outside tierlab's roles: data directories, ports, sockets
and accounts of their own, started and stopped by the tests (never by tierlab, which observes them). And a disk with
a partition table, whose one partition does not start at the disk's first sector, to keep them on."""

import os
import random
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

from lab import command

# a partition starting 3 MiB into its disk: every traced sector is that far from the file system's own offsets
PARTITION_START_SECTORS = 6144
POSTGRESQL_BIN = Path("/usr/lib/postgresql/15/bin")
START_TIMEOUT_S = 120
# a loading server writes its pages back in large batches, not one evicted page at a time
LOADING_BUFFER_POOL = "512M"
MEMORY_GROUPS = Path("/sys/fs/cgroup/memory")
# where the instances' disks and directories are made: a path every user may traverse (the servers run as postgres
# and mysql), apart from any tierlab root
OWN_ROOT = Path("/var/lib/tierlab-own-instances")


def own_dir(name: str) -> Path:
    """A directory of OWN_ROOT's for one instance's files, made empty."""
    path = OWN_ROOT / name
    path.mkdir(parents=True)
    OWN_ROOT.chmod(0o755)
    return path


def remove_own_dir(path: Path) -> None:
    shutil.rmtree(path)
    if not any(OWN_ROOT.iterdir()):
        OWN_ROOT.rmdir()


def _ok(cmd: list[str], what: str, timeout_s: float, **kwargs) -> subprocess.CompletedProcess:
    done = command(cmd, what, timeout_s, **kwargs)
    assert done.returncode == 0, f"{what} failed: {done.stderr[-3000:]}"
    return done


class PartitionedDisk:
    """A loop device over a sparse file, with a DOS partition table of one partition, ext4 on it, mounted."""

    def __init__(self, here: Path, size_bytes: int):
        self.image = here / "disk.img"
        self.mount = here / "mnt"
        with open(self.image, "wb") as f:
            f.truncate(size_bytes)
        _ok(["sfdisk", "-q", str(self.image)], "sfdisk", 60, input=f"start={PARTITION_START_SECTORS}, type=83\n")
        self.loop = _ok(["losetup", "--find", "--show", "--partscan", str(self.image)], "losetup", 60).stdout.strip()
        name = Path(self.loop).name
        self.partition = Path(f"/dev/{name}p1")
        # the kernel lists the partition once asked to (partx); without udev its device node is the test's to make
        _ok(["partx", "-a", self.loop], "partx -a", 60)
        major, minor = Path(f"/sys/class/block/{name}p1/dev").read_text().split(":")
        self.made_node = not self.partition.exists()
        if self.made_node:
            os.mknod(self.partition, 0o600 | stat.S_IFBLK, os.makedev(int(major), int(minor)))
        _ok(["mkfs.ext4", "-q", "-F", str(self.partition)], "mkfs.ext4", 120)
        self.mount.mkdir()
        _ok(["mount", str(self.partition), str(self.mount)], "mount", 60)

    def close(self) -> None:
        _ok(["umount", str(self.mount)], "umount", 120)
        _ok(["losetup", "-d", self.loop], "losetup -d", 60)
        if self.made_node:
            self.partition.unlink()
        self.image.unlink()


class OwnPostgresql:
    """A cluster of its own (initdb) as user postgres, on a port and socket directory of its own; in a memory group of
    its own (cgroup v1), as a container's memory limit bounds a server, so that what it reads does not all stay in the
    page cache. settings: more server settings, as postgresql.conf names them."""

    def __init__(self, datadir: Path, port: int, shared_buffers: str = "16MB", settings: dict[str, str] | None = None):
        self.datadir, self.port = datadir, port
        self.memory_group = MEMORY_GROUPS / f"tierlab-own-postgresql-{port}"
        assert MEMORY_GROUPS.is_dir(), f"no cgroup v1 memory controller at {MEMORY_GROUPS} to bound the server with"
        self.socket_dir = datadir.parent / "pg-socket"
        for path in (datadir, self.socket_dir):
            path.mkdir(parents=True)
            shutil.chown(path, "postgres", "postgres")
        password = datadir.parent / "initdb-password"
        password.write_text("postgres-secret\n")
        shutil.chown(password, "postgres", "postgres")
        self._as_postgres([str(POSTGRESQL_BIN / "initdb"), "--no-instructions", "-A", "scram-sha-256",
                           f"--pwfile={password}", "-U", "postgres", "-D", str(datadir)], "initdb")
        password.unlink()
        self.log = datadir.parent / "postgresql.log"
        self.log.touch()
        shutil.chown(self.log, "postgres", "postgres")
        # the shell joins the memory group, then becomes pg_ctl, whose server is born in it
        start = [str(POSTGRESQL_BIN / "pg_ctl"), "-D", str(datadir), "-l", str(self.log), "-w", "-t",
                 str(START_TIMEOUT_S), "-o", f"-p {port} -k {self.socket_dir} -c listen_addresses='' "
                 f"-c shared_buffers={shared_buffers}"
                 + "".join(f" -c {name}={value}" for name, value in (settings or {}).items()), "start"]
        self.memory_group.mkdir()
        try:
            _ok(["sh", "-c", f'echo $$ > {self.memory_group / "cgroup.procs"} && exec "$@"', "sh", "runuser", "-u",
                 "postgres", "--", *start], "pg_ctl start", START_TIMEOUT_S, cwd="/")
        except AssertionError:
            self.memory_group.rmdir()
            raise
        self.passfile = datadir.parent / "admin.pgpass"
        self.passfile.write_text("*:*:*:postgres:postgres-secret\n")
        self.passfile.chmod(0o600)

    def _as_postgres(self, cmd: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
        return _ok(["runuser", "-u", "postgres", "--", *cmd], what, START_TIMEOUT_S,
                       cwd="/", **kwargs)

    def conninfo(self, user: str = "postgres", passfile: Path | None = None) -> str:
        return f"host={self.socket_dir} port={self.port} user={user} passfile={passfile or self.passfile}"

    def sql(self, sql: str, database: str = "postgres") -> str:
        return _ok(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d",
                        f"{self.conninfo()} dbname={database}", "-c", sql], "psql", 600).stdout

    def account(self, user: str, password: str, here: Path, grants: str = "") -> str:
        """A login role (granted `grants`, if any) and a conninfo that logs in as it through a passfile of its own."""
        self.sql(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        if grants:
            self.sql(f"GRANT {grants} TO {user}")
        passfile = here / f"{user}.pgpass"
        passfile.write_text(f"*:*:*:{user}:{password}\n")
        passfile.chmod(0o600)
        return self.conninfo(user, passfile)

    def bound(self, memory_bytes: int) -> None:
        """Bound the server's memory, its page cache included (a load's sorts need more than its queries)."""
        (self.memory_group / "memory.limit_in_bytes").write_text(f"{memory_bytes}\n")

    def stop(self) -> None:
        self._as_postgres([str(POSTGRESQL_BIN / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"],
                          "pg_ctl stop")
        # pg_ctl returns once the server has removed its pid file, a moment before its last process leaves the group
        deadline = time.monotonic() + START_TIMEOUT_S
        while left := (self.memory_group / "cgroup.procs").read_text().split():
            assert time.monotonic() < deadline, f"processes {left} stayed in {self.memory_group} for {START_TIMEOUT_S} s"
            time.sleep(0.1)
        self.memory_group.rmdir()


class OwnMariadb:
    """A server of its own (mariadb-install-db, then mariadbd as user mysql) with direct I/O, loaded with a buffer
    pool of LOADING_BUFFER_POOL and then bound to a small one, so that its reads reach the device; the performance
    schema on, as many DBAs run it."""

    def __init__(self, datadir: Path, port: int):
        self.datadir, self.port = datadir, port
        self.socket = datadir.parent / "mariadb.sock"
        datadir.mkdir(parents=True)
        # the server writes its socket, log and pid file beside its data directory
        for path in (datadir, datadir.parent):
            shutil.chown(path, "mysql", "mysql")
        _ok(["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=mysql",
                 "--auth-root-authentication-method=socket", "--skip-test-db"], "mariadb-install-db", START_TIMEOUT_S)
        self.log = datadir.parent / "mariadb.err"
        self.buffer_pool = LOADING_BUFFER_POOL
        self.start()

    def start(self) -> None:
        argv = ["mariadbd", "--no-defaults", f"--datadir={self.datadir}", f"--socket={self.socket}", f"--port={self.port}",
                "--bind-address=127.0.0.1", "--user=mysql", f"--innodb-buffer-pool-size={self.buffer_pool}",
                "--innodb-flush-method=O_DIRECT", "--performance-schema=ON", f"--log-error={self.log}",
                f"--pid-file={self.datadir.parent / 'mariadb.pid'}"]
        self.server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while command(["mariadb-admin", "--no-defaults", f"--socket={self.socket}", "-uroot", "ping"], "mariadb-admin ping",
                      60).returncode != 0:
            assert self.server.poll() is None, f"mariadbd exited: {self.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"mariadbd did not answer within {START_TIMEOUT_S} s"
            time.sleep(0.5)

    def bound(self, buffer_pool: str) -> None:
        """The server started again with a buffer pool of buffer_pool (and nothing of the load left in it)."""
        self.stop()
        self.buffer_pool = buffer_pool
        self.start()

    def sql(self, sql: str, database: str = "") -> str:
        return _ok(["mariadb", "--no-defaults", f"--socket={self.socket}", "-uroot", "--batch",
                        "--skip-column-names", *([database] if database else []), "-e", sql], "mariadb", 600).stdout

    def account(self, user: str, password: str, here: Path, grants: str = "") -> Path:
        """An account (granted `grants` ON *.*, if any) and a client option file that logs in as it."""
        self.sql(f"CREATE USER '{user}'@'localhost' IDENTIFIED BY '{password}'")
        if grants:
            self.sql(f"GRANT {grants} ON *.* TO '{user}'@'localhost'")
        client_file = here / f"{user}.cnf"
        client_file.write_text(f"[client]\nuser={user}\npassword={password}\nsocket={self.socket}\n")
        client_file.chmod(0o600)
        return client_file

    def stop(self) -> None:
        self.server.send_signal(signal.SIGTERM)
        self.server.wait(timeout=START_TIMEOUT_S)


class Traffic:
    """A DBA's own traffic on an instance, on threads of its own until stopped: one connection looks up small ranges
    of an indexed column at random, over and over (a hot index), others run the statements given once at the
    seconds given (a rarely read table, a table dropped), counted from when begun() first holds (the observation's
    window has begun: a busy host takes longer to get there). Each lookup's commit is kept by its time (time.time()),
    to hold against the work the instance counted."""

    def __init__(self, connect, lookup: str, keys: int, once: list[tuple[float, str]], begun):
        self.connect, self.lookup, self.keys, self.once, self.begun = connect, lookup, keys, once, begun
        self.stopping = threading.Event()
        self.lookups: list[float] = []
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._lookups, daemon=True),
                        threading.Thread(target=self._once, daemon=True)]

    def _guarded(self, work) -> None:
        try:
            work()
        except Exception as exc:
            self.errors.append(repr(exc))

    def _lookups(self) -> None:
        def work():
            connection = self.connect()
            cursor = connection.cursor()
            while not self.stopping.is_set():
                key = random.randrange(self.keys)
                cursor.execute(self.lookup, (key, key + 20))
                cursor.fetchall()
                connection.commit()
                self.lookups.append(time.time())
        self._guarded(work)

    def _once(self) -> None:
        def work():
            connection = self.connect()
            while not self.begun():
                if self.stopping.wait(timeout=0.1):
                    return
            started = time.monotonic()
            for at_s, sql in self.once:
                if self.stopping.wait(timeout=max(0.0, started + at_s - time.monotonic())):
                    return
                cursor = connection.cursor()
                cursor.execute(sql)
                if cursor.description:
                    cursor.fetchall()
                connection.commit()
        self._guarded(work)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=600)
