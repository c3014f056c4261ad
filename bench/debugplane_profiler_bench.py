"""The cost of debugplane_profiler's step() outside a profiling window, in a
real CPU training loop (Debian's python3-torch): the same loop with and
without prof.step(), alternating, plus step() alone in a tight loop. The
profilerconfig.json it stats at each step is a real one (profiling enabled,
a DetailedProfilingConfig window far ahead).

    /usr/bin/python3 bench/debugplane_profiler_bench.py [--steps 3000] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "agent"))
import debugplane_profiler  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp()
    config = os.path.join(tmp, "profilerconfig.json")
    with open(config, "w") as f:
        json.dump({"ProfilingParameters": {
            "ProfilerEnabled": True, "LocalPath": tmp,
            "DetailedProfilingConfig": json.dumps({"StartStep": 10 ** 9, "NumSteps": 1})}}, f)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def loop(prof):
        start = time.perf_counter()
        for _ in range(args.steps):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if prof is not None:
                prof.step()
        return (time.perf_counter() - start) / args.steps * 1e6

    loop(None)  # Warm-up.
    plain, profiled = [], []
    for _ in range(args.rounds):
        plain.append(loop(None))
        with debugplane_profiler.profile(config_path=config, trace_dir=tmp) as prof:
            profiled.append(loop(prof))
    prof = debugplane_profiler.profile(config_path=config, trace_dir=tmp)
    n = 200000
    start = time.perf_counter()
    for _ in range(n):
        prof.step()
    alone = (time.perf_counter() - start) / n * 1e6
    p, q = statistics.median(plain), statistics.median(profiled)
    print("training step: %.1f us without, %.1f us with prof.step() (+%.1f us, medians of %d "
          "rounds of %d steps); step() alone: %.2f us"
          % (p, q, q - p, args.rounds, args.steps, alone))


if __name__ == "__main__":
    main()
