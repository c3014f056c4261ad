"""debugplane_profiler: detailed profiling of a PyTorch training loop, driven
by the job's ProfilerConfig (and UpdateTrainingJob while it runs).

debugplane-agent writes this module beside the job's configuration files and
puts that directory on the training command's PYTHONPATH. A training loop
needs three lines:

    import debugplane_profiler
    with debugplane_profiler.profile() as prof:
        for batch in loader:
            ...; prof.step()

At each step() the module looks at the agent's profilerconfig.json
($SMPROFILER_CONFIG_PATH; one os.stat when nothing changed) and, while the
DetailedProfilingConfig window asks for it (StartStep/NumSteps, or
StartTimeInSecSinceEpoch/DurationInSeconds; DataloaderProfilingConfig and
PythonProfilingConfig windows too: torch.profiler records the data loader's
spans, and Python stacks for a Python window), runs torch.profiler. When the
window ends it writes the trace, whole (renamed into place), as
<trace dir>/<host>_<pid>.<time_ns>.pt.trace.json, where the server reads it
and the agent uploads it: $DEBUGPLANE_TRACE_DIR
(<profiler dir>/framework/pytorch/<node id>). Traces of torch builds without
Kineto (the array form) are written in the object form with
baseTimeNanoseconds, the wall-clock time the profiler started.

With profiling disabled it does nothing. It never raises into the training
loop: a failure is logged once to stderr and profiling stays off.

Standard library and torch only.
"""

import json
import os
import socket
import sys
import time

_ENABLED_KEYS = ("DetailedProfilingConfig", "DataloaderProfilingConfig", "PythonProfilingConfig")


def _log(message):
    try:
        sys.stderr.write("debugplane_profiler: %s\n" % message)
        sys.stderr.flush()
    except Exception:  # A closed stderr must not stop training either.
        pass


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value) if "." in value else int(value)
        except ValueError:
            return None
    return None


class _Window(object):
    """One profiling window: by step or by time."""

    def __init__(self, key, spec):
        self.key = key
        self.start_step = _number(spec.get("StartStep"))
        self.num_steps = _number(spec.get("NumSteps"))
        self.start_time = _number(spec.get("StartTimeInSecSinceEpoch"))
        self.duration = _number(spec.get("DurationInSeconds"))
        self.python = key == "PythonProfilingConfig"
        if self.start_step is not None and self.num_steps is None:
            self.num_steps = 1
        self.identity = (key, self.start_step, self.num_steps, self.start_time, self.duration)

    def valid(self):
        return self.start_step is not None or self.start_time is not None

    def covers(self, step, now):
        if self.start_step is not None:
            return self.start_step <= step < self.start_step + max(self.num_steps, 0)
        if self.start_time is not None:
            end = self.start_time + (self.duration if self.duration is not None else 60)
            return self.start_time <= now < end
        return False

    def over(self, step, now):
        if self.start_step is not None:
            return step >= self.start_step + max(self.num_steps, 0)
        end = self.start_time + (self.duration if self.duration is not None else 60)
        return now >= end


def _windows(document):
    params = document.get("ProfilingParameters") or {}
    if not params.get("ProfilerEnabled", False):
        return []
    out = []
    for key in _ENABLED_KEYS:
        raw = params.get(key)
        if not raw:
            continue
        spec = json.loads(raw) if isinstance(raw, str) else raw
        if isinstance(spec, dict):
            window = _Window(key, spec)
            if window.valid():
                out.append(window)
    return out


