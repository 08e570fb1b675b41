import { formatExample, FROZENLAKE_SYSTEM_PROMPT, invalidActionMessage, parseAction, renderObservation } from '../src/agents/frozenlakeAgent';
import { AgentConfigSchema, EnvConfigSchema } from '../config/schema';
import { Episode } from '../src/episode/episode';
import { createRng, hashString } from '../src/core/random';
import { CLASSIC_MAPS, FrozenLake, type FrozenLakeOptions, generateMap, isHeldOutMap, isSolvable, pathDistances } from '../src/envs/frozenlake';

const LEFT = 0;
const DOWN = 1;
const RIGHT = 2;
const UP = 3;

function lake(overrides: Partial<FrozenLakeOptions> = {}): FrozenLake {
  return new FrozenLake({ size: 4, map: 'classic', mapSeed: 0, slippery: false, seed: 0, maxSteps: 100, ...overrides });
}

/** Resets a fresh environment, plays `actions`, and returns every step result. */
function play(options: Partial<FrozenLakeOptions>, actions: number[]) {
  const env = lake(options);
  env.reset();
  return actions.map((action) => env.step(action));
}

/** The observations of an episode reset on `env` and played with `actions` until it ends. */
function trace(env: FrozenLake, actions: readonly number[]) {
  const states = [env.reset()];
  for (const action of actions) {
    const result = env.step(action);
    states.push(result.observation);
    if (result.done) break;
  }
  return states;
}

describe('seeded randomness', () => {
  it('createRng is deterministic per seed and stays in [0, 1)', () => {
    const draw = (seed: number) => Array.from({ length: 1000 }, createRng(seed));
    const a = draw(42);
    expect(draw(42)).toEqual(a);
    expect(draw(43)).not.toEqual(a);
    expect(a.every((x) => x >= 0 && x < 1)).toBe(true);
    const mean = a.reduce((sum, x) => sum + x, 0) / a.length;
    expect(mean).toBeGreaterThan(0.45);
    expect(mean).toBeLessThan(0.55);
  });

  it('hashString is 32-bit FNV-1a over UTF-8', () => {
    expect(hashString('')).toBe(0x811c9dc5);
    expect(hashString('a')).toBe(0xe40c292c);
    expect(hashString('foobar')).toBe(0xbf9cf968);
    expect(hashString('épisode-1')).not.toBe(hashString('episode-1'));
  });
});

