// The typed settings (extension/settingsTable.ts) are package.json's: the same keys, the same
// defaults, and each value of the declared JSON type.
import * as assert from 'node:assert/strict';
import { SETTING_DEFAULTS } from '../../extension/settingsTable';
import { declaredSettings } from '../support/settings';

describe('extension/settingsTable: the settings typed once', () => {
  it("holds every setting package.json declares, with its default, and no other", () => {
    const declared = declaredSettings();
    assert.deepEqual(Object.keys(SETTING_DEFAULTS).map((k) => `agentLab.${k}`).sort(), Object.keys(declared).sort());
    for (const [key, value] of Object.entries(SETTING_DEFAULTS)) {
      const d = declared[`agentLab.${key}`]!;
      assert.deepEqual(value, d.default, `agentLab.${key}'s default`);
      const type = Array.isArray(value) ? 'array' : typeof value === 'number' ? (d.type === 'integer' ? 'integer' : 'number') : typeof value;
      assert.equal(type, d.type, `agentLab.${key}'s type`);
    }
  });
});
