/** The calculator agent's tool, an ordinary activity: evaluates + - * / and parentheses over numbers. */

/** The value of `expression`, or an error message the model reads. */
async function calculate(expression) {
  if (!/^[\d\s+\-*/().]+$/.test(expression)) return `error: ${JSON.stringify(expression)} is not arithmetic (digits, + - * / and parentheses only)`;
  try {
    const value = Function(`"use strict"; return (${expression});`)();
    return Number.isFinite(value) ? String(value) : `error: ${expression} has no finite value`;
  } catch {
    return `error: cannot read ${JSON.stringify(expression)}`;
  }
}

module.exports = { calculate };