describe('FrozenLake rules', () => {
  it('uses the classic maps', () => {
    expect(lake().grid).toEqual(['SFFF', 'FHFH', 'FFFH', 'HFFG']);
    expect(lake({ size: 8 }).grid).toEqual(CLASSIC_MAPS[8]);
    expect(CLASSIC_MAPS[8]).toHaveLength(8);
    expect(CLASSIC_MAPS[8].every((row) => row.length === 8)).toBe(true);
  });

  it('starts at S with a serializable observation', () => {
    const obs = lake().reset();
    expect(obs).toEqual({ grid: ['SFFF', 'FHFH', 'FFFH', 'HFFG'], row: 0, col: 0, size: 4, steps: 0 });
    expect(JSON.parse(JSON.stringify(obs))).toEqual(obs);
  });

  it('keeps the player in place at the edges, still counting the step', () => {
    const [left, up] = play({}, [LEFT, UP]);
    expect(left.observation).toMatchObject({ row: 0, col: 0, steps: 1 });
    expect(up.observation).toMatchObject({ row: 0, col: 0, steps: 2 });
    expect(up.info).toEqual({ position: { row: 0, col: 0 }, outcome: 'running', truncated: false });
    expect(up.done).toBe(false);
  });

  it('ends the episode with reward 0 in a hole', () => {
    const steps = play({}, [RIGHT, DOWN]);
    expect(steps[1]).toMatchObject({ reward: 0, done: true, info: { outcome: 'hole', position: { row: 1, col: 1 } } });
  });

  it('charges holePenalty to the move into a hole, apart from the reward, and nothing else changes', () => {
    const steps = play({ holePenalty: 0.5 }, [RIGHT, DOWN]);
    expect(steps.map((s) => s.reward)).toEqual([0, 0]);
    expect(steps.map((s) => s.penalty)).toEqual([undefined, 0.5]);
    expect(steps[1].info.outcome).toBe('hole');
    const truncated = play({ holePenalty: 0.5, maxSteps: 3 }, [LEFT, LEFT, LEFT])[2];
    expect(truncated).toMatchObject({ reward: 0, info: { outcome: 'truncated' } });
    expect(truncated.penalty).toBeUndefined();
    const goal = play({ holePenalty: 0.5 }, [DOWN, DOWN, RIGHT, DOWN, RIGHT, RIGHT]);
    expect(goal[5].reward).toBe(1);
    expect(goal.every((s) => s.penalty === undefined)).toBe(true);
  });

  it('charges progressPenalty per step of distance to G a move fails to gain, on top of the hole penalty', () => {
    // Classic map: S at (0,0), G at (3,3), holes at (1,1), (1,3), (2,3), (3,0).
    const steps = play({ progressPenalty: 0.1, holePenalty: 0.5 }, [DOWN, UP, LEFT, DOWN, DOWN, RIGHT, DOWN, RIGHT, RIGHT]);
    // towards G, away, into the edge, towards, towards, towards, towards, towards onto G
    expect(steps.map((s) => s.penalty)).toEqual([undefined, 0.2, 0.1, undefined, undefined, undefined, undefined, undefined, undefined]);
    expect(steps.map((s) => s.reward)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 1]);
    expect(steps[8].info.outcome).toBe('goal');
    // Into a hole: the hole penalty, plus what the move failed to gain.
    expect(play({ progressPenalty: 0.1, holePenalty: 0.5 }, [RIGHT, DOWN])[1]).toMatchObject({ done: true, penalty: 0.5, info: { outcome: 'hole' } });
    const away = play({ progressPenalty: 0.1, holePenalty: 0.5 }, [DOWN, DOWN, RIGHT, RIGHT, UP, LEFT]);
    expect(away[5]).toMatchObject({ done: true, info: { outcome: 'hole' } });
    expect(away[5].penalty).toBeCloseTo(0.7);
  });

  it('with progressDistance: path, charges the move onto a dead end and not the walk back out', () => {
    // Classic map: (0,3) has a hole below and the edge on its right; the fewest moves from it to G
    // go back through (0,2).
    const moves = [RIGHT, RIGHT, RIGHT, LEFT];
    expect(play({ progressPenalty: 0.1, progressDistance: 'path' }, moves).map((s) => s.penalty)).toEqual([undefined, undefined, 0.2, undefined]);
    expect(play({ progressPenalty: 0.1 }, moves).map((s) => s.penalty)).toEqual([undefined, undefined, undefined, 0.2]);
  });

  it('prices every action from the state a step was taken in, the taken one at its own penalty', () => {
    const options: Partial<FrozenLakeOptions> = { holePenalty: 1, progressPenalty: 0.1, progressDistance: 'path' };
    const steps = play(options, [RIGHT, RIGHT, RIGHT, LEFT]);
    // From S (6 moves from G): left and up into the edge 0.1, down and right one closer.
    expect(steps[0].actionPenalties).toEqual([0.1, 0, 0, 0.1]);
    // From the dead end (0,3): back left is its way to G, down the hole, right and up the edge.
    expect(steps[3].actionPenalties).toEqual([0, 1, 0.1, 0.1]);
    steps.forEach((step, i) => expect(step.actionPenalties![[RIGHT, RIGHT, RIGHT, LEFT][i]]).toBe(step.penalty ?? 0));
    // The Manhattan distance counts the step back from the dead end as one away from G.
    expect(play({ ...options, progressDistance: 'manhattan' }, [RIGHT, RIGHT, RIGHT, LEFT])[3].actionPenalties).toEqual([0.2, 1, 0.1, 0.1]);
    // Slippery: the mean over the intended move and its two perpendicular slips. The player is put
    // on (0,3) by hand, since where slipping walks it depends on the seed.
    const slippery = lake({ ...options, slippery: true });
    slippery.reset();
    Object.assign(slippery, { row: 0, col: 3 });
    const priced = slippery.step(UP).actionPenalties!;
    expect(priced[DOWN]).toBeCloseTo((1 + 0.1 + 0) / 3); // the hole, right into the edge, left back
    expect(priced[LEFT]).toBeCloseTo((0 + 1 + 0.1) / 3); // back, down into the hole, up into the edge
    // Nothing charged, nothing priced.
    expect(play({}, [RIGHT])[0].actionPenalties).toBeUndefined();
  });

  it('pathDistances counts the fewest moves over the ice to G, a hole one more than its nearest frozen neighbour', () => {
    expect(pathDistances(CLASSIC_MAPS[4])).toEqual([
      [6, 5, 4, 5],
      [5, 4, 3, 4],
      [4, 3, 2, 1],
      [3, 2, 1, 0],
    ]);
    expect(pathDistances(['SFF', 'FHH', 'FHG'])).toEqual([
      [Infinity, Infinity, Infinity],
      [Infinity, Infinity, 1],
      [Infinity, 1, 0],
    ]);
    expect(pathDistances(['SF'])).toEqual([[Infinity, Infinity]]);
  });

  it('ends the episode with reward 1 at the goal', () => {
    const steps = play({}, [DOWN, DOWN, RIGHT, DOWN, RIGHT, RIGHT]);
    expect(steps.slice(0, -1).every((s) => s.reward === 0 && !s.done)).toBe(true);
    expect(steps[5]).toMatchObject({ reward: 1, done: true, info: { outcome: 'goal', truncated: false } });
    expect(steps[5].observation).toMatchObject({ row: 3, col: 3, steps: 6 });
  });

  it('truncates after maxSteps, unless the last step ends the episode anyway', () => {
    const steps = play({ maxSteps: 3 }, [LEFT, LEFT, LEFT]);
    expect(steps.map((s) => s.done)).toEqual([false, false, true]);
    expect(steps[2]).toMatchObject({ reward: 0, info: { outcome: 'truncated', truncated: true } });
    expect(play({ maxSteps: 2 }, [RIGHT, DOWN])[1].info).toMatchObject({ outcome: 'hole', truncated: false });
  });

  it('refuses to step before reset, after the end, or with an invalid action', () => {
    const env = lake({ maxSteps: 1 });
    expect(() => env.step(DOWN)).toThrow(/reset/);
    env.reset();
    for (const bad of [4, -1, 1.5, NaN]) expect(() => env.step(bad)).toThrow(`invalid action ${bad}`);
    env.step(LEFT);
    expect(() => env.step(LEFT)).toThrow(/reset/);
    expect(env.reset()).toMatchObject({ row: 0, col: 0, steps: 0 });
  });

  it('rejects invalid options', () => {
    expect(() => lake({ size: 5 as 4 })).toThrow(/size/);
    expect(() => lake({ maxSteps: 0 })).toThrow(/maxSteps/);
    expect(() => lake({ holePenalty: -0.5 })).toThrow(/holePenalty must be a finite number >= 0, got -0.5/);
    expect(() => lake({ progressPenalty: Infinity })).toThrow(/progressPenalty must be a finite number >= 0, got Infinity/);
    expect(() => lake({ progressDistance: 'euclidean' as 'path' })).toThrow(/progressDistance must be one of manhattan, path, got euclidean/);
    expect(() => lake({ seed: 0.5 })).toThrow(/seed/);
  });
});

