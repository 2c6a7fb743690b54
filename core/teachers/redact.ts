// The API key never leaves the Authorization header: every text that came from a server or
// a failure is passed through redactSecrets before it is logged, summarised or written
// (a server that echoes the request's headers must not put the key anywhere).

export const API_KEY_ENV = 'AGENT_LAB_TEACHER_API_KEY';

/**
 * Replaces the API key (keys of 8 characters or more) and any `Bearer <token>` with `[redacted]`.
 * `apiKey` is the key in use, read by the caller from API_KEY_ENV: core/ reads no environment.
 */
export function redactSecrets(text: string, apiKey?: string): string {
  let out = text;
  if (apiKey && apiKey.length >= 8) out = out.split(apiKey).join('[redacted]');
  return out.replace(/\b(Bearer)\s+(?!\[redacted\])[^\s"',;]+/gi, '$1 [redacted]');
}
