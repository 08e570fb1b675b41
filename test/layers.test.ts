/**
 * The folders of src/ form layers: the graph of which folder imports which has no cycle, so each
 * folder can be read, tested and changed with only the folders below it in mind. eslint.config.js
 * holds the order and forbids each folder to import the ones above it; this builds the graph from
 * the sources (type imports, re-exports and dynamic imports included), independently of that
 * order, so a rule written wrong cannot hide a cycle.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const SRC = path.resolve(__dirname, '../src');

/** One import from a file of one src/ node into another: `src/a/x.ts imports ../b/y`. */
interface ImportEdge {
  from: string;
  to: string;
  where: string;
}

/** A file's node: its top-level folder under src/, or the file itself for files directly in src/. */
function nodeOf(file: string): string {
  const [first, ...rest] = path.relative(SRC, file).split(path.sep);
  return rest.length > 0 ? `${first}/` : first;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every import between different nodes of src/ (imports leaving src/ are other layers' business). */
function importEdges(files: readonly string[]): ImportEdge[] {
  return files.flatMap((file) => {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    return importedFiles
      .filter(({ fileName }) => fileName.startsWith('.'))
      .map(({ fileName }) => ({ file, target: path.resolve(path.dirname(file), fileName) }))
      .filter(({ target }) => target.startsWith(SRC + path.sep))
      .map(({ file: importer, target }) => ({
        from: nodeOf(importer),
        to: nodeOf(target),
        where: `${path.relative(path.dirname(SRC), importer)} imports ${path.relative(path.dirname(importer), target)}`,
      }))
      .filter(({ from, to }) => from !== to);
  });
}

/** A cycle as the edges that close it (each with the import that makes it), or undefined when there is none. */
function findCycle(edges: readonly ImportEdge[]): ImportEdge[] | undefined {
  const out = new Map<string, ImportEdge[]>();
  for (const edge of edges) out.set(edge.from, [...(out.get(edge.from) ?? []), edge]);
  const done = new Set<string>();
  const onPath: ImportEdge[] = [];
  const visiting = new Set<string>();

  const visit = (node: string): ImportEdge[] | undefined => {
    if (done.has(node)) return undefined;
    visiting.add(node);
    for (const edge of out.get(node) ?? []) {
      onPath.push(edge);
      if (visiting.has(edge.to)) return onPath.slice(onPath.findIndex((e) => e.from === edge.to));
      const cycle = visit(edge.to);
      if (cycle) return cycle;
      onPath.pop();
    }
    visiting.delete(node);
    done.add(node);
    return undefined;
  };
  for (const node of out.keys()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return undefined;
}

const describeCycle = (cycle: readonly ImportEdge[]): string => cycle.map((edge) => `${edge.from} -> ${edge.to} (${edge.where})`).join('\n');

describe('src/ folder layers', () => {
  it('finds a cycle and names the imports that close it', () => {
    const edges: ImportEdge[] = [
      { from: 'a/', to: 'b/', where: 'src/a/x.ts imports ../b/y' },
      { from: 'b/', to: 'c/', where: 'src/b/y.ts imports ../c/z' },
      { from: 'c/', to: 'b/', where: 'src/c/z.ts imports ../b/w' },
    ];
    expect(findCycle(edges)?.map((edge) => edge.where)).toEqual(['src/b/y.ts imports ../c/z', 'src/c/z.ts imports ../b/w']);
    expect(findCycle(edges.slice(0, 2))).toBeUndefined();
  });

  it('has no cycle between the folders of src/', () => {
    const edges = importEdges(sourceFiles(SRC));
    // The graph is read from the sources: a scan that found nothing would pass without checking.
    expect(edges.length).toBeGreaterThan(20);
    const cycle = findCycle(edges);
    if (cycle) throw new Error(`src/ folders import each other:\n${describeCycle(cycle)}`);
  });
});
