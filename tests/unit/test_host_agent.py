import os
import re
import subprocess

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
