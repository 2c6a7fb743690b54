// The one "plain JSON object" guard every validator and reader starts from. In
// core/protocol/ so that the webviews, which import nothing else of ours, share it.

/** A non-null, non-array object: what JSON.parse gives for `{...}`. */
export const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
