"""The numba kernels, compiled ahead of time into the package's extension, or by numba's JIT where it is missing.

numba compiles a kernel on its first call, seconds per kernel, in every process whose cache
(``NUMBA_CACHE_DIR``) is empty: a new cluster node, a new container, a wheel in a read-only site-packages.
A Spark Python worker that decodes its first batch then pays over ten seconds, enough on a loaded machine
for Spark to give up on it. So the package build compiles the kernels once, with numba's ahead-of-time
compiler (``numba.pycc``), into the extension module ``pysparklog._compiled_kernels``, and a process that
finds it calls those and never imports numba.

There is one source of truth for a kernel: a plain function in its module, marked with ``@kernel`` (its
argument types for the extension, and its ``numba.njit`` options), and the module ends with
``KERNELS = bind(globals())``. ``bind`` puts in the module either the extension's compiled variants
(``"aot"``) or numba's JIT dispatchers of the very same functions (``"jit"``: a source checkout with no
build, an extension built from other sources, or ``PYSPARKLOG_KERNELS=jit``). A call whose arguments match
no compiled variant (another dtype, a strided array where a contiguous one was compiled) goes to the JIT
with a ``JitFallbackWarning``, never to code compiled for other types.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from pysparklog.errors import InvalidConfigError, PySparkLogError

if TYPE_CHECKING:
    from setuptools import Extension

F = TypeVar("F", bound=Callable[..., Any])

#: The extension module the package build writes (``setup.py``).
EXTENSION = "pysparklog._compiled_kernels"
#: The modules whose kernels the extension holds.
KERNEL_MODULES = (
    "pysparklog.storage.records.kernels",
    "pysparklog.partitioner_kernels",
    "pysparklog.storage.offset_map",
)
#: ``jit`` makes every module use numba's JIT; ``aot`` makes a missing or stale extension an error.
IMPLEMENTATION_VARIABLE = "PYSPARKLOG_KERNELS"
AOT = "aot"
JIT = "jit"

_TOP_LEVEL_COMMA = r",(?![^\[]*\])"  # a comma outside [...]
_BOOLS = (bool, np.bool_)
_INTEGERS = (int, np.integer)


class JitFallbackWarning(RuntimeWarning):
    """A kernel was called with argument types that its compiled variants do not take: numba's JIT compiles it."""


class KernelsUnavailableError(PySparkLogError, ImportError):
    """The kernels need numba's JIT (no usable extension, or a call no compiled variant takes) and numba is not
    installed: it is the ``jit`` extra, since a wheel carries the kernels compiled and needs no numba."""


@dataclass(frozen=True, slots=True)
class _Arg:
    """An argument type of a compiled variant, in numba's notation: ``i8`` (a scalar), ``u1[::1]`` (a
    contiguous array), ``i8[:]`` (any 1-D array), ``i8[:, ::1]`` (a contiguous 2-D array)."""

    dtype: np.dtype[Any]
    ndim: int  # 0 for a scalar
    contiguous: bool

    @classmethod
    def parse(cls, text: str) -> _Arg:
        match = re.fullmatch(r"\s*([a-z]\d)\s*(?:\[([:,\s1]*)\])?\s*", text)
        if match is None:
            raise ValueError(f"kernel argument type {text!r}: accepted: i8, b1, u1[::1], i8[:], i8[:, ::1]...")
        dtype = np.dtype(match.group(1))
        if match.group(2) is None:
            return cls(dtype, 0, False)
        dims = [d.replace(" ", "") for d in match.group(2).split(",")]
        if any(d not in (":", "::1") for d in dims) or "::1" in dims[:-1]:
            raise ValueError(f"kernel argument type {text!r}: only the last dimension can be ::1 (contiguous)")
        return cls(dtype, len(dims), dims[-1] == "::1")

    def accepts(self, value: object) -> bool:
        """Whether ``value`` can go to code compiled for this type: the extension trusts its caller."""
        if self.ndim == 0:
            return isinstance(value, _BOOLS if self.dtype.kind == "b" else _INTEGERS)
        return (
            isinstance(value, np.ndarray)
            and value.dtype == self.dtype
            and value.ndim == self.ndim
            and (not self.contiguous or value.flags.c_contiguous)
        )

    def numba_type(self) -> Any:
        import numba

        scalar = numba.from_dtype(self.dtype)
        return scalar if self.ndim == 0 else numba.types.Array(scalar, self.ndim, "C" if self.contiguous else "A")


