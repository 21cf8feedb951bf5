"""The MAML models' memory probe against the real peak: ``step_bytes``'s count a task (an 8-task probe) and
one meta-training step's peak a task (ru_maxrss before and after forward and backward), the numbers behind
``zoo.core.memory.CREATED_OVER_PEAK`` and a model's ``created_over_peak``.

    OMP_NUM_THREADS=1 python benchmarks/maml_step_memory.py maml_sinusoid 100000
    OMP_NUM_THREADS=1 python benchmarks/maml_step_memory.py maml_nav2d 100
"""

import gc
import resource
import sys

from zoo.config import load_config
from zoo.train import build


def main() -> None:
    recipe, tasks = sys.argv[1], int(sys.argv[2])
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


if __name__ == "__main__":
    main()
