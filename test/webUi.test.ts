/**
 * The Web UI as the run's cockpit, checked in a real browser: a tiny training run on a dev server
 * of its own, with its Web UI, started as `trajflow train` starts one; then headless Chromium opens
 * the pages of the training workflow and of one trajectory. Their User Metadata tab must show the
 * run's progress and the trajectory's conversation turn by turn (Current Details, rendered from
 * markdown), and their timeline a summary on each activity and timer. The screenshots are left in
 * test-artifacts/web-ui/ to be looked at.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { trainingStartOptions } from '../client/runTraining';
import { createLogger } from '../src/log';
import { freePort } from '../src/ports';
import { startDevServer, stopDevServer } from '../src/temporal/devServer';
import { trainingWorkflow } from '../workflows/training';
import { ROLES, startWorkers } from '../workers/start';
import { iframeSource, renderPage, requireChromium, visibleText } from './support/chromium';
import { testConfig } from './support/harness';

const ARTIFACTS = path.join(__dirname, '..', 'test-artifacts', 'web-ui');
const RUN_ID = 'webui-run';
const TRAJECTORY_ID = `${RUN_ID}.g00000.t000`;

/** A workflow's page in the Web UI: one tab of it. */
const pageOf = (uiUrl: string, workflowId: string, runId: string, tab: 'user-metadata' | 'timeline') =>
  `${uiUrl}/namespaces/default/workflows/${encodeURIComponent(workflowId)}/${runId}/${tab}`;

/** The markdown an iframe of the User Metadata tab renders (the UI passes it in the iframe's URL). */
function markdownOf(dom: string, iframeId: string, uiUrl: string): string {
  const source = iframeSource(dom, iframeId, uiUrl);
  if (!source) throw new Error(`no iframe ${iframeId} on the page`);
  return source.searchParams.get('content') ?? '';
}

describe('the Web UI in a browser', () => {
  it('shows current details, the conversation turn by turn and a summary on every activity and timer', async () => {
    await requireChromium();
    mkdirSync(ARTIFACTS, { recursive: true });
    const serverDir = mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), 'webui-server-'));
    const server = await startDevServer({ dataDir: serverDir, port: await freePort(), uiPort: await freePort() });
    const uiUrl = server.uiUrl!;
    const config = testConfig('webui', {
      temporal: { address: server.address },
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      agent: { maxTurns: 3 },
      sampling: { maxTokens: 12, temperature: 0.7 },
      rollout: { groupSize: 2, maxConcurrency: 4 },
      // The warm-up teaches the answer format, so the conversation shows moves rather than noise.
      trainer: { steps: 2, batchGroups: 1, formatWarmupSteps: 20 },
    });
    const logger = createLogger('test');
    logger.level = 'warn';
    // The workers stay up while the browser looks: the UI asks a workflow for its current details.
    const workers = await startWorkers(config, ROLES, logger);
    const connection = await Connection.connect({ address: server.address });
    try {
      const client = new Client({ connection });
      const training = await client.workflow.start(trainingWorkflow, trainingStartOptions(config, RUN_ID));
      expect(await training.result()).toMatchObject({ version: 2, steps: 2 });
      const trainingRun = (await training.describe()).runId;
      const trajectoryRun = (await client.workflow.getHandle(TRAJECTORY_ID).describe()).runId;

      // The training workflow: what it is (summary, details) and where it stands (current details).
      const trainingMeta = await renderPage(pageOf(uiUrl, RUN_ID, trainingRun, 'user-metadata'), {
        screenshot: path.join(ARTIFACTS, 'training-user-metadata.png'),
      });
      expect(markdownOf(trainingMeta, 'user-metadata-summary', uiUrl)).toBe(`training ${RUN_ID}: 2 steps of 1 group x 2 on frozenlake-4x4-classic`);
      expect(markdownOf(trainingMeta, 'user-metadata-details', uiUrl)).toContain(
        `its trajectories: \`TrajflowRun = "${RUN_ID}" AND TrajflowKind = "trajectory"\``,
      );
      const progress = markdownOf(trainingMeta, 'user-metadata-current-details', uiUrl);
      expect(progress).toContain('**training: step 2 of 2, policy v2**: finished');
      expect(progress).toContain('- queue: 0 groups waiting (a step trains 1); 2 groups trained');
      expect(progress).toMatch(/- last step \(1\): reward [\d.]+ ± [\d.]+, success \d+%, loss -?[\d.e-]+, staleness max \d \(bound 1, turn sync\)/);

      const trainingTimeline = visibleText(await renderPage(pageOf(uiUrl, RUN_ID, trainingRun, 'timeline')));
      expect(trainingTimeline).toContain('prepare policy v0 (20 format warm-up steps)');
      expect(trainingTimeline).toContain('train step 0: 1 group, v0 -> v1');
      expect(trainingTimeline).toContain('train step 1: 1 group, v1 -> v2');

      // A trajectory: its conversation, turn by turn, as the UI renders the markdown.
      const trajectoryMeta = await renderPage(pageOf(uiUrl, TRAJECTORY_ID, trajectoryRun, 'user-metadata'), {
        screenshot: path.join(ARTIFACTS, 'trajectory-user-metadata.png'),
      });
      expect(markdownOf(trajectoryMeta, 'user-metadata-details', uiUrl)).toContain(`runs/${RUN_ID}/trajectories/${TRAJECTORY_ID}/`);
      const conversation = markdownOf(trajectoryMeta, 'user-metadata-current-details', uiUrl);
      expect(conversation).toMatch(/^\*\*(ended|max_turns|max_steps): .*; reward [\d.]+, \d turns?/);
      expect(conversation).toContain('**turn 0**: the model was shown\n```\n');
      expect(conversation).toMatch(/answered \(v0, \d+ tokens?\): `[^`]+` → (env reward|not an action)/);
      const rendered = await renderPage(iframeSource(trajectoryMeta, 'user-metadata-current-details', uiUrl)!.href);
      expect(rendered).toContain('<strong>turn 0</strong>');
      expect(rendered).toMatch(/<pre[^>]*><code[^>]*>[^<]*\n/);

      const trajectoryTimeline = visibleText(
        await renderPage(pageOf(uiUrl, TRAJECTORY_ID, trajectoryRun, 'timeline'), {
          screenshot: path.join(ARTIFACTS, 'trajectory-timeline.png'),
          windowSize: [1400, 1300],
        }),
      );
      for (const summary of ['open session (env seed ', 'generate turn 0 (v0+)', 'session turn 0: "', 'episode deadline: 600 s', 'record trajectory: ']) {
        expect(trajectoryTimeline).toContain(summary);
      }
    } finally {
      await connection.close();
      await workers.shutdown();
      await stopDevServer(serverDir);
    }
  }, 240_000);
});
