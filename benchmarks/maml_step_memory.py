"""The MAML models' memory probe against the real peak: ``step_bytes``'s count a task (an 8-task probe) and
one meta-training step's peak a task (ru_maxrss before and after forward and backward), the numbers behind
``zoo.core.memory.CREATED_OVER_PEAK`` and a model's ``created_over_peak``.

    OMP_NUM_THREADS=1 python benchmarks/maml_step_memory.py maml_sinusoid 100000
    OMP_NUM_THREADS=1 python benchmarks/maml_step_memory.py maml_nav2d 100

The CPU's only (the probe guards the CPU, where running out of memory kills the process; ru_maxrss is the
process's resident peak): ``--device`` is recorded and anything else is refused. Writes
benchmarks/results/maml_step_memory_<recipe>.json.
"""

import argparse
import gc
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import add_device_option, describe, processor, resolve_device
from zoo.config import load_config
from zoo.train import build


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("tasks", type=int)
    add_device_option(ap)
    args = ap.parse_args()
    device = resolve_device(args.device)
    if device.type != "cpu":
        raise SystemExit("maml_step_memory.py measures the CPU's resident peak: --device cpu")
    recipe, tasks = args.recipe, args.tasks
    datamodule, model = build(load_config(recipe, [f"data.meta_batch={tasks}"]))
    batch = datamodule.train_set.with_tasks(tasks)[0]
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    out = model.meta_loss(batch)
    (out[0] if isinstance(out, tuple) else out).backward()
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before) / tasks
    counted = model.step_bytes(datamodule)[0] / tasks  # after the step: the probe's own peak is smaller
    print(f"{recipe}: {tasks} tasks; counted {counted:.0f} B a task, peak {peak:.0f} B a task; "
          f"counted / peak {counted / peak:.2f}")
    out = Path(__file__).parent / "results" / f"maml_step_memory_{recipe}.json"
    out.write_text(json.dumps({"command": "python benchmarks/maml_step_memory.py " + " ".join(sys.argv[1:]),
                               "device": str(device), "device_name": describe(device), "processor": processor(),
                               "recipe": recipe, "tasks": tasks, "counted_bytes_per_task": counted,
                               "peak_bytes_per_task": peak, "counted_over_peak": counted / peak}, indent=2) + "\n")


if __name__ == "__main__":
    main()
