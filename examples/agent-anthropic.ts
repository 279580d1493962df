/**
 * An agent loop with Claude's computer-use tool on a burrow browser instance: the model's
 * `tool_use` blocks go straight to `agent.toolResult(block)` (burrow-sandbox/agents), whose
 * `tool_result` blocks go back in the next user turn.
 *
 * With `ANTHROPIC_API_KEY` set it asks Claude through the Messages API (`ANTHROPIC_MODEL`,
 * default claude-opus-4-5, which takes `computer_20251124`); without, a scripted stand-in plays
 * the model with the same message shapes, so the loop runs offline (the test suite runs it so).
 *
 * `node --import tsx examples/agent-anthropic.ts`
 */
import { openSession } from 'burrow-sandbox';
import {
  anthropicAgent,
  type AnthropicAgent,
  type AnthropicToolResult,
  type AnthropicToolUse,
} from 'burrow-sandbox/agents';
import { BUTTON, center, FIELD, FORM_PAGE, TASK, WORD } from './agent-form.js';
import { serve } from './local-site.js';

type Block = { type: 'text'; text: string } | AnthropicToolUse;
type Message =
  | { role: 'user'; content: string | AnthropicToolResult[] }
  | { role: 'assistant'; content: Block[] };
/** One model turn: the assistant's content blocks. */
type Model = (messages: Message[], agent: AnthropicAgent) => Promise<Block[]>;

/** Claude through the Messages API. */
function claude(apiKey: string, model: string): Model {
  return async (messages, agent) => {
    const res = await fetch('https://api.anthropic.com/v1/messages', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': apiKey,
        'anthropic-version': '2023-06-01',
        'anthropic-beta': agent.betaHeader,
      },
      body: JSON.stringify({ model, max_tokens: 2048, tools: agent.tools, messages }),
    });
    if (!res.ok) throw new Error(`Anthropic API ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { content: Block[] }).content;
  };
}

/**
 * The stand-in: the turns a model would take for this form, in the model's display coordinates
 * (`agent.scaler` maps the page's boxes there); it reads the banner from the last tool result.
 */
function scripted(): Model {
  let turn = 0;
  return async (messages, agent) => {
    const last = messages.at(-1)!;
    if (
      last.role === 'user' &&
      Array.isArray(last.content) &&
      last.content.some((r) => r.is_error)
    ) {
      throw new Error(`a tool failed: ${JSON.stringify(last.content)}`);
    }
    const at = (b: typeof FIELD) => agent.scaler.toModel(...center(b));
    const use = (input: Record<string, unknown>): Block => ({
      type: 'tool_use',
      id: `toolu_stand_in_${++turn}`,
      name: 'computer',
      input,
    });
    switch (turn) {
      case 0:
        return [
          { type: 'text', text: 'Let me look at the screen.' },
          use({ action: 'screenshot' }),
        ];
      case 1:
        return [use({ action: 'left_click', coordinate: at(FIELD) })];
      case 2:
        return [use({ action: 'type', text: WORD })];
      case 3:
        return [use({ action: 'left_click', coordinate: at(BUTTON) })];
      case 4:
        // a closer look at where the banner appears
        return [use({ action: 'zoom', region: [0, 180, 512, 260] })];
      default:
        return [{ type: 'text', text: 'Done: the banner appeared under the form.' }];
    }
  };
}

const apiKey = process.env.ANTHROPIC_API_KEY;
const model = apiKey
  ? claude(apiKey, process.env.ANTHROPIC_MODEL ?? 'claude-opus-4-5')
  : scripted();
console.log(
  `model: ${apiKey ? (process.env.ANTHROPIC_MODEL ?? 'claude-opus-4-5') : 'scripted stand-in'}`,
);

await using site = await serve({ '/': FORM_PAGE });
await using session = await openSession({ resolution: [1024, 768] });
await session.page.goto(site.url); // setting the scene; the agent works from pixels only

const agent = await anthropicAgent(session);
const messages: Message[] = [{ role: 'user', content: TASK }];
for (let step = 1; step <= 25; step++) {
  const content = await model(messages, agent);
  messages.push({ role: 'assistant', content });
  const calls = content.filter((b): b is AnthropicToolUse => b.type === 'tool_use');
  for (const b of content) if (b.type === 'text') console.log(`claude: ${b.text}`);
  if (calls.length === 0) break;
  const results: AnthropicToolResult[] = [];
  for (const call of calls) {
    const { action, ...args } = call.input as { action?: string };
    console.log(`step ${step}: ${call.name} ${action ?? ''} ${JSON.stringify(args)}`);
    results.push(await agent.toolResult(call));
  }
  messages.push({ role: 'user', content: results });
}

const banner = await session.page.textContent('#banner');
console.log(`banner: ${banner}`);
if (banner !== `Thanks, ${WORD}!`) process.exitCode = 1;
