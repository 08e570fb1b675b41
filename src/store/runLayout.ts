/**
 * Where everything lives under the data directory, named here alone:
 *
 *   <dataDir>/trajflow-data.json               the mark of a data directory (dataMarker.ts)
 *   <dataDir>/engines/<workerId>.json          inference engines' counters (statsReporter)
 *   <dataDir>/env-workers/<workerId>.json      env workers' busy time (metrics/busy)
 *   <dataDir>/locks/server-<key>.lock/         held while a process syncs a model server's weights
 *   <dataDir>/model-server-<port>.log          a model server `trajflow model-servers` started
 *   <dataDir>/runs/<runId>/
 *     config.json                              the run's config, as started
 *     summary.json                             a rollout run's summary
 *     trainer.log                              a local training run's trainer process
 *     model-server-<port>.log                  a local real-model run's model server
 *     learning-curve.csv                       a training run's curve, as the CLI prints it
 *     trajectories/<trajectoryId>/turn-000003.json, summary.json
 *     groups/<groupId>.json
 *     checkpoints/v000004.ckpt                 policy version 4 (embedded model)
 *     checkpoints/v000004/                     policy version 4 of a real model: a Hugging Face
 *                                              directory, published by renaming .v000004.partial/
 *     train/step-000003.json                   train step 3's result (written last: marks it done)
 *     train/eval-v000004.json                  the evaluation of version 4
 *     train/metrics.jsonl, train/eval.jsonl    one line per train step / evaluation
 *     trace/<role>-<host>-<pid>-<stamp>-NNNN.jsonl
 *     trace.json                               the Perfetto export
 *     report/                                  the HTML report and its charts
 *
 * Ids become folder and file names, so they may only hold letters, digits, `_`, `.` and `-`.
 */
import path from 'node:path';

const SAFE_ID = /^[A-Za-z0-9_.-]+$/;
/** Numbered files (turns, steps, versions) carry six digits at least, so they sort by name. */
const NUMBER_DIGITS = 6;
const CHECKPOINT_FILE = /^v(\d{6,})(\.ckpt)?$/;
const TURN_FILE = /^turn-\d+\.json$/;

function checkId(kind: string, id: string): string {
  if (!SAFE_ID.test(id)) throw new Error(`${kind} id ${JSON.stringify(id)} may only hold letters, digits, _ . -`);
  return id;
}

function numbered(n: number): string {
  return String(n).padStart(NUMBER_DIGITS, '0');
}

/** The data directory's mark: every host of a deployment must find it (dataMarker.ts). */
export function dataMarkerFile(dataDir: string): string {
  return path.join(dataDir, 'trajflow-data.json');
}

/** Where inference engines publish their counters. */
export function enginesDir(dataDir: string): string {
  return path.join(dataDir, 'engines');
}

/** The log of a model server `trajflow model-servers` started: beside the runs, as it serves them all. */
export function modelServerLogFile(dataDir: string, port: number): string {
  return path.join(dataDir, `model-server-${port}.log`);
}

/** Where processes take turns syncing a model server's weights (inference/http/serverSyncLock). */
export function serverLocksDir(dataDir: string): string {
  return path.join(dataDir, 'locks');
}

/** Where env workers publish their busy time. */
export function envWorkersDir(dataDir: string): string {
  return path.join(dataDir, 'env-workers');
}

export function runsDir(dataDir: string): string {
  return path.join(dataDir, 'runs');
}

/** The version a checkpoint file or directory name holds, or undefined for any other name. */
export function checkpointVersionOf(fileName: string): number | undefined {
  const match = CHECKPOINT_FILE.exec(fileName);
  return match ? Number(match[1]) : undefined;
}

export function isTurnFileName(fileName: string): boolean {
  return TURN_FILE.test(fileName);
}

/** The files of one run. */
export class RunLayout {
  readonly dir: string;

  constructor(
    readonly dataDir: string,
    readonly runId: string,
  ) {
    this.dir = path.join(runsDir(dataDir), checkId('run', runId));
  }

  get configFile(): string {
    return path.join(this.dir, 'config.json');
  }

  /** A rollout run's summary (a trajectory's is `trajectorySummaryFile`). */
  get rolloutSummaryFile(): string {
    return path.join(this.dir, 'summary.json');
  }

  get trainerLog(): string {
    return path.join(this.dir, 'trainer.log');
  }

  /** The log of the model server a local real-model run started on `port`. */
  modelServerLog(port: number): string {
    return path.join(this.dir, `model-server-${port}.log`);
  }

  get learningCurveFile(): string {
    return path.join(this.dir, 'learning-curve.csv');
  }

  get trajectoriesDir(): string {
    return path.join(this.dir, 'trajectories');
  }

  trajectoryDir(trajectoryId: string): string {
    return path.join(this.trajectoriesDir, checkId('trajectory', trajectoryId));
  }

  turnFile(trajectoryId: string, turn: number): string {
    return path.join(this.trajectoryDir(trajectoryId), `turn-${numbered(turn)}.json`);
  }

  trajectorySummaryFile(trajectoryId: string): string {
    return path.join(this.trajectoryDir(trajectoryId), 'summary.json');
  }

  get groupsDir(): string {
    return path.join(this.dir, 'groups');
  }

  groupFile(groupId: string): string {
    return path.join(this.groupsDir, `${checkId('group', groupId)}.json`);
  }

  get checkpointsDir(): string {
    return path.join(this.dir, 'checkpoints');
  }

  checkpointFile(version: number): string {
    return path.join(this.checkpointsDir, `v${numbered(version)}.ckpt`);
  }

  /** A real model's checkpoint: a Hugging Face directory (the Python trainer writes it). */
  checkpointDir(version: number): string {
    return path.join(this.checkpointsDir, `v${numbered(version)}`);
  }

  get trainDir(): string {
    return path.join(this.dir, 'train');
  }

  /** A train step's result: written last, so it marks the step done. */
  trainStepFile(step: number): string {
    return path.join(this.trainDir, `step-${numbered(step)}.json`);
  }

  /** A policy version's evaluation: written last, so it marks the evaluation done. */
  evaluationFile(version: number): string {
    return path.join(this.trainDir, `eval-v${numbered(version)}.json`);
  }

  /** One JSON line per train step (`StepMetrics`). */
  get metricsFile(): string {
    return path.join(this.trainDir, 'metrics.jsonl');
  }

  /** One JSON line per evaluation. */
  get evaluationsFile(): string {
    return path.join(this.trainDir, 'eval.jsonl');
  }

  get traceDir(): string {
    return path.join(this.dir, 'trace');
  }

  /** The Perfetto export of the run's trace. */
  get traceExportFile(): string {
    return path.join(this.dir, 'trace.json');
  }

  get reportDir(): string {
    return path.join(this.dir, 'report');
  }
}

export function runLayout(dataDir: string, runId: string): RunLayout {
  return new RunLayout(dataDir, runId);
}
