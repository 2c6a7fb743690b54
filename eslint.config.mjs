// Lint: `npm run lint`. Type-aware (typescript-eslint's project service reads the nearest
// tsconfig: tsconfig.json for the Node side, webview-ui/tsconfig.json for the panels).
// The folder import boundaries are one local rule (scripts/eslint/boundaries.mjs); the world and
// run folders' names another (scripts/eslint/folders.mjs: they live in core/protocol/folders.ts);
// core/'s purity a third (scripts/eslint/corePure.mjs: no Node modules, Buffer or process in core/).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import boundaries from './scripts/eslint/boundaries.mjs';
import folders from './scripts/eslint/folders.mjs';
import corePure from './scripts/eslint/corePure.mjs';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'out/**', 'runs/**', '.test-tools/**', '.vscode-test/**', 'test-results/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'agent-lab': { rules: { ...boundaries.rules, ...folders.rules, ...corePure.rules } } },
    rules: {
      'agent-lab/boundaries': 'error',
      // Exempts core/protocol/folders.ts itself and test/ (tests check the on-disk contract with literals).
      'agent-lab/folder-names': 'error',
      // Acts in core/ only; no exceptions today (a Node need of core/ is passed in by its caller).
      'agent-lab/core-pure': 'error',
      // A promise nobody awaits loses its rejection: the bug class this lint is here for.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // The lexers match ASCII on purpose (/[^\x00-\x7f]/): a control-character range is the point there.
      'no-control-regex': 'off',
      // tsc's noUnusedLocals/noUnusedParameters already say this; `_name` marks a parameter kept for a signature.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // The trainer's and the store's functions each fit on a screen (issue 31): a run is its phases, not one body.
    files: ['trainer/**/*.ts', 'store/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 150, skipBlankLines: true, skipComments: true }] },
  },
);
