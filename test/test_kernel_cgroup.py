"""The kernel's CPU, memory and process count: a cgroup v2 of its own where the machine delegates one, rlimits
(stated in the description result.json records) where it does not. Each path runs where the machine allows it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyrua_ros.kernel import Kernel, KernelLimits, cgroup

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


class Robo:
    def move_to(self, xyz: tuple[float, float, float]) -> tuple:
        """Pretend to move."""
        return tuple(xyz)


def test_without_a_delegated_cgroup_the_kernel_says_rlimits_bound_it(tmp_path):
    why = cgroup.fallback_reason()
    if why is None:
        pytest.skip("this machine delegates a cgroup v2: the cgroup path is tested below")
    with Kernel(Robo(), tmp_path / "ws") as kernel:
        assert kernel.description.endswith(
            f"CPU and memory bounded by rlimits only (RLIMIT_CPU 1800 s, RLIMIT_AS 4096 MiB): no cgroup, {why}")
        assert kernel.isolation["RLIMIT_CPU"] == 1800 and kernel.isolation["RLIMIT_AS"] == 4 * 2**30
        # what RLIMIT_AS does not count is bounded too, and result.json says how
        files = "at most 16384 and 1024 files" if os.geteuid() == 0 else "their file count not capped"
        assert (f"memory outside RLIMIT_AS: memfd and SysV shared memory refused, files in the 256 MiB workspace "
                f"and 16 MiB /tmp tmpfs, {files}") in kernel.description
        assert kernel.run_cell("1 + 1", 10).value == "2"


def test_with_a_delegated_cgroup_the_kernel_is_bounded_by_it(tmp_path):
    if cgroup.fallback_reason() is not None:
        pytest.skip(f"no delegated cgroup v2 here ({cgroup.fallback_reason()})")
    limits = KernelLimits(memory_bytes=256 * 2**20, cpus=0.5, interrupt_grace_s=1.0)
    with Kernel(Robo(), tmp_path / "ws", limits=limits) as kernel:
        group = kernel.process.cgroup.path
        assert str(kernel.pid) in (group / "cgroup.procs").read_text().split()
        assert (group / "memory.max").read_text().strip() == str(256 * 2**20)
        assert (group / "cpu.max").read_text().split() == ["50000", "100000"]
        assert "cgroup v2 pyrua-kernel-" in kernel.description
        out = kernel.run_cell("x = bytearray(1024 * 2**20)", 20)   # over memory.max (under RLIMIT_AS)
        assert out.exception is not None
        assert kernel.run_cell("1 + 1", 10).value == "2"
    assert not Path(group).exists()
