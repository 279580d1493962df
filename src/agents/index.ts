/**
 * `burrow-sandbox/agents`: the computer-use vocabularies of the model vendors, mapped onto
 * burrow, so an agent loop hands the model's tool calls straight through:
 *
 * ```ts
 * const agent = await anthropicAgent(agentTarget(client, instance));
 * // tools: agent.tools, header anthropic-beta: agent.betaHeader
 * for (const block of message.content) if (block.type === 'tool_use') results.push(await agent.toolResult(block));
 * // or, with the defaults, for either vendor:
 * await toolResult(session, call);
 * ```
 */
import {
  anthropicAgent,
  type AnthropicAgent,
  type AnthropicToolResult,
  type AnthropicToolUse,
} from './anthropic.js';
import {
  openaiAgent,
  type OpenAIAgent,
  type OpenAIComputerCall,
  type OpenAIComputerCallOutput,
} from './openai.js';
import type { AgentTarget } from './target.js';

export {
  ANTHROPIC_MAX_LONG_EDGE,
  ANTHROPIC_MAX_PIXELS,
  anthropicAgent,
  anthropicDisplaySize,
  fromAnthropicComputer,
  toAnthropicComputer,
  type AnthropicAgent,
  type AnthropicAgentOptions,
  type AnthropicBashInput,
  type AnthropicComputerInput,
  type AnthropicComputerVersion,
  type AnthropicContent,
  type AnthropicEditorInput,
  type AnthropicEditorVersion,
  type AnthropicToolDefinition,
  type AnthropicToolResult,
  type AnthropicToolUse,
  type BurrowStep,
} from './anthropic.js';
export {
  fromOpenAIAction,
  openaiAgent,
  PIXELS_PER_NOTCH,
  toOpenAIAction,
  type OpenAIAgent,
  type OpenAIAgentOptions,
  type OpenAIComputerAction,
  type OpenAIComputerCall,
  type OpenAIComputerCallOutput,
  type OpenAISafetyCheck,
} from './openai.js';
export {
  agentTarget,
  Scaler,
  screenSize,
  UnsupportedActionError,
  type AgentTarget,
  type Size,
} from './target.js';

const agents = new WeakMap<
  AgentTarget,
  { anthropic?: Promise<AnthropicAgent>; openai?: Promise<OpenAIAgent> }
>();

function cached(target: AgentTarget) {
  let entry = agents.get(target);
  if (!entry) agents.set(target, (entry = {}));
  return entry;
}

/**
 * Runs a model's tool call on `target` with the default mapping of its vendor (Anthropic's
 * `tool_use` block with `computer_20251124` and the declared display of `anthropicDisplaySize`;
 * OpenAI's `computer_call` at the screen's own size) and answers what the model's next turn
 * carries. For other versions or sizes use `anthropicAgent` / `openaiAgent`.
 */
export function toolResult(
  target: AgentTarget,
  call: AnthropicToolUse,
): Promise<AnthropicToolResult>;
export function toolResult(
  target: AgentTarget,
  call: OpenAIComputerCall,
): Promise<OpenAIComputerCallOutput>;
export async function toolResult(
  target: AgentTarget,
  call: AnthropicToolUse | OpenAIComputerCall,
): Promise<AnthropicToolResult | OpenAIComputerCallOutput> {
  const entry = cached(target);
  if (call.type === 'tool_use') {
    const agent = await (entry.anthropic ??= anthropicAgent(target));
    return agent.toolResult(call);
  }
  if (call.type === 'computer_call') {
    const agent = await (entry.openai ??= openaiAgent(target));
    return agent.toolResult(call);
  }
  throw new Error(`not a tool call: type "${String((call as { type?: unknown }).type)}"`);
}
export { pngSize } from './image.js';
