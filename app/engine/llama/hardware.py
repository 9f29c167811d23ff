"""The machine: memory (psutil), and what llama.cpp sees — version, CPU features, GPU offload
and its backend devices with their free memory (ggml's own device list, so CUDA, Metal and
Vulkan are all found the same way, without vendor tools)."""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass
from importlib.metadata import version

import llama_cpp
import psutil

from app.engine.llama.repacking import repacking_enabled
from app.engine.llama.runtime import ensure_backend

_DEVICE_TYPES = {0: "CPU", 1: "GPU", 2: "iGPU", 3: "accelerator"}


@dataclass(frozen=True)
class Device:
    """One ggml backend device, as llama.cpp lists it."""

    name: str  # ggml's name for it, e.g. "CUDA0"
    description: str  # the product, e.g. "NVIDIA GeForce RTX 4090"; may be empty
    kind: str  # "CPU", "GPU", "iGPU" or "accelerator"
    free_bytes: int
    total_bytes: int

    @property
    def label(self) -> str:
        """What a person recognises it by."""
        return self.description or self.name


def _ggml() -> ctypes.CDLL:
    from llama_cpp._ggml import libggml

    lib: ctypes.CDLL = libggml
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_name.restype = ctypes.c_char_p
    lib.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_description.restype = ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.ggml_backend_dev_memory.restype = None
    return lib


def devices() -> list[Device]:
    """Every ggml backend device with its free/total memory (ggml backend device API)."""
    ensure_backend()
    lib = _ggml()
    found = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        found.append(
            Device(
                name=(lib.ggml_backend_dev_name(dev) or b"").decode(),
                description=(lib.ggml_backend_dev_description(dev) or b"").decode(),
                kind=_DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"),
                free_bytes=free.value,
                total_bytes=total.value,
            )
        )
    return found


def gpu_offload() -> bool:
    """Whether this llama.cpp build can offload layers to a GPU."""
    return bool(llama_cpp.llama_supports_gpu_offload())


@dataclass(frozen=True)
class Hardware:
    backend: str  # "CUDA", "Metal", "Vulkan" or "CPU"
    gpus: tuple[Device, ...]  # the GPUs llama.cpp offloads to
    ram_total: int
    ram_free: int
    cpu_count: int

    @property
    def gpu_free(self) -> int:
        return sum(g.free_bytes for g in self.gpus)

    @property
    def uses_gpu(self) -> bool:
        return self.backend != "CPU" and bool(self.gpus)


def system_memory() -> tuple[int, int]:
    """(total, available) system RAM in bytes, on every platform."""
    memory = psutil.virtual_memory()
    return int(memory.total), int(memory.available)


def _backend_of(device: Device) -> str:
    name = device.name.lower()
    for backend in ("CUDA", "Metal", "Vulkan", "ROCm", "SYCL"):
        if name.startswith(backend.lower()):
            return backend
    return device.name or "GPU"


def detect_hardware() -> Hardware:
    total, available = system_memory()
    cpus = os.cpu_count() or 1
    if not gpu_offload():
        return Hardware("CPU", (), total, available, cpus)
    gpus = tuple(d for d in devices() if d.kind in ("GPU", "iGPU"))
    if not gpus:
        return Hardware("CPU", (), total, available, cpus)
    return Hardware(_backend_of(gpus[0]), gpus, total, available, cpus)


def system_info() -> str:
    ensure_backend()
    return llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()


def llama_cpp_version() -> str:
    return version("llama-cpp-python")


def version_report(app_version: str) -> str:
    lines = [
        f"SpecDeck {app_version}",
        f"llama-cpp-python {llama_cpp_version()}",
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}",
        f"GPU offload available: {'yes' if gpu_offload() else 'no'}",
        f"llama.cpp system info: {system_info()}",
        f"CPU {repacking_enabled().describe()}",
        "devices:",
    ]
    for d in devices():
        lines.append(
            f"  {d.name} ({d.kind}): {d.description} — "
            f"{d.free_bytes / 2**30:.1f} GiB free of {d.total_bytes / 2**30:.1f} GiB"
        )
    return "\n".join(lines)
