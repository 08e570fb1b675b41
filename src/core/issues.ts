/**
 * The one way trajflow names a validation problem: `where: what`, with `where` the path of the
 * offending field as a reader writes it (`env.tools[1]`), for config files, plugin options, tool
 * arguments and reward specs alike.
 */
import type { z } from 'zod';

/** `a.b[2].c`; `whole` names the value itself when the path is empty. */
export function fieldPath(path: readonly PropertyKey[], whole: string): string {
  if (path.length === 0) return whole;
  return path.map((key, i) => (typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`)).join('');
}

/** One `where: what` line per issue; `within` is the path of the validated value inside its document. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], within: readonly PropertyKey[] = [], whole = '(top level)'): string[] {
  return issues.map((issue) => `${fieldPath([...within, ...issue.path], whole)}: ${issue.message}`);
}

/** The same on one line (`; ` between issues), for an error message handed to a model or a caller. */
export function describeIssuesInline(issues: readonly z.core.$ZodIssue[], whole: string): string {
  return describeIssues(issues, [], whole).join('; ');
}
