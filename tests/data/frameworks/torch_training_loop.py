# A tiny real PyTorch training loop (CPU) profiled with debugplane_profiler,
# for the agent's end-to-end tests (tests/service/pytorch_profiler_agent_test.cc):
#   torch_training_loop.py STEPS WAIT_AT [--broken-profiler] [--run-after SECONDS]
# At step WAIT_AT it waits (up to 60 s) until the agent's profilerconfig.json
# asks for some profiling window, so that an UpdateTrainingJob sent meanwhile
# lands before the window's steps; with --run-after it then trains on for
# that many seconds (whatever STEPS says). --broken-profiler makes
# torch.profiler fail as it starts: training must go on.
import json, os, sys, time
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import debugplane_profiler

steps, wait_at = int(sys.argv[1]), int(sys.argv[2])
run_after = float(sys.argv[sys.argv.index("--run-after") + 1]) if "--run-after" in sys.argv else 0
if "--broken-profiler" in sys.argv:
    class _Broken(object):
        def __init__(self, *args, **kwargs):
            raise RuntimeError("torch.profiler broken on purpose")
    torch.profiler.profile = _Broken

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), 0.01)
data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8)


def profiling_asked():
    try:
        with open(os.environ["SMPROFILER_CONFIG_PATH"]) as f:
            params = json.load(f).get("ProfilingParameters", {})
        return any(k in params for k in ("DetailedProfilingConfig", "DataloaderProfilingConfig",
                                         "PythonProfilingConfig"))
    except (OSError, ValueError):
        return False


step, end_time = 0, None
with debugplane_profiler.profile() as prof:
    while True:
        for x, y in data:
            if step == wait_at:
                deadline = time.time() + 60
                while not profiling_asked() and time.time() < deadline:
                    time.sleep(0.02)
                print("profiling asked at step %d (%.3f)" % (step, time.time()), file=sys.stderr,
                      flush=True)
                if run_after:
                    end_time = time.time() + run_after
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            prof.step()
            step += 1
            if end_time is not None:
                time.sleep(0.005)
            if (end_time is None and step >= steps) or (end_time and time.time() >= end_time):
                break
        else:
            continue
        break
print("trained %d steps" % step, file=sys.stderr, flush=True)
