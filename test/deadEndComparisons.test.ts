import { countComparisons, type DeadEndTurn, type GroupOutcome } from '../bench/deadEndComparisons';

const MAP_A = 'SFFF\nFPHF\nFFFH\nHFFG';
const MAP_B = 'SPFF\nFFHF\nFFFH\nHFFG';

function turn(band: number, groupId: string, cell: string, move: string): DeadEndTurn {
  return { band, groupId, cell, move };
}

describe('countComparisons (frozenlakeMoves: what per-turn credit can learn the dead ends from)', () => {
  const outcomes = new Map<string, GroupOutcome>([
    ['mixed', { solved: [true, false, false] }],
    ['allFailed', { solved: [false, false] }],
    ['allSolved', { solved: [true, true] }],
  ]);

  test('counts only mixed-outcome groups, and a cell once where its group played both down and right', () => {
    const counts = countComparisons(
      [
        // Both moves on one cell of the mixed group: one comparison, however many turns.
        turn(0, 'mixed', MAP_A, 'down'),
        turn(0, 'mixed', MAP_A, 'right'),
        turn(0, 'mixed', MAP_A, 'right'),
        // Another cell of that group, one move only: in a trained group, compared with nothing.
        turn(0, 'mixed', MAP_B, 'right'),
        turn(0, 'mixed', MAP_B, 'right'),
        // Groups the filter drops count for nothing, both moves or not.
        turn(0, 'allFailed', MAP_A, 'down'),
        turn(0, 'allFailed', MAP_A, 'right'),
        turn(0, 'allSolved', MAP_B, 'down'),
        turn(0, 'allSolved', MAP_B, 'right'),
        // Left is not one of the two moves compared.
        turn(20, 'mixed', `${MAP_B}\n`, 'left'),
        turn(20, 'mixed', `${MAP_B}\n`, 'right'),
      ],
      outcomes,
    );
    expect(counts.get(0)).toEqual({ inMixedGroups: 5, comparedCells: 1 });
    expect(counts.get(20)).toEqual({ inMixedGroups: 2, comparedCells: 0 });
  });

  test('a group whose outcome is unknown is not counted, and a cell spanning two bands counts in the first', () => {
    const counts = countComparisons([turn(0, 'mixed', MAP_A, 'down'), turn(20, 'mixed', MAP_A, 'right'), turn(0, 'unknown', MAP_A, 'down')], outcomes);
    expect(counts.get(0)).toEqual({ inMixedGroups: 1, comparedCells: 1 });
    expect(counts.get(20)).toEqual({ inMixedGroups: 1, comparedCells: 0 });
  });
});
