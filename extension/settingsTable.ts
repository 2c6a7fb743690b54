// The agentLab.* settings package.json declares (contributes.configuration), typed once: their
// keys, value types and defaults. test/unit/editorTables.test.ts checks them against
// package.json, so a setting added there and not here (or the other way) fails the tests.
// No `vscode` here; extension/settings.ts reads them.

/** Every setting by its key under `agentLab.`, with its value's type. */
export interface Settings {
  runsFolder: string;
  world: string;
  datasetGlobs: string[];
  tokenizerPath: string;
  chatTemplate: string;
  chatDatasetGlobs: string[];
  chatMaxLength: number;
  'trace.server': string;
  preset: string;
  'sft.minutes': number;
  'sft.steps': number;
  'sft.askBudget': boolean;
  'sft.heldoutTasks': number;
  'evaluate.tasks': number;
  'grpo.steps': number;
  'grpo.groupSize': number;
  'grpo.tasksPerStep': number;
  'grpo.temperature': number;
  'grpo.reward': string;
  backend: string;
  codeLens: boolean;
  'teacher.kind': string;
  'teacher.baseUrl': string;
  'teacher.model': string;
  'teacher.temperature': number;
  'teacher.maxTokens': number;
  'teacher.timeoutMs': number;
  'teacher.retries': number;
}

export type SettingKey = keyof Settings;

/** package.json's defaults: what a setting reads where VS Code has none (a test checks they are the declared ones). */
export const SETTING_DEFAULTS: Readonly<Settings> = {
  runsFolder: 'runs',
  world: '',
  datasetGlobs: ['**/*.traces.jsonl'],
  tokenizerPath: '',
  chatTemplate: '',
  chatDatasetGlobs: [],
  chatMaxLength: 0,
  'trace.server': 'off',
  preset: 'tiny',
  'sft.minutes': 3,
  'sft.steps': 0,
  'sft.askBudget': true,
  'sft.heldoutTasks': 50,
  'evaluate.tasks': 0,
  'grpo.steps': 60,
  'grpo.groupSize': 8,
  'grpo.tasksPerStep': 4,
  'grpo.temperature': 0.8,
  'grpo.reward': 'exact,step=0.05',
  backend: 'auto',
  codeLens: true,
  'teacher.kind': 'stub',
  'teacher.baseUrl': '',
  'teacher.model': '',
  'teacher.temperature': 0.7,
  'teacher.maxTokens': 512,
  'teacher.timeoutMs': 30000,
  'teacher.retries': 2,
};
