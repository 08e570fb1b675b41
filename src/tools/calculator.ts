/**
 * The `calculator` tool: evaluates arithmetic the model writes (numbers, + - * /, unary minus,
 * parentheses). The expression is model output, so it is parsed by a small recursive-descent
 * parser rather than handed to eval/Function: nothing but arithmetic can ever run.
 *
 * Every text here is short: the policy is a tiny byte-level model with a ~1K-token context, and
 * it reads the description and each error in full.
 */
import { z } from 'zod';
import type { Rng } from '../core/random';
import { defineTool } from './tool';

/** Longest expression the tool accepts (a schema limit, so the model is told). */
export const MAX_EXPRESSION_LENGTH = 200;

/** Parentheses and unary minuses nested deeper than this are refused (no deep recursion). */
export const MAX_NESTING = 20;

/** Decimals a non-integer result keeps at least; also its significant digits (see formatNumber). */
const DECIMALS = 6;

const NUMBER = /\d+(?:\.\d+)?|\.\d+/y;

/**
 * The value of `expression`; throws an Error saying what is wrong and where (offset from 0) on a
 * syntax error, a division by zero, nesting deeper than MAX_NESTING or a result beyond float range.
 *
 *   sum     := product (("+" | "-") product)*
 *   product := unary (("*" | "/") unary)*
 *   unary   := "-" unary | "(" sum ")" | number
 */
export function evaluateExpression(expression: string): number {
  let pos = 0;
  const peek = (): string | undefined => {
    while (pos < expression.length && /\s/.test(expression[pos])) pos++;
    return expression[pos];
  };
  const fail = (expected: string): never => {
    const found = peek();
    throw new Error(
      found === undefined ? `expected ${expected}, found end of expression` : `expected ${expected} at offset ${pos}, found ${JSON.stringify(found)}`,
    );
  };

  const sum = (depth: number): number => {
    let value = product(depth);
    for (let op = peek(); op === '+' || op === '-'; op = peek()) {
      pos++;
      const right = product(depth);
      value = op === '+' ? value + right : value - right;
    }
    return value;
  };
  const product = (depth: number): number => {
    let value = unary(depth);
    for (let op = peek(); op === '*' || op === '/'; op = peek()) {
      const at = pos++;
      const right = unary(depth);
      if (op === '/' && right === 0) throw new Error(`division by zero at offset ${at}`);
      value = op === '*' ? value * right : value / right;
    }
    return value;
  };
  const unary = (depth: number): number => {
    if (depth > MAX_NESTING) throw new Error(`nested too deeply (over ${MAX_NESTING} levels) at offset ${pos}`);
    const next = peek();
    if (next === '-') {
      pos++;
      return -unary(depth + 1);
    }
    if (next === '(') {
      pos++;
      const value = sum(depth + 1);
      if (peek() !== ')') fail('")"');
      pos++;
      return value;
    }
    NUMBER.lastIndex = pos;
    const match = NUMBER.exec(expression);
    if (!match) return fail('a number');
    pos += match[0].length;
    return Number(match[0]);
  };

  if (peek() === undefined) throw new Error('empty expression');
  const value = sum(0);
  if (peek() !== undefined) fail('an operator');
  // Only reachable with huge literals or products (1e200 * 1e200), but then say so, not "Infinity".
  if (!Number.isFinite(value)) throw new Error('result out of range');
  return value;
}

/**
 * A result as the model reads it: integers in full; other values with DECIMALS decimals, or as
 * many as six significant digits need (values below 0.1), trailing zeros dropped. Rounding to
 * fixed decimals hides float noise the same way every time: 0.1 + 0.2 gives "0.3".
 */
export function formatNumber(value: number): string {
  // String() writes -0 as "0" and, past 1e21, uses an exponent, which rewards read too.
  if (Number.isInteger(value)) return String(value);
  const decimals = Math.min(100, Math.max(DECIMALS, DECIMALS - 1 - Math.floor(Math.log10(Math.abs(value)))));
  return value.toFixed(decimals).replace(/\.?0+$/, '');
}

const EXAMPLE_OPERATORS = ['+', '-', '*', '/'] as const;

/** A random `a op b` with operands 1..199: what a call looks like, unrelated to any task. */
function exampleExpression(rng: Rng): string {
  const operand = () => 1 + Math.floor(rng() * 199);
  const op = EXAMPLE_OPERATORS[Math.floor(rng() * EXAMPLE_OPERATORS.length)];
  return `${operand()} ${op} ${operand()}`;
}

export const calculatorTool = defineTool({
  name: 'calculator',
  description: 'Evaluates + - * / and ( ).',
  input: z.strictObject({ expression: z.string().max(MAX_EXPRESSION_LENGTH) }),
  run: ({ expression }) => formatNumber(evaluateExpression(expression)),
  example: (rng) => ({ expression: exampleExpression(rng) }),
});