describe('random maps', () => {
  it('are solvable, well-formed, and deterministic per seed', () => {
    for (const size of [4, 8]) {
      for (let seed = 0; seed < 200; seed++) {
        const grid = generateMap(size, seed);
        expect(isSolvable(grid)).toBe(true);
        expect(grid).toHaveLength(size);
        expect(grid.every((row) => /^[SFHG]+$/.test(row) && row.length === size)).toBe(true);
        expect(grid[0][0]).toBe('S');
        expect(grid[size - 1][size - 1]).toBe('G');
        expect(generateMap(size, seed)).toEqual(grid);
      }
    }
  });

  it('differ across seeds and contain holes', () => {
    const maps = new Set(Array.from({ length: 50 }, (_, seed) => generateMap(8, seed).join('/')));
    expect(maps.size).toBeGreaterThan(45);
    expect([...maps].some((map) => map.includes('H'))).toBe(true);
  });

  it('back the environment when map is random', () => {
    expect(lake({ size: 8, map: 'random', mapSeed: 7 }).grid).toEqual(generateMap(8, 7));
  });

  it('isSolvable finds blocked and open paths', () => {
    expect(isSolvable(['SH', 'HG'])).toBe(false);
    expect(isSolvable(['SFH', 'HFH', 'HFG'])).toBe(true);
    expect(isSolvable(['FFF', 'FFG'])).toBe(false);
    expect(isSolvable(CLASSIC_MAPS[4])).toBe(true);
  });

  it('split into a training pool and a held-out pool that share no layout', () => {
    const train = new Set(Array.from({ length: 400 }, (_, seed) => generateMap(4, seed, 0.8, { share: 0.2, pool: 'train' }).join('/')));
    const heldOut = new Set(Array.from({ length: 400 }, (_, seed) => generateMap(4, seed, 0.8, { share: 0.2, pool: 'heldout' }).join('/')));
    expect([...train].filter((layout) => heldOut.has(layout))).toEqual([]);
    for (const layout of heldOut) expect(isHeldOutMap(layout.split('/'), 0.2)).toBe(true);
    // Both pools are varied, and about a fifth of all layouts are held out.
    expect(heldOut.size).toBeGreaterThan(50);
    const all = Array.from({ length: 1000 }, (_, seed) => generateMap(4, 10_000 + seed));
    const share = all.filter((grid) => isHeldOutMap(grid, 0.2)).length / all.length;
    expect(share).toBeGreaterThan(0.12);
    expect(share).toBeLessThan(0.3);
  });

  it('rejects a pFrozen that cannot produce a map', () => {
    expect(() => generateMap(4, 0, 0)).toThrow(/pFrozen/);
  });
});