@dataclass(frozen=True, slots=True)
class _Kernel:
    function: Callable[..., Any]
    options: Mapping[str, Any]  # numba.njit's
    signatures: tuple[tuple[_Arg, ...], ...]  # one compiled variant each; none: compiled only into its callers
    intrinsic: bool = False


_registry: dict[str, dict[str, _Kernel]] = {}
_jit_namespaces: dict[str, dict[str, Any]] = {}
#: Why a module bound the JIT, when it did.
jit_reasons: dict[str, str] = {}


def kernel(*signatures: str, **options: Any) -> Callable[[F], F]:
    """Mark a function as a kernel of its module, compiled with ``numba.njit(**options)``.

    Args:
        signatures: The argument types of each variant the extension holds, comma-separated
            (``"u1[::1], i8, i8"``). A kernel without one is a helper compiled into its callers.
        options: ``numba.njit``'s options; ``nogil`` holds for the compiled variants too.
    """

    def register(function: F) -> F:
        args = tuple(tuple(_Arg.parse(a) for a in re.split(_TOP_LEVEL_COMMA, s) if a.strip()) for s in signatures)
        _registry.setdefault(function.__module__, {})[function.__name__] = _Kernel(function, options, args)
        return function

    return register


def intrinsic(function: Callable[..., Any]) -> Any:
    """Mark the typer of a ``numba.extending.intrinsic`` for its module's kernels, which call it with their
    own arguments."""
    _registry.setdefault(function.__module__, {})[function.__name__] = _Kernel(function, {}, (), intrinsic=True)
    return function


def bind(namespace: dict[str, Any]) -> str:
    """Put the kernels of the module whose globals are ``namespace`` in it, compiled: the extension's, or
    numba's JIT dispatchers. Call it once, at the end of the module.

    Returns:
        ``"aot"`` or ``"jit"``, which the module keeps as ``KERNELS``.

    Raises:
        InvalidConfigError: ``$PYSPARKLOG_KERNELS`` is neither ``aot`` nor ``jit``, or is ``aot`` and the
            extension is missing or was built from other kernel sources.
    """
    module = namespace["__name__"]
    choice = os.environ.get(IMPLEMENTATION_VARIABLE, "").strip().lower()
    if choice not in ("", AOT, JIT):
        raise InvalidConfigError(f"{IMPLEMENTATION_VARIABLE}={choice!r} is invalid; accepted: {AOT}, {JIT}, unset")
    compiled, reason = (None, f"{IMPLEMENTATION_VARIABLE}={JIT}") if choice == JIT else _extension_of(module, namespace)
    if compiled is None:
        if choice == AOT:
            raise InvalidConfigError(f"{IMPLEMENTATION_VARIABLE}={AOT}, but {reason}")
        jit_reasons[module] = reason
        namespace.update(_jit_kernels(module, namespace, reason))
        return JIT
    namespace.update(_aot_kernels(module, compiled))
    return AOT


@contextmanager
def using(which: str) -> Iterator[None]:
    """Every kernel module's kernels (those with compiled variants) as ``which`` (``"aot"`` or ``"jit"``)
    provides them while the block runs, whichever the modules bound: what tests and benchmarks compare.

    Raises:
        InvalidConfigError: ``which`` is ``aot`` and the extension is unusable.
    """
    saved: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for module in KERNEL_MODULES:
            namespace = importlib.import_module(module).__dict__
            for name, function in _implementation(module, which).items():
                saved.append((namespace, name, namespace[name]))
                namespace[name] = function
        yield
    finally:
        for namespace, name, function in reversed(saved):
            namespace[name] = function


def _implementation(module: str, which: str) -> dict[str, Any]:
    if which == JIT:
        namespace = _jit_namespace(module, f"{module} asked for with using({JIT!r})")
        return {name: namespace[name] for name, k in _registry[module].items() if k.signatures}
    compiled, reason = _extension_of(module, sys.modules[module].__dict__)
    if compiled is None:
        raise InvalidConfigError(reason)
    return _aot_kernels(module, compiled)


