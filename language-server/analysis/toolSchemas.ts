// The agent's tools as an MCP server lists them (defined in core/tools/schemas.ts, shared
// with the HTTP teacher). Completion builds tool-call skeletons from these, in
// the canonical spacing and key order (renderCallBody), so a skeleton is what the model
// was trained on.
import { JsonObject } from '../../core/pyjson';
import { renderCallBody } from '../../core/wire';
import type { McpTool } from '../../core/tools/schemas';

export { AGENT_TOOLS, toolsLine } from '../../core/tools/schemas';
export type { JsonSchemaProperty, McpTool } from '../../core/tools/schemas';

export interface Skeleton {
  tool: McpTool;
  /** The canonical call body with placeholder values. */
  body: string;
  /** Where each placeholder sits in `body`: [start, end, property name], in order. */
  holes: [number, number, string][];
}

/**
 * A call body for a tool with every property filled: strings with their name (a
 * placeholder), numbers with the default, else the minimum, else 1.
 */
export function skeleton(tool: McpTool): Skeleton {
  const args: JsonObject = {};
  const marks = new Map<string, string>();
  for (const [name, p] of Object.entries(tool.inputSchema.properties)) {
    if (p.type === 'string') {
      const mark = `@@${name}@@`;
      marks.set(mark, name);
      args[name] = mark;
    } else if (p.type === 'boolean') args[name] = typeof p.default === 'boolean' ? p.default : false;
    else args[name] = typeof p.default === 'number' ? p.default : (p.minimum ?? 1);
  }
  const rendered = renderCallBody(tool.name, args);
  // Replace the marks with their names; record where each value (the placeholder) sits.
  let body = '';
  const holes: [number, number, string][] = [];
  let at = 0;
  const re = /@@([A-Za-z0-9_]+)@@|(?<=": )(-?\d+|true|false)(?=[,}])/g;
  for (let m = re.exec(rendered); m !== null; m = re.exec(rendered)) {
    body += rendered.slice(at, m.index);
    const name = m[1] ?? propertyBefore(rendered, m.index);
    const value = m[1] ?? m[0];
    holes.push([body.length, body.length + value.length, name]);
    body += value;
    at = m.index + m[0].length;
  }
  body += rendered.slice(at);
  return { tool, body, holes };
}

function propertyBefore(text: string, at: number): string {
  const m = /"([^"]+)": $/.exec(text.slice(0, at));
  return m ? m[1]! : 'value';
}
