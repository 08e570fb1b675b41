"""
Train steps of a prepared store on every rank torchrun started, as the trainer worker runs them:
rank 0 calls the trainStep activity (no Temporal server: the function itself) and leads, the
others follow (trajflow_py/trainer/lockstep.py). Used by test_trainer_distributed.py:

    torchrun --standalone --nproc-per-node N tests/distributed_steps.py DATA_DIR MODEL_DIR STEPS_JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from test_trainer_support import settings_json
from trajflow_py.trainer.activities import TrainerActivities
from trajflow_py.trainer.distributed import join_ranks, leave_ranks
from trajflow_py.trainer.lockstep import Leader, follow
from trajflow_py.trainer.log import Logger
from trajflow_py.trainer.settings import WorkerSettings


def main(data_dir: Path, model_dir: Path, steps: list[dict]) -> None:
    ranks = join_ranks()
    logger = Logger("distributed-steps")
    try:
        if not ranks.leader:
            follow(ranks, logger)
            return
        leader = Leader(ranks, logger)
        activities = TrainerActivities(WorkerSettings.model_validate(settings_json(data_dir, model_dir)), logger, leader)
        for step in steps:
            activities.train_step(step)
        leader.stop()
    finally:
        leave_ranks(ranks)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text()))
