"""ctypes bindings for llama.cpp's EAGLE-3 and DFlash staging functions (``src/llama-ext.h``).

They are C++ functions, exported under mangled names: the Itanium ABI's on Linux and macOS,
MSVC's on Windows (x64). Each is looked up under its plain name first (a build that wraps the
header in ``extern "C"``), then under both mangled names. A build that lacks one gets an error
naming the symbol, not an AttributeError from deep inside a load.

The MSVC names were derived by hand and checked with ``llvm-undname``; the Itanium names are
the ones llama-cpp-python 0.3.36's ``libllama.so`` exports.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.errors import ModelLoadError

_CTX = ctypes.c_void_p  # struct llama_context *
_MODEL = ctypes.c_void_p  # const struct llama_model *
# the getters of float rows return an address (an int, None for NULL), read with
# ``ext_batch.floats_at``: cheaper than a ctypes pointer mapped by numpy
_ADDRESS = ctypes.c_void_p

# (plain name, Itanium name, MSVC x64 name), argument types, result type
_SIGNATURES: dict[str, tuple[tuple[str, str, str], list[Any], Any]] = {
    # void llama_set_embeddings_layer_inp(llama_context *, uint32_t lid, bool value)
    "set_embeddings_layer_inp": (
        (
            "llama_set_embeddings_layer_inp",
            "_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
            "?llama_set_embeddings_layer_inp@@YAXPEAUllama_context@@I_N@Z",
        ),
        [_CTX, ctypes.c_uint32, ctypes.c_bool],
        None,
    ),
    # float * llama_get_embeddings_layer_inp(llama_context *, uint32_t lid)
    "get_embeddings_layer_inp": (
        (
            "llama_get_embeddings_layer_inp",
            "_Z30llama_get_embeddings_layer_inpP13llama_contextj",
            "?llama_get_embeddings_layer_inp@@YAPEAMPEAUllama_context@@I@Z",
        ),
        [_CTX, ctypes.c_uint32],
        _ADDRESS,
    ),
    # const int32_t * llama_model_target_layer_ids(const llama_model *)
    "model_target_layer_ids": (
        (
            "llama_model_target_layer_ids",
            "_Z28llama_model_target_layer_idsPK11llama_model",
            "?llama_model_target_layer_ids@@YAPEBHPEBUllama_model@@@Z",
        ),
        [_MODEL],
        ctypes.POINTER(ctypes.c_int32),
    ),
    # uint32_t llama_model_target_layer_ids_n(const llama_model *)
    "model_target_layer_ids_n": (
        (
            "llama_model_target_layer_ids_n",
            "_Z30llama_model_target_layer_ids_nPK11llama_model",
            "?llama_model_target_layer_ids_n@@YAIPEBUllama_model@@@Z",
        ),
        [_MODEL],
        ctypes.c_uint32,
    ),
    # the next-token functions EAGLE-3 uses too: the head's encoder output and its pre-norm
    # hidden state come back through them (names as in llama_cpp/llama_cpp_ext.py)
    "set_embeddings_nextn": (
        (
            "llama_set_embeddings_nextn",
            "_Z26llama_set_embeddings_nextnP13llama_contextbb",
            "?llama_set_embeddings_nextn@@YAXPEAUllama_context@@_N1@Z",
        ),
        [_CTX, ctypes.c_bool, ctypes.c_bool],
        None,
    ),
    "get_embeddings_nextn": (
        (
            "llama_get_embeddings_nextn",
            "_Z26llama_get_embeddings_nextnP13llama_context",
            "?llama_get_embeddings_nextn@@YAPEAMPEAUllama_context@@@Z",
        ),
        [_CTX],
        _ADDRESS,
    ),
    "get_embeddings_nextn_ith": (
        (
            "llama_get_embeddings_nextn_ith",
            "_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
            "?llama_get_embeddings_nextn_ith@@YAPEAMPEAUllama_context@@H@Z",
        ),
        [_CTX, ctypes.c_int32],
        _ADDRESS,
    ),
}
# what a DFlash / DSpark drafter calls besides those
_DFLASH_SIGNATURES: dict[str, tuple[tuple[str, str, str], list[Any], Any]] = {
    # int32_t llama_model_dflash_selector_top_k(const llama_model *): DFlash2 when > 0
    "model_dflash_selector_top_k": (
        (
            "llama_model_dflash_selector_top_k",
            "_Z33llama_model_dflash_selector_top_kPK11llama_model",
            "?llama_model_dflash_selector_top_k@@YAHPEBUllama_model@@@Z",
        ),
        [_MODEL],
        ctypes.c_int32,
    ),
}


@dataclass(frozen=True)
class Eagle3Functions:
    """The staging functions an EAGLE-3 drafter calls, bound to one loaded libllama."""

    set_embeddings_layer_inp: Callable[[Any, int, bool], None]
    get_embeddings_layer_inp: Callable[[Any, int], int | None]
    model_target_layer_ids: Callable[[Any], Any]
    model_target_layer_ids_n: Callable[[Any], int]
    set_embeddings_nextn: Callable[[Any, bool, bool], None]
    get_embeddings_nextn: Callable[[Any], int | None]
    get_embeddings_nextn_ith: Callable[[Any, int], int | None]

    def target_layer_ids(self, head_model: Any) -> tuple[int, ...]:
        """The target layers whose inputs the head reads (``<arch>.target_layers``)."""
        n = int(self.model_target_layer_ids_n(head_model))
        pointer = self.model_target_layer_ids(head_model)
        if n and not pointer:
            raise ModelLoadError("llama.cpp reports target layers but returns no list of them")
        return tuple(int(pointer[i]) for i in range(n))


@dataclass(frozen=True)
class DFlashFunctions(Eagle3Functions):
    """The staging functions a DFlash, DFlash2 or DSpark drafter calls: EAGLE-3's (the target
    layers' inputs, the head's target layer ids, the next-token rows where DFlash2 leaves its
    selector lattice and DSpark its confidences) and DFlash2's selector width."""

    model_dflash_selector_top_k: Callable[[Any], int]


