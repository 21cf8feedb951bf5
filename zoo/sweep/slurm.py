"""``python -m zoo.sweep ... --launcher slurm``: each run a SLURM job through submitit.

Runs that ask for the same resources (from their trainer section: ``zoo.sweep.command.resources``) go in
one job array; each job runs the run's ``python -m zoo.train`` in its own process, as the local
launcher does (``zoo.sweep.runs.execute``). A job SLURM stops before its time limit (submitit's signal)
or preempts is requeued by submitit, and the requeued job resumes from the run's ``last.ckpt``
(``ckpt_path=last``). The submitting process waits for the jobs and makes the summary; if it is
gone, ``python -m zoo.sweep --collect <sweep folder>`` makes it later.

``ZOO_SUBMITIT_CLUSTER=local`` runs the jobs with submitit's local executor (the same code path,
no cluster): a dry run on a laptop, and the tests' way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from zoo.errors import UserError
from zoo.sweep.runs import Run, Sweep, execute, finished, run_env, run_folder, train_command

JOB_DEFAULTS = {"timeout_min": 60}  # submitit's own default; --slurm timeout_min=... or trainer.max_time sets it


def require_submitit():
    try:
        import submitit  # submitit: optional (zoo[slurm]), needed by --launcher slurm alone
    except ImportError:
        raise UserError("--launcher slurm needs the submitit package: pip install 'zoo[slurm]' "
                        "(or pip install submitit)") from None
    return submitit


class RunJob:
    """One run as a submitit job: picklable, re-submitted as it is on a requeue (``checkpoint``)."""

    def __init__(self, recipe: str, run: Run, folder: str, group: str | None, env: dict | None):
        self.recipe, self.run, self.folder, self.group, self.env = recipe, run, folder, group, env

    def __call__(self) -> dict | None:
        if int(os.environ.get("SLURM_PROCID", "0")) != 0:  # a multi-task job: the other tasks' DDP processes
            return execute_quietly(self)
        return execute(self.recipe, self.run, Path(self.folder), self.group, self.env)

    def checkpoint(self, *args, **kwargs):
        """submitit calls this when SLURM is about to stop the job (time limit, preemption): the job is
        requeued with this same call, which resumes from the last.ckpt the run saved on SIGTERM."""
        import submitit  # submitit: optional (zoo[slurm]), needed by --launcher slurm alone

        return submitit.helpers.DelayedSubmission(self)


def execute_quietly(job: RunJob) -> None:
    """A task other than the first of a multi-task job: its own zoo.train process (Lightning's SLURM
    environment joins them into one DDP group), no result.json of its own."""
    cmd = train_command(job.recipe, job.run, Path(job.folder))
    subprocess.run(cmd, env=run_env(job.run, job.group, job.env), stdout=subprocess.DEVNULL)
    return None


def executor_for(submitit, sweep: Sweep, resources: dict, options: dict):
    cluster = os.environ.get("ZOO_SUBMITIT_CLUSTER") or "slurm"
    ex = submitit.AutoExecutor(folder=str(sweep.folder / "slurm" / "%j"), cluster=cluster)
    params = {**JOB_DEFAULTS, **resources, "name": sweep.name}
    if sweep.parallel > 1:
        params["slurm_array_parallelism"] = sweep.parallel
    params.update(options)  # the user's --slurm KEY=VALUE last
    try:
        ex.update_parameters(**params)
    except (ValueError, TypeError) as err:  # submitit names the parameter it does not know
        raise UserError(f"--slurm: {str(err).splitlines()[0]}") from None
    return ex


def run_slurm(sweep: Sweep, options: dict, env: dict | None = None) -> None:
    """Submit every run not finished before (one array a resource set), then wait for them all."""
    submitit = require_submitit()

    todo = [r for r in sweep.runs if not finished(run_folder(sweep.folder, r), sweep.retry_failed)]
    skipped = len(sweep.runs) - len(todo)
    if skipped:
        print(f"  {skipped} run(s) finished before, skipped", flush=True)
    groups: dict[tuple, list[Run]] = {}
    for run in todo:
        groups.setdefault(tuple(sorted(run.resources.items())), []).append(run)
    group = sweep.name if sweep.wandb else None
    jobs = []
    for key, runs in groups.items():
        ex = executor_for(submitit, sweep, dict(key), options)
        with ex.batch():  # a job array
            for run in runs:
                job = RunJob(sweep.recipe, run, str(run_folder(sweep.folder, run)), group, env)
                jobs.append((run, ex.submit(job)))
    for run, job in jobs:
        print(f"  {run.label}: job {job.job_id}", flush=True)
    print(f"waiting for {len(jobs)} job(s); if this shell goes, the jobs go on: python -m zoo.sweep --collect "
          f"{sweep.folder} makes the summary once they are done", flush=True)
    try:
        for run, job in jobs:
            try:
                job.result()
            except Exception as err:  # the job itself failed (not the run: that is in its result.json)
                print(f"  {run.label}: job {job.job_id} failed: {str(err).strip().splitlines()[-1:]}",
                      file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"the jobs go on; python -m zoo.sweep --collect {sweep.folder} makes the summary "
                                "once they are done") from None