class Profile(object):
    """A torch.profiler.profile-like context manager with step()."""

    def __init__(self, config_path=None, trace_dir=None):
        self._config_path = config_path or os.environ.get("SMPROFILER_CONFIG_PATH", "")
        node = os.environ.get("DEBUGPLANE_NODE_ID", "algo-1")
        self._trace_dir = trace_dir or os.environ.get("DEBUGPLANE_TRACE_DIR", "")
        self._node = node
        self._stat = None
        self._windows = []
        self._local_path = ""
        self._done = set()
        self._step = 0
        self._broken = False
        self._profiler = None
        self._step_label = None
        self._active = None
        self._base_ns = 0
        self._timed = False
        self._stat_mtime = self._stat_size = None
        self._next_step = 0  # The first step a step window not yet done starts at.

    # --- the training loop's side -------------------------------------------

    def __enter__(self):
        self._guard(self._advance)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._guard(self._finish)
        return False

    def step(self):
        """Marks the end of a step: the next one starts."""
        if self._broken:
            return
        self._step += 1
        # Outside a window, with the file unchanged and no window due: one
        # os.stat and a few comparisons.
        if self._active is None and not self._timed and self._step < self._next_step:
            try:
                st = os.stat(self._config_path)
                if st.st_mtime_ns == self._stat_mtime and st.st_size == self._stat_size:
                    return
            except OSError:
                if self._stat is None:
                    return
        self._guard(self._advance)

    def stop(self):
        self._guard(self._finish)

    @property
    def step_num(self):
        return self._step

    # --- inside ---------------------------------------------------------------

    def _guard(self, action):
        if self._broken:
            return
        try:
            action()
        except Exception as error:  # Never into the training loop.
            self._broken = True
            _log("profiling is off for this process: %s: %s" % (type(error).__name__, error))
            try:
                if self._profiler is not None:
                    self._profiler.__exit__(None, None, None)
            except Exception:
                pass
            self._profiler = None

    def _reload(self):
        try:
            st = os.stat(self._config_path)
        except OSError:
            self._stat, self._windows = None, []
            return
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key == self._stat:
            return
        self._stat = key
        self._stat_mtime, self._stat_size = st.st_mtime_ns, st.st_size
        with open(self._config_path) as f:
            document = json.load(f)
        self._windows = _windows(document)
        self._timed = any(w.start_step is None for w in self._windows)
        params = document.get("ProfilingParameters") or {}
        self._local_path = params.get("LocalPath", "") or ""

    def _advance(self):
        if self._config_path:
            self._reload()
        step = self._step
        now = time.time() if (self._timed or self._active is not None) else 0
        if self._active is not None:
            if self._label_exit():
                pass
            if self._active.over(step, now) or self._active.identity not in self._current():
                self._stop_and_write()
        if self._active is None:
            for window in self._windows:
                if window.identity in self._done or not window.covers(step, now):
                    continue
                self._start(window)
                break
        if self._active is not None:
            self._label_enter(step)
        pending = [w.start_step for w in self._windows
                   if w.start_step is not None and w.identity not in self._done]
        self._next_step = min(pending) if pending else float("inf")

    def _current(self):
        return set(w.identity for w in self._windows)

    def _start(self, window):
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._base_ns = time.time_ns()
        profiler = torch.profiler.profile(activities=activities, with_stack=window.python)
        profiler.__enter__()
        self._profiler = profiler
        self._active = window

    def _label_enter(self, step):
        import torch

        self._step_label = torch.autograd.profiler.record_function("ProfilerStep#%d" % step)
        self._step_label.__enter__()

    def _label_exit(self):
        if self._step_label is None:
            return False
        label, self._step_label = self._step_label, None
        label.__exit__(None, None, None)
        return True

    def _finish(self):
        if self._active is not None:
            self._label_exit()
            self._stop_and_write()

    def _directory(self):
        if self._trace_dir:
            return self._trace_dir
        if self._local_path:
            return os.path.join(self._local_path, "framework", "pytorch", self._node)
        raise RuntimeError("no trace directory: DEBUGPLANE_TRACE_DIR is not set and "
                           "profilerconfig.json has no LocalPath")

    def _stop_and_write(self):
        window, profiler = self._active, self._profiler
        self._active, self._profiler = None, None
        self._done.add(window.identity)
        profiler.__exit__(None, None, None)
        directory = self._directory()
        os.makedirs(directory, exist_ok=True)
        name = "%s_%d.%d.pt.trace.json" % (socket.gethostname(), os.getpid(), time.time_ns())
        final = os.path.join(directory, name)
        raw = os.path.join(directory, "." + name + ".raw")
        tmp = os.path.join(directory, "." + name + ".tmp")
        try:
            profiler.export_chrome_trace(raw)
            with open(raw, "rb") as f:
                first = f.read(1)
                while first in (b" ", b"\n", b"\t", b"\r"):
                    first = f.read(1)
            if first == b"[":
                # The array form: no wall-clock time; wrapped with one.
                with open(raw, "rb") as src, open(tmp, "wb") as dst:
                    dst.write(b'{"baseTimeNanoseconds": %d, "traceEvents": ' % self._base_ns)
                    while True:
                        chunk = src.read(1 << 20)
                        if not chunk:
                            break
                        dst.write(chunk)
                    dst.write(b"}\n")
                os.replace(tmp, final)
            else:
                os.replace(raw, final)
        finally:
            for leftover in (raw, tmp):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass


def profile(config_path=None, trace_dir=None):
    """The profiler of this training process: `with profile() as prof: ...
    prof.step()` (see the module's docstring)."""
    return Profile(config_path=config_path, trace_dir=trace_dir)
