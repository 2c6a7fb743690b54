// A diagnostic that cites the world formats' guide links to it (issue 35, item 6): the .vsix
// ships docs/worlds.md and the code's link opens it, where a bare "docs/worlds.md" in the
// message named a file a packed extension's user could not find.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { analyseWorldFile } from '../../language-server/worldFiles';

describe('language server: diagnostics link the world guide they cite', () => {
  it('a decimal value cites docs/worlds.md and links the file; a duplicate fact carries no link', () => {
    const text = 'entity,attribute,value\nVolga,length in km,3530.5\nVolga,source country,Russia\nVolga,source country,Russia\n';
    const a = analyseWorldFile(text, '/tmp/rivers/facts.csv', 'facts');
    const decimal = a.diagnostics.find((d) => d.range.start.line === 1);
    assert.ok(decimal, JSON.stringify(a.diagnostics.map((d) => [d.range.start.line, d.message])));
    assert.match(String(decimal.message), /docs\/worlds\.md/);
    const href = decimal.codeDescription?.href;
    assert.ok(href, 'the decimal diagnostic links the guide');
    const file = fileURLToPath(href);
    assert.equal(file, path.resolve(__dirname, '..', '..', 'docs', 'worlds.md'));
    assert.match(fs.readFileSync(file, 'utf8'), /fact table/i);
    const duplicate = a.diagnostics.find((d) => d.range.start.line === 3);
    assert.ok(duplicate);
    assert.doesNotMatch(String(duplicate.message), /docs\/worlds\.md/);
    assert.equal(duplicate.codeDescription, undefined);
  });

  it('the .vsix lets the guide in (.vscodeignore), so the link resolves in a packed extension', () => {
    const ignore = fs.readFileSync(path.resolve(__dirname, '..', '..', '.vscodeignore'), 'utf8').split('\n');
    assert.ok(ignore.includes('!docs/worlds.md'), '.vscodeignore lets docs/worlds.md in');
  });
});
