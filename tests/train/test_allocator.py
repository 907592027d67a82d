"""keep_cpu_buffers: large freed buffers stay in the process for the next step."""

import platform

import pytest
import torch

from babelzoo.train.allocator import keep_cpu_buffers


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(platform.system() != "Linux" or not platform.libc_ver()[0] == "glibc", reason="glibc only")
def test_freed_large_buffers_stay_resident():
    assert keep_cpu_buffers() is True and keep_cpu_buffers() is True  # applied once, cached
    before = _rss_kib()
    buffer = torch.ones(64 * 2 ** 20)  # 256 MiB: far above glibc's 32 MiB mmap ceiling
    del buffer
    kept = _rss_kib() - before
    # With the default allocator this block is unmapped on free; here it stays in the heap.
    assert kept > 200 * 1024
    again = torch.empty(64 * 2 ** 20).fill_(2.0)  # served from the kept block: no new pages
    assert _rss_kib() - before < kept + 32 * 1024 and float(again[-1]) == 2.0
