// Runs the same integration suite (dist/test/vscode/suite) in desktop VS Code through
// @vscode/test-electron, for machines that can download VS Code.
//
//   npm run build && npx tsx test/vscode/runElectron.ts
//
// NOT run by CI here: @vscode/test-electron downloads VS Code from its update server,
// which is unreachable on these machines (only the npm registry and Debian's packages are),
// so the download fails. CI runs the same suite in code-server instead
// (test/vscode/runCodeServer.ts via scripts/test-vscode.sh). On Linux without a display,
// run it under xvfb-run.
//
// Environment: VSCODE_TEST_VERSION (default 1.100.3, the version code-server 4.100.3 embeds;
// "stable" or "insiders" work too), AGENT_LAB_TEST_GREP (mocha grep).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runTests } from '@vscode/test-electron';

async function main(): Promise<number> {
  const repoRoot = path.resolve(__dirname, '..', '..');
  const extensionTestsPath = path.join(repoRoot, 'dist', 'test', 'vscode', 'suite', 'index.js');
  if (!fs.existsSync(extensionTestsPath) || !fs.existsSync(path.join(repoRoot, 'dist', 'extension.js'))) {
    console.error('[vscode-tests] CANNOT RUN: dist/ is not built: run `npm run build` first');
    return 1;
  }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-electron-'));
  const workspace = path.join(scratch, 'workspace');
  fs.cpSync(path.join(repoRoot, 'test', 'fixtures', 'workspace'), workspace, { recursive: true });
  const userData = path.join(scratch, 'user-data');
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify({ 'workbench.startupEditor': 'none', 'security.workspace.trust.enabled': false }),
  );
  const resultsDir = path.join(repoRoot, 'test-results');
  fs.mkdirSync(resultsDir, { recursive: true });
  const reportFile = path.join(resultsDir, 'vscode-electron-mocha.txt');
  fs.writeFileSync(reportFile, '');
  try {
    // In desktop VS Code the extension host's console reaches this terminal directly.
    return await runTests({
      version: process.env['VSCODE_TEST_VERSION'] || '1.100.3',
      extensionDevelopmentPath: repoRoot,
      extensionTestsPath,
      extensionTestsEnv: { AGENT_LAB_TEST_REPORT: reportFile },
      launchArgs: [
        workspace,
        '--user-data-dir',
        userData,
        '--extensions-dir',
        path.join(scratch, 'extensions'),
        '--disable-workspace-trust',
        '--disable-gpu',
        '--skip-welcome',
        '--skip-release-notes',
      ],
    });
  } catch (err) {
    console.error(`[vscode-tests] desktop VS Code run failed: ${(err as Error).message}`);
    console.error('[vscode-tests] (offline machines cannot download VS Code; use scripts/test-vscode.sh, which runs code-server)');
    return 1;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
