/**
 * The doc comments of zod object schemas, read from their TypeScript sources: what each config key
 * does is written once, above the key in the schema, and the config reference (docs/config.md)
 * quotes it from there.
 */
import { readFileSync } from 'node:fs';
import ts from 'typescript';

/** A schema's comment and those of its keys, nested as the schema's objects are. */
export interface CommentTree {
  text?: string;
  keys: Map<string, CommentTree>;
}

const OBJECT_FACTORIES = new Set(['object', 'strictObject', 'looseObject']);
const REGISTER_CALLS = { registerEnvironment: 'environments', registerAgent: 'agents' } as const;

/** Plugins' option schemas by registered name, as found in the sources that register them. */
export interface PluginOptionComments {
  environments: Map<string, CommentTree>;
  agents: Map<string, CommentTree>;
}

export function parseSource(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
}

/** The comment tree of the schema a file declares as `const <name> = z...`. */
export function schemaComments(source: ts.SourceFile, name: string): CommentTree {
  const declaration = findConstant(source, name);
  if (declaration?.initializer === undefined) throw new Error(`${source.fileName}: no const ${name} with an initializer`);
  return { text: declarationComment(declaration), keys: shapeComments(declaration.initializer, source) };
}

/**
 * The option schemas passed as `options` to `registerEnvironment(name, ...)` and
 * `registerAgent(name, ...)` calls in the given sources.
 */
export function pluginOptionComments(sources: readonly ts.SourceFile[]): PluginOptionComments {
  const found: PluginOptionComments = { environments: new Map(), agents: new Map() };
  for (const source of sources) {
    const visit = (node: ts.Node): void => {
      const registration = asRegistration(node);
      if (registration) found[REGISTER_CALLS[registration.call]].set(registration.name, { keys: shapeComments(registration.options, source) });
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

function asRegistration(node: ts.Node): { call: keyof typeof REGISTER_CALLS; name: string; options: ts.Expression } | undefined {
  if (!ts.isCallExpression(node) || !ts.isPropertyAccessExpression(node.expression)) return undefined;
  const call = node.expression.name.text;
  if (!(call in REGISTER_CALLS)) return undefined;
  const [nameArgument, definition] = node.arguments;
  // `'name' satisfies typeof CONSTANT` ties a literal name to the constant that code compares with.
  const name = nameArgument && ts.isSatisfiesExpression(nameArgument) ? nameArgument.expression : nameArgument;
  if (!name || !ts.isStringLiteral(name) || !definition || !ts.isObjectLiteralExpression(definition)) return undefined;
  const options = definition.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && propertyName(p) === 'options');
  return options ? { call: call as keyof typeof REGISTER_CALLS, name: name.text, options: options.initializer } : undefined;
}

/**
 * The comments of the keys of the object schema an expression builds: through method chains
 * (`.optional()`, `.prefault({})`, `.refine(...)`) and constants of the same file, to the
 * `z.object({...})`-like call at the root. Empty for schemas that are not objects.
 */
function shapeComments(expression: ts.Expression, source: ts.SourceFile): Map<string, CommentTree> {
  const shape = objectShape(expression, source);
  const keys = new Map<string, CommentTree>();
  for (const property of shape?.properties ?? []) {
    if (!ts.isPropertyAssignment(property)) continue;
    const name = propertyName(property);
    if (name === undefined) continue;
    const nested = shapeComments(property.initializer, source);
    // A key whose value is a named object schema is described by the key's comment and the schema's.
    const referenced = nested.size > 0 ? referencedConstant(property.initializer, source) : undefined;
    const texts = [docComment(property, source), referenced && declarationComment(referenced)].filter((t) => t !== undefined);
    keys.set(name, { text: texts.length > 0 ? texts.join(' ') : undefined, keys: nested });
  }
  return keys;
}

function objectShape(expression: ts.Expression, source: ts.SourceFile): ts.ObjectLiteralExpression | undefined {
  for (let node: ts.Expression = expression; ;) {
    if (ts.isIdentifier(node)) {
      const initializer = findConstant(source, node.text)?.initializer;
      return initializer ? objectShape(initializer, source) : undefined;
    }
    if (!ts.isCallExpression(node) || !ts.isPropertyAccessExpression(node.expression)) return undefined;
    const callee = node.expression;
    const [first] = node.arguments;
    if (ts.isIdentifier(callee.expression) && callee.expression.text === 'z') {
      return OBJECT_FACTORIES.has(callee.name.text) && first && ts.isObjectLiteralExpression(first) ? first : undefined;
    }
    node = callee.expression;
  }
}

/** The constant at the root of a method chain (`TraceConfigSchema` in `TraceConfigSchema.prefault({})`). */
function referencedConstant(expression: ts.Expression, source: ts.SourceFile): ts.VariableDeclaration | undefined {
  let node = expression;
  while (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) node = node.expression.expression;
  return ts.isIdentifier(node) ? findConstant(source, node.text) : undefined;
}

function findConstant(source: ts.SourceFile, name: string): ts.VariableDeclaration | undefined {
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const declaration = statement.declarationList.declarations.find((d) => ts.isIdentifier(d.name) && d.name.text === name);
    if (declaration) return declaration;
  }
  return undefined;
}

function declarationComment(declaration: ts.VariableDeclaration): string | undefined {
  const statement = declaration.parent.parent;
  return docComment(statement, statement.getSourceFile());
}

function propertyName(property: ts.PropertyAssignment): string | undefined {
  const { name } = property;
  return ts.isIdentifier(name) || ts.isStringLiteral(name) ? name.text : undefined;
}

/**
 * The text of the last doc comment right before a node, on one line. A comment on the line of the
 * token before the node, as in `{ /** ... *\/ key: ... }`, counts: TypeScript calls it that
 * token's trailing comment, not one leading the node.
 */
function docComment(node: ts.Node, source: ts.SourceFile): string | undefined {
  const start = node.getFullStart();
  const ranges = [...(ts.getTrailingCommentRanges(source.text, start) ?? []), ...(ts.getLeadingCommentRanges(source.text, start) ?? [])];
  const doc = ranges.filter((range) => source.text.startsWith('/**', range.pos)).at(-1);
  if (!doc) return undefined;
  const text = source.text
    .slice(doc.pos + 3, doc.end - 2)
    .split('\n')
    .map((line) => line.replace(/^\s*\*?\s?/, '').trim())
    .filter((line) => line.length > 0)
    .join(' ');
  return text || undefined;
}
