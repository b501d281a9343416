// Bundles one page's entry point (web/<page>/main.js, with the CSS it imports) into
// <outdir>/<page>.js and <outdir>/<page>.css: minified, one IIFE, nothing loaded at view time.
// Usage: node build.mjs <page> <outdir>
import * as esbuild from 'esbuild';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [page, outdir] = process.argv.slice(2);
if (!page || !outdir) {
  console.error('usage: node build.mjs <page> <outdir>');
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
await esbuild.build({
  entryPoints: { [page]: join(here, page, 'main.js') },
  outdir,
  bundle: true,
  minify: true,
  format: 'iife',
  target: 'es2020',
  legalComments: 'inline',
  logLevel: 'warning',
});
// Inlined into <script> and <style>: a closing tag inside would end them early.
for (const [ext, tag] of [
  ['js', '</script'],
  ['css', '</style'],
]) {
  let text = '';
  try {
    text = readFileSync(join(outdir, `${page}.${ext}`), 'utf8');
  } catch {
    continue; // a page without CSS
  }
  if (text.toLowerCase().includes(tag)) {
    console.error(`web/${page}: the bundled ${ext} contains "${tag}", which would end the inline tag`);
    process.exit(1);
  }
}
