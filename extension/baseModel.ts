// Train (SFT) from a Hugging Face model folder (issue 29): the model quick pick's items (the
// presets, then the folder), the folder's verdict from the loader's own inspection
// (`agent-lab model inspect --base DIR --json`, run as a child process by training.ts: the
// loader imports tfjs, which never loads in the extension host), the Full / LoRA choice, and
// the job spec's model fields. No `vscode` here, so the unit tests check all of it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SftJobSpec } from '../core/protocol/worker';
import { TOKENIZER_FILE } from '../core/protocol/folders';
import { PRESETS, PRESET_NAMES, type PresetName } from '../trainer/model/modelConfig';

/** The LoRA the editor offers: PEFT's common r 8, alpha 16 on every target (`--lora 8,16`). */
export const EDITOR_LORA = { r: 8, alpha: 16 } as const;
export const EDITOR_LORA_SPEC = `${EDITOR_LORA.r},${EDITOR_LORA.alpha}`;

/** What the student starts from: a preset's fresh weights, or a Hugging Face folder's (fully, or LoRA on it frozen). */
export type ModelChoice = { preset: string } | { base: string; lora?: string };

/** What one item of the model quick pick does. */
export type ModelPick = { preset: string } | { folder: string } | { browse: true };
export interface ModelPickItem {
  label: string;
  description: string;
  detail?: string;
  pick: ModelPick;
}

const presetDetail = (name: PresetName): string => {
  const m = PRESETS[name].model;
  return `${m.layers} layer${m.layers === 1 ? '' : 's'}, width ${m.dModel}, ${m.heads} heads, context ${m.maxSeq}: fresh weights`;
};

/**
 * The model quick pick: the presets (agentLab.preset first), then the last Hugging Face
 * folder used (when it is still there) and "A Hugging Face model folder…", which opens a
 * folder dialog. A folder used last is offered first of all.
 */
export function modelPickItems(configuredPreset: string, lastFolder: string | undefined, folderExists: (dir: string) => boolean = fs.existsSync): ModelPickItem[] {
  const names = [...PRESET_NAMES].sort((a, b) => (a === configuredPreset ? -1 : b === configuredPreset ? 1 : 0));
  const presets: ModelPickItem[] = names.map((name) => ({
    label: name,
    description: `preset${name === configuredPreset ? ' · agentLab.preset' : ''}`,
    detail: presetDetail(name),
    pick: { preset: name },
  }));
  const browse: ModelPickItem = {
    label: 'A Hugging Face model folder…',
    description: 'Llama or Qwen2: config.json, tokenizer.json, model.safetensors',
    detail: "its weights, trained fully or with LoRA; its own tokenizer becomes the run's",
    pick: { browse: true },
  };
  if (lastFolder === undefined || !folderExists(lastFolder)) return [...presets, browse];
  const last: ModelPickItem = { label: path.basename(lastFolder), description: 'Hugging Face model folder · last used', detail: lastFolder, pick: { folder: lastFolder } };
  return [last, ...presets, browse];
}

/** What `model inspect --json` says of a folder the lab can start from. */
export interface BaseFolderInfo {
  dir: string;
  architecture: string;
  parameters: number;
  /** The tokenizer: the model's own (`added`: the wire specials it lacks, added as tokens), or the lab's (an exported run). */
  tokenizer: { kind: 'hf'; added: number } | { kind: 'lab' };
}
export type BaseVerdict = { ok: true; info: BaseFolderInfo } | { ok: false; message: string };

/** A CLI run's outcome, as extension/cliProcess.ts returns it. */
export interface InspectRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const refuse = (dir: string, why: string): BaseVerdict => ({ ok: false, message: `Agent Lab: cannot train from ${dir}: ${why}` });

/**
 * The folder's verdict from `agent-lab model inspect --base DIR --json`: its refusal (an
 * unsupported architecture, a missing config.json or model.safetensors, a bad weight) is the
 * loader's own line; a folder without tokenizer.json, or whose tokenizer `train sft --base`
 * would refuse, is refused here before a run folder is made.
 */
