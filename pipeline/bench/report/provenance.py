"""Where a bench ran: the host (CPU, cores, RAM, GPUs, load average) and each backend's engine.

Takes nothing but the machine (and, for backends, what the fleet detected); returns HostInfo and
BackendInfo records. Reads /proc and nvidia-smi; anything it cannot read is reported as unknown or empty.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

from pipeline.bench.load.sampler import nvidia_smi
from pipeline.records.provenance import GpuInfo, HostInfo
from pipeline.version import installed_version


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return 0.0


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def gpus() -> list[GpuInfo]:
    binary = nvidia_smi()
    if binary is None:
        return []
    try:
        out = subprocess.run(
            [binary, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        name, _, memory = line.rpartition(",")
        try:
            found.append(GpuInfo(name=name.strip(), memory_mib=float(memory)))
        except ValueError:
            found.append(GpuInfo(name=line.strip()))
    return found


def host_info() -> HostInfo:
    return HostInfo(
        cpu_model=cpu_model(),
        cores=os.cpu_count() or 0,
        ram_gib=ram_gib(),
        gpus=gpus(),
        loadavg_start=loadavg(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        fanout_version=installed_version(missing="unknown"),
    )
