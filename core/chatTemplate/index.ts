// The loss mask of any Hugging Face chat template (issue 30): template + tokenizer folder in,
// per-token masks and findings out. Pure; cli/ and language-server/ read the files.
export { ChatTemplateError, compileChatTemplate, pickTemplate, rewriteGenerationTags } from './template';
export type { CompiledTemplate, Rendered } from './template';
export { loadChatModel } from './model';
export type { ChatModel, TokenizerFolderTexts } from './model';
export { RowError, looksConversational, parseConversationRow } from './row';
export type { ConversationRow, Message } from './row';
export { FINDING_CODES, computeRowMask } from './mask';
export { patchGenerationTags } from './patch';
export type { PatchOptions, PatchResult } from './patch';
export type { Finding, FindingCode, MaskOptions, MaskToken, RowMask, Severity } from './mask';
