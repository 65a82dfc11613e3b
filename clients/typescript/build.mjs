// build.mjs — `npm run build` (and prepack): compiles src/ twice with the TypeScript compiler,
// as ES modules into dist/esm and as CommonJS into dist/cjs, and marks dist/cjs as CommonJS (the
// package itself is "type": "module"), so package.json "exports" serves `import` and `require()`
// each their own build with its own type declarations.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, 'node_modules', '.bin', 'tsc');
rmSync(join(here, 'dist'), { recursive: true, force: true });
for (const project of ['tsconfig.json', 'tsconfig.cjs.json']) {
  execFileSync(tsc, ['-p', join(here, project)], { stdio: 'inherit' });
}
mkdirSync(join(here, 'dist', 'cjs'), { recursive: true });
writeFileSync(join(here, 'dist', 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
