"""keep_cpu_buffers: large freed buffers stay in the process for the next step."""

import json
import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: a pytest process has its own heap history (other tests, other arenas).
PROBE = """
import json, torch
from babelzoo.train.allocator import keep_cpu_buffers

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

def cycle():
    before = rss()
    buffer = torch.ones(64 * 2 ** 20)  # 256 MiB: far above glibc's 32 MiB mmap ceiling
    del buffer
    kept = rss() - before
    again = torch.empty(64 * 2 ** 20).fill_(2.0)
    grown = rss() - before
    del again
    return kept, grown

default = cycle()
applied = [keep_cpu_buffers(), keep_cpu_buffers()]
print(json.dumps({"default": default, "applied": applied, "kept": cycle()}))
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_large_buffers_stay_resident():
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    assert out["applied"] == [True, True]  # applied once, then cached
    kept, grown = out["kept"]
    # Default allocator: the block is unmapped on free (nothing stays resident).
    assert out["default"][0] < 16 * 1024
    # Kept: the freed 256 MiB stays resident, and the next 256 MiB reuses it (no second block).
    assert kept > 200 * 1024 and grown < kept + 32 * 1024
