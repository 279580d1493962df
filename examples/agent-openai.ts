/**
 * An agent loop with OpenAI's computer-use tool on a burrow browser instance: each
 * `computer_call` of the model's response goes straight to `agent.toolResult(call)`
 * (burrow-sandbox/agents), whose `computer_call_output` (a screenshot) is the next request's input.
 *
 * With `OPENAI_API_KEY` set it asks the Responses API (`OPENAI_MODEL`, default
 * computer-use-preview); without, a scripted stand-in plays the model with the same item shapes
 * (one action per call, and a batch in `actions`), so the loop runs offline (the tests run it so).
 *
 * `node --import tsx examples/agent-openai.ts`
 */
import { openSession } from 'burrow-sandbox';
import {
  openaiAgent,
  type OpenAIAgent,
  type OpenAIComputerCall,
  type OpenAIComputerCallOutput,
} from 'burrow-sandbox/agents';
import { BUTTON, center, FIELD, FORM_PAGE, TASK, WORD } from './agent-form.js';
import { serve } from './local-site.js';

type OutputItem =
  | OpenAIComputerCall
  | { type: 'message'; content: { type: string; text?: string }[] }
  | { type: 'reasoning' };
interface Response {
  id: string;
  output: OutputItem[];
}
type Input = string | OpenAIComputerCallOutput[];
/** One model turn: a response of the Responses API. */
type Model = (input: Input, previous: string | undefined, agent: OpenAIAgent) => Promise<Response>;

function responsesApi(apiKey: string, model: string): Model {
  return async (input, previous, agent) => {
    const res = await fetch('https://api.openai.com/v1/responses', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({
        model,
        // the preview model takes the tool with its display; gpt-5.4 and later the GA one
        tools: [model === 'computer-use-preview' ? agent.tool : agent.gaTool],
        input,
        truncation: 'auto',
        ...(previous && { previous_response_id: previous }),
      }),
    });
    if (!res.ok) throw new Error(`OpenAI API ${res.status}: ${await res.text()}`);
    return (await res.json()) as Response;
  };
}

/** The stand-in: the calls a model would make for this form, in the declared display's pixels. */
function scripted(): Model {
  let turn = 0;
  return async (input, _previous, agent) => {
    if (
      turn > 0 &&
      (typeof input === 'string' ||
        !input[0]?.output.image_url.startsWith('data:image/png;base64,'))
    ) {
      throw new Error('expected a computer_call_output with a screenshot');
    }
    const xy = (b: typeof FIELD) => {
      const [x, y] = agent.scaler.toModel(...center(b));
      return { x, y };
    };
    const call = (body: Partial<OpenAIComputerCall>): OutputItem => ({
      type: 'computer_call',
      call_id: `call_stand_in_${turn}`,
      pending_safety_checks: [],
      status: 'completed',
      ...body,
    });
    const output: OutputItem[] = [
      [call({ action: { type: 'screenshot' } })],
      [
        call({
          actions: [
            { type: 'click', button: 'left', ...xy(FIELD) },
            { type: 'type', text: WORD },
          ],
        }),
      ],
      [call({ action: { type: 'click', button: 'left', ...xy(BUTTON) } })],
      [
        {
          type: 'message' as const,
          content: [{ type: 'output_text', text: 'Done: a banner appeared under the form.' }],
        },
      ],
    ][Math.min(turn, 3)]!;
    turn++;
    return { id: `resp_stand_in_${turn}`, output };
  };
}

const apiKey = process.env.OPENAI_API_KEY;
const modelName = process.env.OPENAI_MODEL ?? 'computer-use-preview';
const model = apiKey ? responsesApi(apiKey, modelName) : scripted();
console.log(`model: ${apiKey ? modelName : 'scripted stand-in'}`);

await using site = await serve({ '/': FORM_PAGE });
await using session = await openSession({ resolution: [1024, 768] });
await session.page.goto(site.url); // setting the scene; the agent works from pixels only

const agent = await openaiAgent(session);
let input: Input = TASK;
let previous: string | undefined;
for (let step = 1; step <= 25; step++) {
  const response = await model(input, previous, agent);
  previous = response.id;
  const outputs: OpenAIComputerCallOutput[] = [];
  for (const item of response.output) {
    if (item.type === 'message') {
      console.log(`model: ${item.content.map((c) => c.text ?? '').join('')}`);
    } else if (item.type === 'computer_call') {
      const actions = item.actions ?? (item.action ? [item.action] : []);
      console.log(`step ${step}: ${actions.map((a) => JSON.stringify(a)).join(', ')}`);
      outputs.push(await agent.toolResult(item));
    }
  }
  if (outputs.length === 0) break;
  input = outputs;
}

const banner = await session.page.textContent('#banner');
console.log(`banner: ${banner}`);
if (banner !== `Thanks, ${WORD}!`) process.exitCode = 1;