def _lookup(lib: ctypes.CDLL, names: tuple[str, ...]) -> Any | None:
    """A function object of our own (``lib[name]``, not the one ``getattr`` caches and
    llama-cpp-python's bindings share), so setting its result type changes no other caller."""
    for name in names:
        try:
            return lib[name]
        except AttributeError:
            continue
    return None


def _bind(
    lib: ctypes.CDLL | None,
    signatures: dict[str, tuple[tuple[str, str, str], list[Any], Any]],
    heads: str,
) -> dict[str, Any]:
    if lib is None:
        from llama_cpp import llama_cpp

        lib = llama_cpp._lib
    bound: dict[str, Any] = {}
    for field, (names, argtypes, restype) in signatures.items():
        function = _lookup(lib, names)
        if function is None:
            raise ModelLoadError(
                f"this llama.cpp build does not export {names[0]} (looked up as "
                f"{', '.join(names)}); it cannot run {heads}. Choose a draft model or "
                "n-gram drafting instead"
            )
        function.argtypes = argtypes
        function.restype = restype
        bound[field] = function
    return bound


def eagle3_functions(lib: ctypes.CDLL | None = None) -> Eagle3Functions:
    """Bind the EAGLE-3 functions in ``lib`` (default: llama-cpp-python's libllama)."""
    return Eagle3Functions(**_bind(lib, _SIGNATURES, "EAGLE-3 heads"))


def dflash_functions(lib: ctypes.CDLL | None = None) -> DFlashFunctions:
    """Bind the DFlash functions in ``lib`` (default: llama-cpp-python's libllama)."""
    signatures = _SIGNATURES | _DFLASH_SIGNATURES
    return DFlashFunctions(**_bind(lib, signatures, "DFlash or DSpark heads"))
