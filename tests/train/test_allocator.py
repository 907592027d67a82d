"""keep_cpu_buffers: a step that allocates the same large buffers as the last one no longer
page-faults them in again."""

import json
import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: a pytest process has its own heap history (other tests, other arenas).
# It imports the trainer, as a training process has: with torch alone loaded, this machine's
# glibc served the first large block after the change from fresh pages on every step.
PROBE = """
import json, resource, torch
import babelzoo.train.trainer
from babelzoo.train.allocator import keep_cpu_buffers

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def step():  # what a training step does with a large activation or gradient: allocate, write, free
    buffer = torch.empty(64 * 2 ** 20)  # 256 MiB, far above glibc's 32 MiB mmap ceiling
    buffer.fill_(1.0)
    del buffer

def faults_per_step():
    for _ in range(3):  # reach the steady state
        step()
    start = faults()
    step()
    return faults() - start

default = faults_per_step()
applied = [keep_cpu_buffers(), keep_cpu_buffers()]
print(json.dumps({"default": default, "applied": applied, "kept": faults_per_step()}))
"""
PAGES = 64 * 2 ** 20 * 4 // 4096  # 4 KiB pages in the buffer


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_a_repeated_large_buffer_is_not_faulted_in_again():
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    assert out["applied"] == [True, True]  # applied once, then cached
    assert out["default"] > PAGES // 2  # the default allocator maps fresh pages every step
    assert out["kept"] < PAGES // 20  # kept: the step reuses resident memory
