"""keep_cpu_buffers: within a run, a step that allocates the same large buffers as the last one
no longer page-faults them in again; after the run, glibc's default limits are back."""

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
from babelzoo.train.allocator import cpu_buffers_kept

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def resident_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2 ** 20

def step(mib=256):  # what a training step does with a large activation or gradient: allocate, write, free
    buffer = torch.empty(mib * 2 ** 18)  # far above glibc's 32 MiB mmap ceiling
    buffer.fill_(1.0)
    del buffer

def faults_per_step(mib=256):
    for _ in range(3):  # reach the steady state
        step(mib)
    start = faults()
    step(mib)
    return faults() - start

default = faults_per_step()
with cpu_buffers_kept() as outer:
    with cpu_buffers_kept() as inner:  # a run inside a run shares the change
        nested = faults_per_step()
    kept = faults_per_step()  # the inner run's end leaves the outer one's change in place
    held = resident_mib()
released = held - resident_mib()
# a block larger than any the run freed: glibc's limits are its defaults again, so it is mapped afresh
after = faults_per_step(320)
print(json.dumps({"default": default, "applied": [outer, inner], "nested": nested, "kept": kept,
                  "released_mib": released, "after": after}))
"""
PAGES = 64 * 2 ** 20 * 4 // 4096  # 4 KiB pages in the buffer


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_a_repeated_large_buffer_is_not_faulted_in_again():
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    assert out["applied"] == [True, True]
    assert out["default"] > PAGES // 2  # the default allocator maps fresh pages every step
    assert out["nested"] < PAGES // 20 and out["kept"] < PAGES // 20  # kept: the step reuses resident memory
    assert out["released_mib"] > 200  # the run over, the 256 MiB it kept goes back to the system
    assert out["after"] > PAGES  # and a large block is mapped afresh every step (320 MiB: 81,920 pages)
