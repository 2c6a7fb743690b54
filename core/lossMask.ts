// The loss mask, as the seed's `_segment`: spans that PARTITION a transcript (their
// concatenation is the transcript, byte for byte). Assistant content is supervised, the
// `<|assistant|>` marker is not, the `<|end|>` closing an assistant span is; system, user
// and tool-result spans are masked. `<|tool_call|>` is not a boundary, so calls are
// supervised. The same function defines the RL generated-token mask.
import { ASST, END, SYS, TOOL_RESULT, USER } from './wire';

export type Segment = [text: string, supervised: boolean];

const MARKERS = [ASST, USER, SYS, TOOL_RESULT, END] as const;

export function segment(transcript: string): Segment[] {
  const out: Segment[] = [];
  // Next occurrence of each marker at or after `i`, refreshed only when passed, so the
  // scan is linear rather than the seed's find-per-marker-per-step.
  const next = MARKERS.map((m) => transcript.indexOf(m));
  let i = 0;
  let supervised = false;
  while (i < transcript.length) {
    let j = transcript.length;
    let marker: string | null = null;
    for (let k = 0; k < MARKERS.length; k++) {
      if (next[k]! !== -1 && next[k]! < i) next[k] = transcript.indexOf(MARKERS[k]!, i);
      if (next[k]! !== -1 && next[k]! < j) {
        j = next[k]!;
        marker = MARKERS[k]!;
      }
    }
    if (j > i) out.push([transcript.slice(i, j), supervised]);
    if (marker === null) break;
    if (marker === ASST) {
      supervised = true;
      out.push([marker, false]);
    } else if (marker === END) {
      out.push([marker, supervised]);
      supervised = false;
    } else {
      supervised = false;
      out.push([marker, false]);
    }
    i = j + marker.length;
  }
  return out;
}