describe('exploring starts', () => {
  const random = { size: 4 as const, map: 'random' as const, exploringStarts: 1 };
  const startOf = (options: Partial<FrozenLakeOptions>) => {
    const { row, col } = lake(options).reset();
    return [row, col];
  };

  it('start a share of seeds on a frozen cell G can be reached from, the same cell for every episode of a seed', () => {
    const starts = Array.from({ length: 200 }, (_, seed) => ({
      seed,
      env: lake({ ...random, mapSeed: seed, seed }),
      start: startOf({ ...random, mapSeed: seed, seed }),
    }));
    for (const { seed, env, start } of starts) {
      const [row, col] = start;
      expect(env.grid[row][col]).toMatch(/[SF]/);
      expect(Number.isFinite(pathDistances(env.grid)[row][col])).toBe(true);
      expect(startOf({ ...random, mapSeed: seed, seed })).toEqual(start);
    }
    // Spread over the map, not only on S.
    const cells = new Set(starts.map(({ start }) => start.join(',')));
    expect(cells.size).toBeGreaterThan(8);
    const onS = starts.filter(({ start }) => start[0] === 0 && start[1] === 0).length;
    expect(onS).toBeLessThan(40);
  });

  it('leave the rest of the seeds, and every seed at share 0, on S', () => {
    const share = (exploringStarts: number) =>
      Array.from({ length: 400 }, (_, seed) => startOf({ ...random, exploringStarts, mapSeed: seed, seed })).filter(([row, col]) => row !== 0 || col !== 0)
        .length / 400;
    expect(share(0)).toBe(0);
    // A quarter of the seeds draw a cell; about 1 in 10 of those draws S itself.
    const quarter = share(0.25);
    expect(quarter).toBeGreaterThan(0.15);
    expect(quarter).toBeLessThan(0.3);
  });

  it('replay the same states for the same options and actions (a session rebuilt from its answers)', () => {
    const options = { ...random, slippery: true, mapSeed: 5, seed: 5, maxSteps: 30 };
    const actions = [DOWN, RIGHT, UP, LEFT, DOWN, DOWN, RIGHT, RIGHT];
    const env = lake(options);
    const first = trace(env, actions);
    expect(trace(lake(options), actions)).toEqual(first);
    expect(trace(env, actions)).toEqual(first);
  });

  it('reject a share outside [0, 1]', () => {
    expect(() => lake({ exploringStarts: 1.5 })).toThrow(/exploringStarts must be a share in \[0, 1\], got 1.5/);
    expect(() => lake({ exploringStarts: -0.1 })).toThrow(/exploringStarts/);
  });
});

describe('slippery ice', () => {
  it('moves in the intended or a perpendicular direction, 1/3 each', () => {
    // Pressing down at S: down reaches (1,0), right reaches (0,1), left bumps the wall.
    const trials = 3000;
    const counts = { down: 0, right: 0, left: 0 };
    for (let seed = 0; seed < trials; seed++) {
      const { row, col } = play({ slippery: true, seed }, [DOWN])[0].observation;
      if (row === 1 && col === 0) counts.down++;
      else if (row === 0 && col === 1) counts.right++;
      else if (row === 0 && col === 0) counts.left++;
      else throw new Error(`moved up or further: (${row}, ${col})`);
    }
    for (const count of Object.values(counts)) expect(Math.abs(count / trials - 1 / 3)).toBeLessThan(0.04);
  });

  it('replays the same states for the same options and actions', () => {
    const actions = Array.from({ length: 40 }, (_, i) => (i * 7) % 4);
    const options = { size: 8 as const, map: 'random' as const, mapSeed: 3, slippery: true, seed: 11, maxSteps: 40 };
    const env = lake(options);
    const first = trace(env, actions);
    expect(trace(lake(options), actions)).toEqual(first);
    expect(trace(env, actions)).toEqual(first); // reset() restarts the slip stream too
    const others = Array.from({ length: 5 }, (_, i) => trace(lake({ ...options, seed: 100 + i }), actions));
    expect(others.some((states) => JSON.stringify(states) !== JSON.stringify(first))).toBe(true);
  });
});

