"""Two hosts of the tests' own on this machine, reached over SSH as real inventories reach theirs: an sshd each on a
loopback address of its own (127.0.0.2, 127.0.0.3), with a host key, an authorized key and a configuration the
tests make. node-a is reached as a user of the tests' own who becomes root through sudo, node-b as root. What is
made here (the user, its sudoers file, the sshd privilege separation directory when it was missing, the sshd
processes, its home) is removed again by close(), and nothing else on the host is touched."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import yaml
from lab import ROOT, command

USER = "tierlab-ssh-test"
SUDOERS = Path("/etc/sudoers.d") / USER
PRIVSEP_DIR = Path("/run/sshd")
PORT = 2222
# name: (address, user, the number its database ports start with)
HOSTS = {"node-a": ("127.0.0.2", USER, 37), "node-b": ("127.0.0.3", "root", 39)}
SSHD_CONFIG = """ListenAddress {address}:{port}
HostKey {here}/host_key
PidFile {here}/{name}.pid
AuthorizedKeysFile {home}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
"""
START_TIMEOUT_S = 30


class SshHosts:
    def __init__(self, here: Path):
        self.here = here
        self.made: list[tuple[str, object]] = []
        self.sshd: dict[str, subprocess.Popen] = {}
        self.logs: list = []

    def open(self) -> Path:
        """The user, the keys, an sshd per host; the inventory that reaches them."""
        if command(["id", USER], "id", 60).returncode == 0:
            raise AssertionError(f"a user {USER} exists already: a test run that failed left it (userdel -r {USER})")
        # sshd reads the authorized keys as the user, so they live where the user can reach them: pytest's own
        # directories are root's alone
        home = Path(tempfile.mkdtemp(prefix=f"{USER}-"))
        self.made.append(("tree", home))
        ok(["useradd", "--system", "--home-dir", str(home), "--shell", "/bin/sh", USER], "useradd")
        self.made.append(("user", USER))
        # no password, and not locked: sshd without PAM refuses a locked account even to a key
        ok(["usermod", "--password", "*", USER], "usermod")
        home.chmod(0o755)
        shutil.chown(home, USER, USER)
        SUDOERS.write_text(f"{USER} ALL=(ALL) NOPASSWD: ALL\n")
        SUDOERS.chmod(0o440)
        self.made.append(("file", SUDOERS))
        if not PRIVSEP_DIR.exists():
            PRIVSEP_DIR.mkdir(mode=0o755)
            self.made.append(("directory", PRIVSEP_DIR))
        ok(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.here / "host_key")], "ssh-keygen (host)")
        ok(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.here / "id_ed25519")], "ssh-keygen (client)")
        shutil.copy(self.here / "id_ed25519.pub", home / "authorized_keys")
        shutil.chown(home / "authorized_keys", USER, USER)
        for name, (address, _, _) in HOSTS.items():
            config = self.here / f"{name}.sshd_config"
            config.write_text(SSHD_CONFIG.format(address=address, port=PORT, here=self.here, home=home, name=name))
            self.start(name)
        return self.inventory()

    def start(self, name: str) -> None:
        """The host's sshd, listening."""
        self.logs.append(open(self.here / f"{name}.sshd.log", "a"))
        self.sshd[name] = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(self.here / f"{name}.sshd_config")],
                                           stderr=self.logs[-1])
        wait_listening(name, HOSTS[name][0], self.sshd[name])

    def inventory(self) -> Path:
        inventory = yaml.safe_load((ROOT / "playbooks" / "inventory" / "two-local.yml").read_text())
        del inventory["all"]["vars"]["ansible_connection"], inventory["all"]["vars"]["ansible_python_interpreter"]
        ssh = {"ansible_port": PORT, "ansible_python_interpreter": "/usr/bin/python3", "ansible_host_key_checking": False,
               "ansible_ssh_private_key_file": str(self.here / "id_ed25519"),
               "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                          "-o IdentitiesOnly=yes"}
        inventory["all"]["hosts"] = {
            name: {**ssh, "ansible_host": address, "ansible_user": user, "ansible_become": user != "root",
                   "tierlab_root": f"/var/lib/tierlab-{name}", "postgresql_port": number * 100 + 16,
                   "mysql_port_base": {"mariadb": number * 100, "mysql": number * 100 + 50}}
            for name, (address, user, number) in HOSTS.items()}
        path = self.here / "two-hosts.yml"
        path.write_text(yaml.safe_dump(inventory))
        return path

    def cut(self, name: str) -> list[int]:
        """Lose a host as a network that fails would: every open connection to it dropped (its sshd's session
        processes killed) and new ones refused (its listener stopped) until start() again. Dropping the open ones
        alone is not enough: the next task would connect anew and the point go on."""
        listener = self.sshd.pop(name)
        # each connection is a privileged monitor and the user's own process under it, which holds the socket
        sessions = descendants(listener.pid)
        listener.terminate()
        listener.wait(timeout=60)
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return sessions

    def close(self) -> None:
        for process in self.sshd.values():
            process.terminate()
            process.wait(timeout=60)
        for log in self.logs:
            log.close()
        for kind, what in reversed(self.made):
            if kind == "user":
                ok(["userdel", what], "userdel")
            elif kind == "file":
                what.unlink()
            elif kind == "tree":
                shutil.rmtree(what)
            else:
                what.rmdir()


def descendants(pid: int) -> list[int]:
    """The processes under pid, at any depth."""
    found = []
    for child in command(["pgrep", "-P", str(pid)], "pgrep", 60).stdout.split():
        found += [int(child), *descendants(int(child))]
    return found


def ok(cmd: list[str], what: str) -> None:
    done = command(cmd, what, 120)
    assert done.returncode == 0, f"{what}: {done.stderr}"


def wait_listening(name: str, address: str, sshd: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert sshd.poll() is None, f"the sshd of {name} exited with {sshd.returncode}"
        with socket.socket() as probe:
            if probe.connect_ex((address, PORT)) == 0:
                return
        assert time.monotonic() < deadline, f"the sshd of {name} did not listen on {address}:{PORT} within {START_TIMEOUT_S} s"
        time.sleep(0.1)
