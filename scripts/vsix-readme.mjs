// The README a packed extension shows on its details page: dist/vsix/README.md (vsce
// --readme-path). Why not the README itself: VS Code's details page allows images only from
// https: and data: (its Content-Security-Policy), and this project publishes no repository
// whose raw URLs vsce could rewrite relative paths into; a relative image is always broken
// there. So the screenshots go in as data: URIs, and links to files the .vsix does not ship
// (CONTRIBUTING.md, docs/) become plain text naming the file.
//
//   node scripts/vsix-readme.mjs [--check]   (--check: print what it would write, write nothing)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outFile = path.join(root, 'dist', 'vsix', 'README.md');
const imageTypes = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif' };

/** The README with relative images inlined and relative links unlinked. Throws naming a missing image. */
export function vsixReadme(markdown, readFile = (rel) => fs.readFileSync(path.join(root, rel))) {
  const isRelative = (link) => !/^[a-z][a-z0-9+.-]*:/i.test(link) && !link.startsWith('#');
  return markdown.replace(/(!?)\[([^\]]*)\]\(([^)\s]+)\)/g, (whole, bang, text, link) => {
    if (!isRelative(link)) return whole;
    if (bang) {
      const type = imageTypes[path.extname(link).toLowerCase()];
      // SVG stays out: vsce refuses SVG data URLs, and the details page would not run it safely.
      if (!type) throw new Error(`vsix-readme: README image '${link}' is not a PNG, JPEG or GIF`);
      let bytes;
      try {
        bytes = readFile(link);
      } catch {
        throw new Error(`vsix-readme: README image '${link}' does not exist`);
      }
      return `![${text}](data:${type};base64,${Buffer.from(bytes).toString('base64')})`;
    }
    return text === link ? `\`${link}\`` : `${text} (\`${link}\` in the source repository)`;
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const out = vsixReadme(fs.readFileSync(path.join(root, 'README.md'), 'utf8'));
  if (process.argv.includes('--check')) {
    process.stdout.write(out.replace(/base64,[A-Za-z0-9+/=]+/g, 'base64,...'));
  } else {
    fs.mkdirSync(path.dirname(outFile), { recursive: true });
    fs.writeFileSync(outFile, out);
    console.log(`vsix-readme: ${path.relative(root, outFile)} (${(out.length / 1024).toFixed(0)} KiB, images inlined)`);
  }
}
