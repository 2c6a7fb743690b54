// The extension-tests entry point (the standard `run()` contract): VS Code's extension
// host loads this file (dist/test/vscode/suite/index.js, built by scripts/build.mjs) and
// waits for the returned promise; a rejection makes the test run exit non-zero. The same
// file serves code-server (test/vscode/runCodeServer.ts) and desktop VS Code
// (test/vscode/runElectron.ts).
//
// Mocha is not bundled: it is resolved from the repository's node_modules (dist/ lives
// inside the repository). The extension host's console goes to the browser, not to the
// launcher's terminal, so the report is also appended to the file named by
// AGENT_LAB_TEST_REPORT; the launcher streams that file to its stdout.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as util from 'node:util';
import Mocha from 'mocha';

export function run(): Promise<void> {
  const reportFile = process.env['AGENT_LAB_TEST_REPORT'];
  const Base = Mocha.reporters.Base;
  const originalLog = Base.consoleLog;
  if (reportFile) {
    Base.consoleLog = (...args: unknown[]) => {
      originalLog(...args);
      fs.appendFileSync(reportFile, util.format(...args) + '\n');
    };
  }
  const mocha = new Mocha({ ui: 'bdd', color: false, reporter: 'spec', timeout: 60_000, slow: 5_000 });
  const grep = process.env['AGENT_LAB_TEST_GREP'];
  if (grep) mocha.grep(grep);
  const files = fs
    .readdirSync(__dirname)
    .filter((f) => f.endsWith('.test.js'))
    .sort();
  for (const f of files) mocha.addFile(path.join(__dirname, f));

  return new Promise<void>((resolve, reject) => {
    const finish = (err?: Error) => {
      Base.consoleLog = originalLog;
      if (err) reject(err);
      else resolve();
    };
    if (files.length === 0) {
      finish(new Error(`no *.test.js files in ${__dirname}: run npm run build`));
      return;
    }
    try {
      mocha.run((failures) => finish(failures > 0 ? new Error(`${failures} test(s) failed`) : undefined));
    } catch (err) {
      finish(err as Error);
    }
  });
}