export function baseFolderVerdict(dir: string, run: InspectRun): BaseVerdict {
  if (run.code !== 0) {
    const line = run.stderr.split('\n').map((l) => l.trim()).find((l) => l !== '') ?? `model inspect exited with code ${String(run.code)} and said nothing`;
    return refuse(dir, line.replace(/^agent-lab model: /, ''));
  }
  let info: Record<string, unknown>;
  try {
    info = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
  } catch {
    return refuse(dir, 'model inspect printed no JSON (see the "Agent Lab" output)');
  }
  const tok = (info['tokenizer'] ?? {}) as Record<string, unknown>;
  const base = { dir, architecture: String(info['architecture']), parameters: Number(info['parameters']) };
  if (tok['kind'] === 'absent') return refuse(dir, `no ${TOKENIZER_FILE} (the tokenizer the model was trained with is needed)`);
  if (tok['kind'] === 'hf') {
    if (typeof tok['problem'] === 'string') return refuse(dir, tok['problem']);
    return { ok: true, info: { ...base, tokenizer: { kind: 'hf', added: Array.isArray(tok['added']) ? tok['added'].length : 0 } } };
  }
  if (tok['kind'] === 'lab') return { ok: true, info: { ...base, tokenizer: { kind: 'lab' } } };
  return refuse(dir, `model inspect reported an unknown tokenizer kind ${JSON.stringify(tok['kind'])}`);
}

/**
 * A folder holding the lab's own tokenizer (a run the lab exported) needs the run folder to
 * hold that same tokenizer and its data; the editor prepares only fresh runs with their own
 * tokenizer, so it points to the CLI. Null where the editor can train from the folder.
 */
export function editorRefusal(info: BaseFolderInfo): string | null {
  if (info.tokenizer.kind !== 'lab') return null;
  return (
    `Agent Lab: ${info.dir} holds the lab's own tokenizer (a run the lab exported): its run folder's data and tokenizer are needed. ` +
    `Continue that run instead, or copy it and run agent-lab train sft --base ${info.dir} --run COPY`
  );
}

export interface TrainModeItem {
  label: string;
  description: string;
  detail: string;
  lora?: string;
}

/**
 * Full fine-tuning or LoRA (r 8, alpha 16). Where the model's tokenizer lacks wire-format
 * specials they become new embedding rows, which LoRA trains beside its adapters (the
 * model's own rows stay frozen): LoRA's detail says so.
 */
export function trainModeItems(info: BaseFolderInfo): TrainModeItem[] {
  const params = info.parameters.toLocaleString('en-US');
  const added = info.tokenizer.kind === 'hf' ? info.tokenizer.added : 0;
  return [
    { label: 'Full fine-tuning', description: `all ${params} parameters`, detail: `${info.architecture}: every weight trains` },
    {
      label: `LoRA (r ${EDITOR_LORA.r}, alpha ${EDITOR_LORA.alpha})`,
      description: 'adapters on q, k, v, o, gate, up, down',
      detail: added
        ? `${info.architecture} frozen; the adapters train (PEFT's y = Wx + (alpha/r) BAx) and the ${added} embedding rows added for the wire-format specials`
        : `${info.architecture} frozen; only the adapters train (PEFT's y = Wx + (alpha/r) BAx)`,
      lora: EDITOR_LORA_SPEC,
    },
  ];
}

/** The job spec's model fields: a preset, or the folder (and LoRA) the worker passes to runSft as --base / --lora. */
export function sftModelFields(choice: ModelChoice): Pick<SftJobSpec, 'preset' | 'base' | 'lora'> {
  if ('preset' in choice) return { preset: choice.preset };
  return { base: path.resolve(choice.base), ...(choice.lora !== undefined ? { lora: choice.lora } : {}) };
}

