"""Whether the Python that Spark starts for its Python workers has pysparklog, checked from the driver.

Spark finds ``format("pysparklog")`` by itself in a Python worker (``pyspark.sql.worker.lookup_data_sources`` lists
the installed ``pyspark_*`` modules), and runs the source's planning and its tasks in such workers too. Spark 4.2's
JVM starts them with ``PYSPARK_DRIVER_PYTHON``, else ``PYSPARK_PYTHON``, else ``python3``, found on its ``PATH``
(``PythonUtils.defaultPythonExec``: the JVM's environment, not the ``spark.pyspark.python`` setting, which only
``spark-submit`` reads for the driver's own process). With the user's environment not activated, that is a Python
without pysparklog, and the source is not found (``DATA_SOURCE_NOT_FOUND``) with nothing in Spark's error saying why.

A process that imports pysparklog therefore checks, once Spark's choice is fixed, and warns
(``PythonWorkerEnvironmentWarning``) naming the Python, where the choice came from, and the fix:

* with a SparkContext already running (a notebook, the ``pyspark`` shell), at once, in the JVM's environment;
* with a JVM that started this process (``spark-submit``: ``PYSPARK_GATEWAY_PORT``), at once, in this process's
  environment, which it inherited;
* otherwise when this process starts Spark's JVM (``spark-submit``, run by ``SparkSession.builder.getOrCreate()``),
  in the environment it gives the JVM: an audit hook (PEP 578) sees that launch. Checking at import instead would
  warn wrongly about the many programs that set ``PYSPARK_PYTHON`` after their imports, before Spark starts
  (``pysparklog.spark.session.local_spark`` among them), and about programs that never start Spark.

Nothing is checked in Spark's own Python workers, on Databricks (whose runtime chooses its workers' Python itself),
or without pyspark's classic (JVM) part (a Spark Connect client, where the server's Python matters). The common case
costs a few environment reads: a ``PYSPARK_PYTHON`` (or ``python3`` on ``PATH``) in this process's own environment
needs no check and installs no hook. Only a Python elsewhere is asked, once per launch, in a short subprocess,
whether it finds ``pyspark_pysparklog`` (without importing it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import warnings
from collections.abc import Mapping
from enum import Enum
from importlib.machinery import PathFinder
from typing import Any, NamedTuple

from pysparklog.errors import PythonWorkerEnvironmentWarning

#: The variables Spark's JVM reads, in its order, for the Python of the data source lookup and of the source's tasks.
DRIVER_PYTHON_VARIABLE = "PYSPARK_DRIVER_PYTHON"
PYTHON_VARIABLE = "PYSPARK_PYTHON"
#: What Spark runs when neither variable is set, found on ``PATH``.
DEFAULT_PYTHON = "python3"
#: The module through which Spark finds the source.
SOURCE_MODULE = "pyspark_pysparklog"
#: How long the Python Spark would start may take to answer, in seconds; no answer, no warning.
PROBE_TIMEOUT_S = 10.0
#: The probe's exit status when the Python does not find the source module (any other failure is a Python that
#: does not run).
_SOURCE_MISSING_STATUS = 3
_PROBE = (
    f"import importlib.util, sys; "
    f"sys.exit(0 if importlib.util.find_spec({SOURCE_MODULE!r}) else {_SOURCE_MISSING_STATUS})"
)
#: Variables of a Python worker's environment, one or another set in every worker Spark starts (``BasePythonRunner``,
#: ``PythonPlannerRunner``, ``PythonWorkerFactory``).
_WORKER_MARKERS = (
    "SPARK_PYTHON_RUNTIME",
    "PYTHON_WORKER_FACTORY_SECRET",
    "PYTHON_WORKER_FACTORY_PORT",
    "PYTHON_WORKER_FACTORY_SOCK_PATH",
)
_LAUNCHERS = ("spark-submit", "spark-submit.cmd")
#: Modules whose frames a warning skips, so that it points at the user's line that imported pysparklog or started
#: Spark.
_INTERNAL_MODULES = ("pysparklog", "pyspark", "py4j", "subprocess", "importlib", "warnings")


class WorkerPython(NamedTuple):
    """The Python Spark will start for its Python workers.

    Attributes:
        command: As Spark names it (a variable's value, or ``python3``).
        variable: The variable that chose it, or that would choose another (``PYSPARK_PYTHON`` when none is set).
        origin: How Spark came to it, in words.
        path: The executable ``command`` is on ``PATH`` (or as a path), or None when there is none.
    """

    command: str
    variable: str
    origin: str
    path: str | None


def worker_python(environment: Mapping[str, str]) -> WorkerPython:
    """The Python Spark's JVM starts for Python data sources when its environment is ``environment``."""
    search_path = environment.get("PATH", os.defpath)
    if DRIVER_PYTHON_VARIABLE in environment:
        command = environment[DRIVER_PYTHON_VARIABLE]
        origin = (
            f"{DRIVER_PYTHON_VARIABLE}={command} (which Spark prefers to {PYTHON_VARIABLE} for Python data sources)"
        )
        return WorkerPython(command, DRIVER_PYTHON_VARIABLE, origin, shutil.which(command, path=search_path))
    if PYTHON_VARIABLE in environment:
        command = environment[PYTHON_VARIABLE]
        return WorkerPython(
            command, PYTHON_VARIABLE, f"{PYTHON_VARIABLE}={command}", shutil.which(command, path=search_path)
        )
    path = shutil.which(DEFAULT_PYTHON, path=search_path)
    where = f" ({path})" if path else ""
    origin = f"{DEFAULT_PYTHON} from PATH{where}, as neither {DRIVER_PYTHON_VARIABLE} nor {PYTHON_VARIABLE} is set"
    return WorkerPython(DEFAULT_PYTHON, PYTHON_VARIABLE, origin, path)


def is_this_environment(path: str) -> bool:
    """Whether the executable at ``path`` is this interpreter's environment, told by paths alone: symlinks are not
    followed, since a virtual environment's ``bin/python`` links to a base interpreter that lacks its packages. Any
    name in a virtual environment's ``bin`` runs that environment."""
    executable = os.path.abspath(sys.executable)
    candidate = os.path.abspath(path)
    in_virtual_environment = sys.prefix != sys.base_prefix
    return candidate == executable or (
        in_virtual_environment and os.path.dirname(candidate) == os.path.dirname(executable)
    )


class Finding(Enum):
    """What the Python Spark will start makes of the source module."""

    FINDS_SOURCE = "finds it"
    LACKS_SOURCE = "does not have pysparklog"
    DOES_NOT_RUN = "does not run"
    NOT_FOUND = "is not found"
    NO_ANSWER = "did not answer in time"


def probe(worker: WorkerPython, environment: Mapping[str, str]) -> Finding:
    """Ask ``worker``, in ``environment`` (the one Spark gives it, ``PYTHONPATH`` included) and this process's working
    directory (a local Spark's workers run in the driver's), whether it finds the source module, without importing
    it."""
    if worker.path is None:
        return Finding.NOT_FOUND
    if is_this_environment(worker.path):
        return Finding.FINDS_SOURCE
    import subprocess  # here, not at the top: importing pysparklog stays instant when no probe is needed

    try:
        answer = subprocess.run(
            [worker.path, "-c", _PROBE],
            env=dict(environment),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return Finding.NO_ANSWER
    except OSError:
        return Finding.DOES_NOT_RUN
    if answer.returncode == 0:
        return Finding.FINDS_SOURCE
    return Finding.LACKS_SOURCE if answer.returncode == _SOURCE_MISSING_STATUS else Finding.DOES_NOT_RUN


def problem(environment: Mapping[str, str]) -> str | None:
    """What is wrong with the Python Spark would start in ``environment``, as the warning says it, or None when it
    finds pysparklog (or cannot be asked in time)."""
    worker = worker_python(environment)
    finding = probe(worker, environment)
    if finding in (Finding.FINDS_SOURCE, Finding.NO_ANSWER):
        return None
    import shlex  # here, not at the top: importing pysparklog stays instant when nothing is wrong

    assignment = f"{worker.variable}={shlex.quote(sys.executable)}"
    fix = (
        f"start Spark with {worker.variable} naming this Python, which has it: `export {assignment}` before "
        f"starting Spark, or os.environ[{worker.variable!r}] = sys.executable before the SparkSession is built"
    )
    if worker.variable == PYTHON_VARIABLE and PYTHON_VARIABLE not in environment:
        fix += ", or activate the environment pysparklog is installed in"
    return (
        f'format("pysparklog") will fail with DATA_SOURCE_NOT_FOUND: Spark starts its Python workers with '
        f"{worker.origin}, and that Python {finding.value}; {fix}. On a cluster, every node's Python needs pysparklog. "
        f"(Silence: warnings.filterwarnings('ignore', category=pysparklog.{PythonWorkerEnvironmentWarning.__name__}))"
    )


def warn_if_workers_lack_pysparklog(environment: Mapping[str, str]) -> None:
    """Warn (``PythonWorkerEnvironmentWarning``) when the Python Spark would start in ``environment`` lacks
    pysparklog, pointing at the first caller outside pysparklog, pyspark and the standard library's machinery."""
    found = problem(environment)
    if found is not None:
        warnings.warn(found, PythonWorkerEnvironmentWarning, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame, from ``warn_if_workers_lack_pysparklog``'s caller up, that is not in a
    module of ``_INTERNAL_MODULES`` (nor frozen import machinery)."""
    frame = sys._getframe(2)  # warn_if_workers_lack_pysparklog's caller
    level = 2
    while frame.f_back is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if not frame.f_code.co_filename.startswith("<frozen") and module.split(".")[0] not in _INTERNAL_MODULES:
            break
        frame = frame.f_back
        level += 1
    return level


def _on_audit_event(event: str, arguments: tuple[Any, ...]) -> None:
    """The audit hook: at the launch of Spark's JVM (``spark-submit``), check in the environment it is given."""
    if event != "subprocess.Popen":
        return
    _executable, command, _cwd, environment = arguments
    names = (str, bytes, os.PathLike)
    program = command if isinstance(command, names) else next(iter(command), None)
    # Every subprocess of the program passes here: anything but a launch of Spark goes through untouched.
    if isinstance(program, names) and os.path.basename(os.fsdecode(program)) in _LAUNCHERS:
        warn_if_workers_lack_pysparklog(os.environ if environment is None else environment)


def _runs_spark_classic_driver() -> bool:
    """Whether this process may drive a Spark JVM: pyspark's classic part is installed, and this is neither a Python
    worker of Spark nor a Databricks notebook. Looks pyspark up without importing it."""
    if any(marker in os.environ for marker in _WORKER_MARKERS) or "DATABRICKS_RUNTIME_VERSION" in os.environ:
        return False
    spec = importlib.util.find_spec("pyspark")
    locations = spec.submodule_search_locations if spec is not None else None
    return locations is not None and PathFinder.find_spec("pyspark.core", list(locations)) is not None


def _running_jvm_environment() -> Mapping[str, str] | None:
    """This process's environment as the JVM of its running SparkContext has it (the variables Spark reads, and the
    search paths, taken from the JVM), or None when no SparkContext runs (or its JVM does not answer)."""
    context_module = sys.modules.get("pyspark.core.context")
    context = getattr(context_module, "SparkContext", None)
    active = getattr(context, "_active_spark_context", None)
    if active is None:
        return None
    from py4j.protocol import Py4JError  # loaded with the SparkContext that runs

    environment = dict(os.environ)
    try:
        system = active._jvm.java.lang.System
        jvm_values = {
            name: system.getenv(name) for name in (DRIVER_PYTHON_VARIABLE, PYTHON_VARIABLE, "PATH", "PYTHONPATH")
        }
    except Py4JError:  # a JVM that no longer answers: nothing to check, and an import must not fail over a check
        return None
    for name, value in jvm_values.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = str(value)
    return environment


def check_python_workers() -> None:
    """Check now if Spark's choice is already fixed (a running SparkContext, or a JVM that started this process),
    otherwise when this process starts Spark's JVM; nothing when Spark would start this environment's Python."""
    if not _runs_spark_classic_driver():
        return
    running = _running_jvm_environment()
    if running is not None:
        warn_if_workers_lack_pysparklog(running)
    elif "PYSPARK_GATEWAY_PORT" in os.environ:
        warn_if_workers_lack_pysparklog(os.environ)
    else:
        path = worker_python(os.environ).path
        if path is None or not is_this_environment(path):
            sys.addaudithook(_on_audit_event)
