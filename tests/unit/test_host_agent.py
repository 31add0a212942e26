import os
import re
import subprocess
import sys
from pathlib import Path

from tierlab_host.extents import file_extents
from tierlab_host.system import ftrace_dev


def test_fiemap_agrees_with_filefrag(tmp_path):
    path = tmp_path / "table.ibd"
    with open(path, "wb") as f:
        for i in range(64):
            f.write(bytes([i]) * 16384)
            f.flush()
            os.fsync(f.fileno())
    output = subprocess.run(["filefrag", "-e", "-b4096", str(path)], capture_output=True, text=True, check=True,
                            timeout=120).stdout
    expected = []
    for m in re.finditer(r"^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*\d+:\s+(\d+):", output, re.MULTILINE):
        logical, _, physical, length = (int(x) for x in m.groups())
        expected.append([logical * 4096, physical * 4096, length * 4096, length * 4096])
    assert file_extents(str(path)) == expected
    assert sum(length for _, _, length, _ in expected) == 64 * 16384


def test_ftrace_dev_packs_major_and_minor_as_the_kernel_does():
    assert ftrace_dev("7:0") == 7340032
    assert ftrace_dev("7:1") == 7340033
    assert ftrace_dev("259:3") == 259 << 20 | 3


def test_the_agent_and_what_it_starts_run_on_every_cpu_though_it_was_started_on_one():
    # as Mitogen starts it on a host of two CPUs: on CPU 1 alone
    child = "from tierlab_host.system import run_on_every_cpu; run_on_every_cpu(); " \
        "import subprocess; subprocess.run(['grep', 'Cpus_allowed_list', '/proc/self/status'], check=True)"
    done = subprocess.run(["taskset", "-c", str(os.cpu_count() - 1), sys.executable, "-c", child], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    assert done.stdout == f"Cpus_allowed_list:\t{online}\n"