describe('FrozenLake agent', () => {
  it('keeps the system prompt short', () => {
    expect(new TextEncoder().encode(FROZENLAKE_SYSTEM_PROMPT).length).toBeLessThanOrEqual(64);
  });

  it('renders the grid with the player marked', () => {
    const env = lake();
    expect(renderObservation(env.reset())).toBe('PFFF\nFHFH\nFFFH\nHFFG\nleft #, down F, right F, up #');
    expect(renderObservation(env.step(RIGHT).observation)).toBe('SPFF\nFHFH\nFFFH\nHFFG\nleft S, down H, right F, up #');
    expect(renderObservation(env.step(DOWN).observation)).toBe('SFFF\nFPFH\nFFFH\nHFFG\nleft F, down F, right F, up F');
  });

  it.each([
    ['Action: down', DOWN],
    ['action: LEFT', LEFT],
    ['ACTION:right', RIGHT],
    ['Action: U', UP],
    ['action: d.', DOWN],
    ['I will go around.\nAction: right\n', RIGHT],
    ['Action: left\nAction: right', LEFT],
    ['Action: sideways, no: Action: up', UP],
    ['down', DOWN],
    ['  Up. ', UP],
  ])('parses %j', (text, action) => {
    expect(parseAction(text)).toEqual({ ok: true, action });
  });

  it.each([
    ['', 'empty answer'],
    ['   \n\t', 'empty answer'],
    ['Action: dog', 'no move'],
    ['Action:', 'no move'],
    ['Acti', 'no move'],
    ['Reaction: left and more', 'no move'],
    ['d', 'no move'],
    ['I go down', 'no move'],
    ['left or right', 'ambiguous: several moves'],
    ['Action: dé', 'no move'],
    ['行动：下 🙂 \u0000\uFFFD', 'no move'],
  ])('rejects %j', (text, error) => {
    expect(parseAction(text)).toEqual({ ok: false, error });
  });

  it('rejects very long text, even with a valid action in it', () => {
    for (const text of [`Action: down ${'x'.repeat(1000)}`, 'Action: up '.repeat(100_000)]) {
      expect(parseAction(text)).toEqual({ ok: false, error: 'answer too long' });
    }
  });

  it('never throws on arbitrary text', () => {
    const rng = createRng(5);
    for (let i = 0; i < 2000; i++) {
      const length = Math.floor(rng() * 40);
      const text = String.fromCharCode(...Array.from({ length }, () => Math.floor(rng() * 0x3000)));
      expect(() => parseAction(text)).not.toThrow();
    }
  });

  it('formatExample round-trips through parseAction', () => {
    for (const action of [LEFT, DOWN, RIGHT, UP]) {
      expect(parseAction(formatExample(action))).toMatchObject({ ok: true, action });
    }
    expect(formatExample(DOWN)).toBe('down');
    expect(() => formatExample(4)).toThrow(/invalid action/);
  });

  it('an episode keys the prices of the actions by the answer that takes each, on the turns that step', async () => {
    const env = EnvConfigSchema.parse({ name: 'frozenlake', map: 'classic', holePenalty: 1, progressPenalty: 0.1, progressDistance: 'path' });
    const agent = AgentConfigSchema.parse({ name: 'frozenlake', history: 'none' });
    const { episode } = await Episode.open({ env, agent, seed: 0 });
    expect(await episode.respond('right')).toMatchObject({ kind: 'stepped', answerPenalties: { left: 0.1, down: 0, right: 0, up: 0.1 } });
    expect(await episode.respond('dance')).not.toHaveProperty('answerPenalties');
    expect(await episode.respond('down')).toMatchObject({ done: true, penalty: 1, answerPenalties: { left: 0.2, down: 1, right: 0, up: 0.1 } });
    await episode.close();
  });

  it('explains an unparsable answer with the expected format', () => {
    const result = parseAction('???');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(invalidActionMessage(result.error)).toBe('Invalid answer (no move). Move: left, down, right or up.');
  });
});
