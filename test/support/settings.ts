// The editor settings package.json declares (contributes.configuration, one object or a list).
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from './reference';

export interface DeclaredSetting {
  type: string;
  default?: unknown;
}

/** Every declared setting by its full name (`agentLab.grpo.steps`). */
export function declaredSettings(): Record<string, DeclaredSetting> {
  type Section = { properties: Record<string, DeclaredSetting> };
  const declared = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { contributes: { configuration: Section | Section[] } }).contributes
    .configuration;
  return Object.assign({}, ...(Array.isArray(declared) ? declared : [declared]).map((c) => c.properties)) as Record<string, DeclaredSetting>;
}
