// The README a packed extension shows (scripts/vsix-readme.mjs): the details page allows only
// https: and data: images, so relative screenshots go in inlined and dead links become text.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

type VsixReadme = (markdown: string, readFile?: (rel: string) => Buffer) => string;
const root = path.resolve(__dirname, '..', '..');

describe('the packed README (scripts/vsix-readme.mjs)', () => {
  let vsixReadme: VsixReadme;
  before(async () => {
    ({ vsixReadme } = (await import(pathToFileURL(path.join(root, 'scripts', 'vsix-readme.mjs')).href)) as { vsixReadme: VsixReadme });
  });

  it('inlines relative PNGs as data: URIs and leaves https images and anchors alone', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    const md = '![shot](media/a.png)\n![remote](https://example.com/b.png)\n[top](#top)';
    const out = vsixReadme(md, (rel) => {
      assert.equal(rel, 'media/a.png');
      return png;
    });
    assert.equal(out, `![shot](data:image/png;base64,${png.toString('base64')})\n![remote](https://example.com/b.png)\n[top](#top)`);
  });

  it('turns links to files the .vsix does not ship into text naming the file', () => {
    assert.equal(vsixReadme('see [CONTRIBUTING.md](CONTRIBUTING.md) and [the figures](docs/results.md).'), 'see `CONTRIBUTING.md` and the figures (`docs/results.md` in the source repository).');
  });

  it('refuses a missing image and an SVG, naming it', () => {
    assert.throws(() => vsixReadme('![x](media/none.png)', () => { throw new Error('ENOENT'); }), /'media\/none.png' does not exist/);
    assert.throws(() => vsixReadme('![x](media/a.svg)'), /'media\/a.svg' is not a PNG/);
  });

  it("the repository's README comes out with every image inlined and no relative link left", () => {
    const out = vsixReadme(fs.readFileSync(path.join(root, 'README.md'), 'utf8'));
    const images = [...out.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)].map((m) => m[1]!);
    assert.ok(images.length >= 2, `${images.length} images`);
    for (const src of images) assert.match(src, /^(data:image\/png;base64,|https:)/);
    const links = [...out.matchAll(/(?<!!)\[[^\]]*\]\(([^)]+)\)/g)].map((m) => m[1]!).filter((l) => !/^(https?:|mailto:|#)/.test(l));
    assert.deepEqual(links, []);
  });
});
