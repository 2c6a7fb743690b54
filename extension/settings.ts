// Reading and writing the agentLab.* settings by their typed keys (extension/settingsTable.ts):
// one place that names the configuration section, and a key that is not declared does not compile.
import * as vscode from 'vscode';
import { SETTING_DEFAULTS, type SettingKey, type Settings } from './settingsTable';

/** A setting's value in `scope` (a folder or a document; none: the window's), else its declared default. */
export function setting<K extends SettingKey>(key: K, scope?: vscode.ConfigurationScope | null): Settings[K] {
  return vscode.workspace.getConfiguration('agentLab', scope).get<Settings[K]>(key) ?? SETTING_DEFAULTS[key];
}

/**
 * A reader of the settings the option tables name by string (core/protocol/grpoOptions.ts and
 * sftOptions.ts `setting`), in one scope: undefined for a key the user left unset and
 * package.json does not declare.
 */
export function settingsReader(scope?: vscode.ConfigurationScope | null): (key: string) => unknown {
  const config = vscode.workspace.getConfiguration('agentLab', scope);
  return (key) => config.get(key);
}

/** Writes a setting (the picker commands: the world, the chat template). */
export async function updateSetting<K extends SettingKey>(key: K, value: Settings[K] | undefined, target: vscode.ConfigurationTarget, scope?: vscode.ConfigurationScope | null): Promise<void> {
  await vscode.workspace.getConfiguration('agentLab', scope).update(key, value, target);
}
