// A hostile OpenAI chat-completions server for the HTTP teacher's tests (issue 11): on
// 127.0.0.1 only, a free port, and per request one of the ways a real server misbehaves —
// 5xx with or without Retry-After, 429, slow (no headers for a while), drip (a byte at a
// time), huge (a reply of any size, streamed with backpressure so the server itself stays
// small), truncated (Content-Length larger than what is sent, then the socket closed) and
// echo (the request's Authorization header sent back, in an error message or in the step).
// It records when each request arrived and how many body bytes it managed to send.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Mode =
  | { kind: 'ok'; content: string }
  | { kind: 'status'; status: number; retryAfter?: string; message?: string }
  | { kind: 'slow'; delayMs: number; content: string }
  | { kind: 'drip'; everyMs: number; content: string }
  | { kind: 'huge'; bytes: number; declareLength?: boolean }
  | { kind: 'truncated'; content: string }
  | { kind: 'echo'; where: 'error' | 'content' }
  | { kind: 'hang' };

export interface Arrival {
  at: number;
  authorization: string | undefined;
  mode: Mode['kind'];
  /** Body bytes written before the reply ended or the client went away. */
  sent: number;
  /** The client closed the connection before the reply was complete. */
  aborted: boolean;
}

export interface HostileServer {
  baseUrl: string;
  arrivals: Arrival[];
  close(): Promise<void>;
}

/** The JSON of a chat completion whose message content is `content`. */
export function completion(content: string): string {
  return JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] });
}

/** `modeFor(n, body)`: how to answer the n-th request (1-based), given its JSON body. */
export async function hostileChatServer(modeFor: (n: number, body: string) => Mode): Promise<HostileServer> {
  const arrivals: Arrival[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, f: () => void): void => {
    const t = setTimeout(() => {
      timers.delete(t);
      f();
    }, ms);
    timers.add(t);
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const mode = modeFor(arrivals.length + 1, Buffer.concat(chunks).toString('utf8'));
      const a: Arrival = { at: performance.now(), authorization: req.headers.authorization, mode: mode.kind, sent: 0, aborted: false };
      arrivals.push(a);
      res.on('close', () => {
        if (!res.writableFinished) a.aborted = true;
      });
      const send = (status: number, body: string, headers: Record<string, string> = {}): void => {
        a.sent += Buffer.byteLength(body);
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body);
      };
      switch (mode.kind) {
        case 'ok':
          return send(200, completion(mode.content));
        case 'status':
          return send(mode.status, JSON.stringify({ error: { message: mode.message ?? `status ${mode.status}` } }), mode.retryAfter !== undefined ? { 'retry-after': mode.retryAfter } : {});
        case 'slow':
          return later(mode.delayMs, () => send(200, completion(mode.content)));
        case 'drip': {
          const body = completion(mode.content);
          res.writeHead(200, { 'content-type': 'application/json' });
          let i = 0;
          const tick = (): void => {
            if (res.destroyed) return;
            if (i >= body.length) return void res.end();
            res.write(body[i++]!);
            a.sent++;
            later(mode.everyMs, tick);
          };
          return tick();
        }
        case 'huge': {
          // A valid-looking completion whose content never ends: {"choices": [{"message": {"content": "Thought: aaaa...
          res.writeHead(200, { 'content-type': 'application/json', ...(mode.declareLength ? { 'content-length': String(mode.bytes) } : {}) });
          const head = '{"choices": [{"message": {"role": "assistant", "content": "Thought: ';
          const chunk = Buffer.alloc(64 * 1024, 'a');
          res.write(head);
          a.sent += head.length;
          const pump = (): void => {
            while (a.sent < mode.bytes && !res.destroyed) {
              const n = Math.min(chunk.length, mode.bytes - a.sent);
              a.sent += n;
              if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void res.once('drain', pump);
            }
            if (!res.destroyed) res.end();
          };
          return pump();
        }
        case 'truncated': {
          const body = completion(mode.content);
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length + 100) });
          res.write(body.slice(0, Math.floor(body.length / 2)));
          a.sent += Math.floor(body.length / 2);
          return later(20, () => res.socket?.destroy());
        }
        case 'echo': {
          const auth = req.headers.authorization ?? '(none)';
          if (mode.where === 'error') return send(500, JSON.stringify({ error: { message: `upstream rejected the request with headers {"authorization": "${auth}"}` } }));
          return send(200, completion(`Thought: the header was ${auth.replace(/^Bearer /, '')} and ${auth}\nAnswer: 4`));
        }
        case 'hang':
          return; // never answers
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    arrivals,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
