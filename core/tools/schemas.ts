// The agent's tools as an MCP server lists them (`name`, `description`, `inputSchema`), the
// shape the seed's mcp_adapter reads. One definition for the language server's completion
// skeletons and the HTTP teacher's system message.

export interface JsonSchemaProperty {
  type: 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  minimum?: number;
  maximum?: number;
  default?: string | number | boolean;
}

export interface McpTool {
  name: string;
  description: string;
  inputSchema: { type: 'object'; properties: Record<string, JsonSchemaProperty>; required?: string[] };
}

/** The seed's `search` schema verbatim, and the matching one for `calc`. */
export const AGENT_TOOLS: readonly McpTool[] = [
  {
    name: 'search',
    description: 'Search the local corpus and return the top-k passages.',
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'Keyword query.' },
        k: { type: 'integer', minimum: 1, maximum: 5, default: 2 },
      },
      required: ['query'],
    },
  },
  {
    name: 'calc',
    description: 'Evaluate an arithmetic expression exactly (+ - * / ** // % and parentheses).',
    inputSchema: {
      type: 'object',
      properties: { expr: { type: 'string', description: 'Arithmetic expression, e.g. 2019+10000.' } },
      required: ['expr'],
    },
  },
];

/** The seed's `tools_line`: 'search(query,k), calc(expr)'. */
export function toolsLine(tools: readonly McpTool[] = AGENT_TOOLS): string {
  return tools.map((t) => `${t.name}(${Object.keys(t.inputSchema.properties).join(',')})`).join(', ');
}
