// The editor's typed tables are package.json's: the settings (extension/settingsTable.ts: the
// same keys, the same defaults, each value of the declared JSON type) and the commands
// (extension/commandIds.ts: every contributed id, once).
import * as assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { COMMAND_IDS } from '../../extension/commandIds';
import { SETTING_DEFAULTS } from '../../extension/settingsTable';
import { repoRoot } from '../support/reference';
import { declaredSettings } from '../support/settings';

describe("the editor's settings and commands, typed once", () => {
  it('the settings table holds every setting package.json declares, with its default, and no other', () => {
    const declared = declaredSettings();
    assert.deepEqual(Object.keys(SETTING_DEFAULTS).map((k) => `agentLab.${k}`).sort(), Object.keys(declared).sort());
    for (const [key, value] of Object.entries(SETTING_DEFAULTS)) {
      const d = declared[`agentLab.${key}`]!;
      assert.deepEqual(value, d.default, `agentLab.${key}'s default`);
      const type = Array.isArray(value) ? 'array' : typeof value === 'number' ? (d.type === 'integer' ? 'integer' : 'number') : typeof value;
      assert.equal(type, d.type, `agentLab.${key}'s type`);
    }
  });

  it('the command ids are the contributed commands, each once', () => {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { contributes: { commands: { command: string }[] } };
    assert.equal(new Set(COMMAND_IDS).size, COMMAND_IDS.length);
    assert.deepEqual([...COMMAND_IDS].sort(), pkg.contributes.commands.map((c) => c.command).sort());
  });

  it('commands are registered in one place: no area calls registerCommand, each returns its handlers for the one table', () => {
    const extensionDir = path.join(repoRoot, 'extension');
    const files = readdirSync(extensionDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const registering = files.filter((f) => /\bregisterCommand\(/.test(readFileSync(path.join(extensionDir, f), 'utf8')));
    assert.deepEqual(registering, ['commands.ts']);
    // The table is typed with every contributed id (extension/commands.ts CommandTable); extension.ts builds it.
    assert.match(readFileSync(path.join(extensionDir, 'extension.ts'), 'utf8'), /const table: CommandTable = /);
  });
});