def _extension_of(module: str, namespace: Mapping[str, Any]) -> tuple[Any, str]:
    """(the extension, "") when it holds the kernels of ``module`` as they are with the globals ``namespace``;
    otherwise (None, why not)."""
    try:
        compiled = importlib.import_module(EXTENSION)
    except ImportError as error:
        return None, f"the extension {EXTENSION} is not built ({error})"
    built = getattr(compiled, _symbol(module, "fingerprint"), None)
    if built is None:
        return None, f"the extension {EXTENSION} holds no kernels of {module}"
    if built() != fingerprint(module, namespace):
        return None, (
            f"the extension {EXTENSION} was built from other sources of {module}: rebuild it "
            "(python setup.py build_ext --inplace)"
        )
    return compiled, ""


class _AheadOfTime:
    """A kernel's compiled variants: a call goes to the first whose argument types match, else to the JIT."""

    def __init__(self, module: str, name: str, variants: list[tuple[Callable[..., Any], tuple[_Arg, ...]]]) -> None:
        self._module = module
        self.__name__ = self.__qualname__ = name
        self._variants = variants
        self.__doc__ = _registry[module][name].function.__doc__

    def __call__(self, *args: Any) -> Any:
        for compiled, types_ in self._variants:
            if len(args) == len(types_):
                for expected, arg in zip(types_, args, strict=True):
                    if not expected.accepts(arg):
                        break
                else:
                    return compiled(*args)
        described = ", ".join(map(_describe, args))
        mismatch = f"{self._module}.{self.__name__} has no compiled variant for arguments ({described})"
        jitted = _jit_namespace(self._module, mismatch)[self.__name__]
        warnings.warn(f"{mismatch}; numba's JIT compiles one", JitFallbackWarning, stacklevel=2)
        return jitted(*args)

    def __repr__(self) -> str:
        return f"<ahead-of-time kernel {self._module}.{self.__name__}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by name, as a function is (and a numba dispatcher): the unpickling process has its own."""
        return _kernel_named, (self._module, self.__name__)


def _kernel_named(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        layout = "C" if value.flags.c_contiguous else "strided"
        return f"{value.dtype}[{value.ndim}-D {layout}]"
    return type(value).__name__


def _aot_kernels(module: str, compiled: Any) -> dict[str, Callable[..., Any]]:
    return {
        name: _AheadOfTime(
            module,
            name,
            [(getattr(compiled, _symbol(module, name, i)), args) for i, args in enumerate(k.signatures)],
        )
        for name, k in _registry[module].items()
        if k.signatures
    }


def _jit_kernels(module: str, namespace: dict[str, Any], why: str) -> dict[str, Any]:
    """numba's JIT of every kernel of ``module``, each a copy of the function whose globals are ``namespace``,
    so that the kernels find one another there.

    Raises:
        KernelsUnavailableError: numba is not installed; ``why`` says why the JIT was needed.
    """
    try:
        from numba import extending, njit
    except ImportError:
        tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
        raise KernelsUnavailableError(
            f"{module} needs numba's JIT ({why}), and numba is not installed: install the pysparklog wheel built "
            f"for this Python ({tag}) and platform, or the JIT with pip install 'pysparklog[jit]'"
        ) from None
    jitted: dict[str, Any] = {}
    for name, k in _registry[module].items():
        function = k.function
        if function.__globals__ is not namespace:
            copy = types.FunctionType(
                function.__code__, namespace, function.__name__, function.__defaults__, function.__closure__
            )
            copy.__qualname__, copy.__module__, copy.__doc__ = function.__qualname__, module, function.__doc__
            function = copy
        jitted[name] = extending.intrinsic(function) if k.intrinsic else njit(**k.options)(function)
    return jitted


def _jit_namespace(module: str, why: str) -> dict[str, Any]:
    """A copy of ``module``'s globals with numba's JIT of every kernel: the JIT whichever the module bound.
    ``why`` it is needed goes into the error when numba is missing."""
    namespace = _jit_namespaces.get(module)
    if namespace is None:
        namespace = dict(sys.modules[module].__dict__)
        namespace.update(_jit_kernels(module, namespace, why))
        _jit_namespaces[module] = namespace
    return namespace


def fingerprint(module: str, namespace: Mapping[str, Any]) -> int:
    """A digest of ``module``'s kernels: their bytecode, signatures and options, and the values of the
    constants they read, which compiled code has frozen. The extension keeps the one it was built from."""
    digest = hashlib.sha256()
    for name, k in sorted(_registry[module].items()):
        digest.update(repr((name, k.signatures, sorted(k.options.items()), k.intrinsic)).encode())
        _digest_code(digest, k.function.__code__, namespace)
    return int.from_bytes(digest.digest()[:8], "little") >> 1  # an int64


def _digest_code(digest: Any, code: types.CodeType, namespace: Mapping[str, Any]) -> None:
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _digest_code(digest, const, namespace)
        else:
            digest.update(repr(const).encode())
    for name in code.co_names:
        value = namespace.get(name)
        if isinstance(value, int | float | str | bytes | tuple | np.generic):
            digest.update(f"{name}={value!r}".encode())


def _symbol(module: str, name: str, variant: int | None = None) -> str:
    """The extension's name for a kernel variant (or another per-module function) of ``module``."""
    suffix = "" if variant is None else f"_{variant}"
    return f"{module.replace('.', '_')}__{name}{suffix}"


# -- the build (setup.py) ---------------------------------------------------------------------------


def extension() -> Extension:
    """The setuptools extension that ``numba.pycc`` compiles from every kernel module's kernels.

    Each variant is compiled from the kernel's JIT copy (so that the kernels it calls are numba dispatchers,
    whatever the modules bound), with the kernel's ``nogil``; each module also gets its ``fingerprint``,
    which ``bind`` compares with the sources it runs.
    """
    releasing_the_gil: set[Callable[..., Any]] = set()
    # pycc targets the platform's generic CPU, so the wheel runs on any machine of its platform; these
    # byte-by-byte loops decode and encode as fast as the JIT's code for the host CPU (bench_cold_start).
    cc = _kernel_compiler(EXTENSION.rpartition(".")[2], releasing_the_gil)
    sources = []
    for module in KERNEL_MODULES:
        importlib.import_module(module)
        namespace = _jit_namespace(module, "the package build compiles the kernels ahead of time with it")
        sources.append(sys.modules[module].__file__)
        for name, k in _registry[module].items():
            function = namespace[name].py_func if k.signatures else None
            for i, args in enumerate(k.signatures):
                cc.export(_symbol(module, name, i), tuple(a.numba_type() for a in args))(function)
            if function is not None and k.options.get("nogil"):
                releasing_the_gil.add(function)
        built_from = fingerprint(module, sys.modules[module].__dict__)
        cc.export(_symbol(module, "fingerprint"), "i8()")(_returning(built_from))
    extension: Extension = cc.distutils_extension(depends=sources)
    return extension


def _returning(value: int) -> Callable[[], int]:
    def constant() -> int:
        return value

    return constant


def _kernel_compiler(name: str, releasing_the_gil: set[Callable[..., Any]]) -> Any:
    """pycc's ``CC`` for the extension ``name``, compiling the functions in ``releasing_the_gil`` as ``nogil``
    kernels: pycc compiles every function with the same flags, which hold the GIL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # pycc's notice; it still works in numba 0.68
        from numba.pycc import CC  # type: ignore[attr-defined]
    compiler: Any = importlib.import_module("numba.pycc.compiler")

    class KernelCompiler(CC):
        def _compile_object_files(self, build_dir: str) -> Any:
            compile_extra = compiler.compile_extra

            def compile_choosing_the_gil(
                typingctx: Any, targetctx: Any, func: Any, args: Any, returns: Any, flags: Any, *more: Any, **kw: Any
            ) -> Any:
                flags = flags.copy()
                flags.release_gil = func in releasing_the_gil
                return compile_extra(typingctx, targetctx, func, args, returns, flags, *more, **kw)

            compiler.compile_extra = compile_choosing_the_gil
            try:
                return super()._compile_object_files(build_dir)
            finally:
                compiler.compile_extra = compile_extra

    return KernelCompiler(name, source_module=__name__)  # type: ignore[no-untyped-call]
